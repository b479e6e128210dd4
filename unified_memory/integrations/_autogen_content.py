"""AutoGen memory content as the memory's facts, and recall hits back as content (a part of
:mod:`unified_memory.integrations.autogen`, which documents the behaviour).

- What ``add`` stores: the text of a ``text/*`` content (the fact's text is stripped, as every
  fact is: the blanks around it are kept in the fact's metadata, so the content comes back
  exactly as it was added), the JSON text of an ``application/json`` dict; its MIME type and
  the adapter's name in the fact's metadata. Images and binary content are refused.
- What ``query`` returns: each hit as ``MemoryContent`` with the metadata it was added with,
  and (``annotate``) its ``score``: a similarity in [-1, 1] (the cosine of the query's and the
  fact's embeddings when the memory has an embedder, else the BM25 relevance in [0, 1]), as
  AutoGen's vector memories report one, ``recall_score`` (the memory's fused score, which orders
  the results), ``id``, ``tier``, ``created_at`` and ``status`` when not active.
"""

from __future__ import annotations

import json
import math
from typing import Any

from unified_memory.errors import DependencyError, invalid, wrong_type
from unified_memory.types import Fact, RecallHit
from unified_memory.validation import check_text

try:
    from autogen_core import Image
    from autogen_core.memory import MemoryContent, MemoryMimeType
except ImportError as exc:  # unified_memory.integrations.autogen says so first
    raise DependencyError('unified_memory.integrations.autogen needs autogen-core: '
                          'pip install "unified-memory[autogen]"') from exc

__all__ = ["NAME_KEY", "MIME_KEY", "PADDING_KEY", "RESERVED_KEYS", "stored_text", "query_text", "similarity",
           "score_of", "as_content", "fact_hit", "threshold"]

#: Metadata keys of a stored fact: the adapter ``name`` that added it, its content's MIME type,
#: and the blanks before and after its text (only when it had some).
NAME_KEY, MIME_KEY, PADDING_KEY = "autogen_memory", "autogen_mime_type", "autogen_padding"
RESERVED_KEYS = (NAME_KEY, MIME_KEY, PADDING_KEY)
_JSON = MemoryMimeType.JSON.value
_KINDS = {kind.value: kind for kind in MemoryMimeType}


def _mime(content: MemoryContent) -> str:
    kind = content.mime_type
    return str(kind.value if isinstance(kind, MemoryMimeType) else kind)


def stored_text(content: Any) -> tuple[str, str, list[str] | None]:
    """The text a content is stored as, its MIME type, and the blanks around the text
    (``[before, after]``, ``None`` when there are none); refuses what is not text or JSON."""
    if not isinstance(content, MemoryContent):
        raise wrong_type("content", "MemoryContent", content)
    mime, value = _mime(content), content.content
    if mime == _JSON:
        if not isinstance(value, dict):
            raise invalid("content.content", f"JSON content must be a dict, got {type(value).__name__}")
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise invalid("content.content", f"JSON content must be JSON-serialisable: {exc}") from None
    elif mime.startswith("text/") and not isinstance(value, Image):
        if not isinstance(value, str):
            raise wrong_type("content.content", f"str for {mime} content", value)
        text = value
    else:
        raise invalid("content.mime_type", f"Unsupported content type {mime!r}: text (text/plain, text/markdown, "
                                           "text/*) and JSON (application/json) are stored; store a text "
                                           "description of an image or a file instead")
    text = check_text("content.content", text)
    before, after = text[:len(text) - len(text.lstrip())], text[len(text.rstrip()):]
    return text, mime, [before, after] if before or after else None


def query_text(query: Any) -> str:
    """The text a query searches by: a string, or a text or JSON ``MemoryContent``."""
    if isinstance(query, str):
        return query
    if isinstance(query, MemoryContent):
        if _mime(query) == _JSON and isinstance(query.content, dict):
            return json.dumps(query.content, ensure_ascii=False, default=str)
        if isinstance(query.content, str):
            return query.content
        raise invalid("query", f"Unsupported content type {_mime(query)!r}: a query is text or JSON")
    raise wrong_type("query", "str or MemoryContent", query)


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def similarity(hit: RecallHit) -> float | None:
    """How close a hit is to the query: the cosine similarity of their embeddings (a memory with
    an embedder), else the hit's relevance (BM25 relevance in [0, 1] for a lexical memory);
    ``None`` for a hit found without a query (the most important or the latest facts)."""
    parts = hit.components or {}
    cosine = _number(parts.get("cosine"))
    return cosine if cosine is not None else _number(parts.get("relevance"))


def score_of(hit: RecallHit) -> float:
    """A hit's ``score``: its :func:`similarity`, else (no query) its recall score."""
    close = similarity(hit)
    return close if close is not None else hit.score


def _padded(text: str, padding: Any) -> str:
    """The text with the blanks it was added with."""
    if isinstance(padding, list) and len(padding) == 2:
        before, after = padding
        if isinstance(before, str) and isinstance(after, str) and not (before + after).strip():
            return before + text + after
    return text


def as_content(hit: RecallHit, *, annotate: bool = True) -> MemoryContent:
    """A recall hit as AutoGen memory content (a fact ``add`` stored comes back as it was added)."""
    metadata = dict(hit.metadata or {})
    metadata.pop(NAME_KEY, None)
    mime, padding = metadata.pop(MIME_KEY, None), metadata.pop(PADDING_KEY, None)
    value: Any = hit.text
    kind: MemoryMimeType | str = MemoryMimeType.TEXT
    if hit.tier == "long_term" and isinstance(mime, str):
        if mime == _JSON:
            try:
                parsed = json.loads(hit.text)
            except ValueError:  # changed on the way in (a redactor): its text, as text
                parsed = None
            if isinstance(parsed, dict):
                value, kind = parsed, MemoryMimeType.JSON
        else:
            value, kind = _padded(hit.text, padding), _KINDS.get(mime, mime)
    if annotate:
        metadata.update(score=score_of(hit), recall_score=hit.score, id=hit.id, tier=hit.tier)
        if hit.created_at is not None:
            metadata["created_at"] = hit.created_at.isoformat()
        status = (hit.components or {}).get("status")
        if isinstance(status, str) and status != "active":
            metadata["status"] = status
    return MemoryContent(content=value, mime_type=kind, metadata=metadata)


def fact_hit(fact: Fact) -> RecallHit:
    """A fact listed without a query (``sequential``) as a hit scored by its importance."""
    return RecallHit(id=fact.id, tier="long_term", text=fact.text, score=fact.importance,
                     components={"importance": fact.importance, "status": fact.status},
                     metadata=fact.metadata, created_at=fact.created_at)


def threshold(field: str, value: Any) -> float | None:
    """A finite number or ``None``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong_type(field, "a number or None", value)
    if not math.isfinite(value):
        raise invalid(field, f"must be a finite number, got {value!r}")
    return float(value)
