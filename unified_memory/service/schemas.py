"""The JSON bodies of the HTTP API (pydantic). Unknown fields are refused (422 naming the
field); the values' own rules (ranges, non-empty text, known tiers) are the library's, so a
request and a Python call are checked alike. Answers are the library's records as JSON
(:class:`~unified_memory.types.RecallHit`, :class:`~unified_memory.types.Fact`, ...).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TurnIn", "MessageIn", "MessagesIn", "FactIn", "FactsIn", "TripleIn", "RecallIn", "ContextIn", "ForgetIn",
           "ItemIn", "ItemKeyIn", "ItemGetIn", "ItemSearchIn", "ItemNamespacesIn", "Ids", "IdOut", "Deleted", "Imported", "FactPage", "RecallOut"]

Moment = str | float | None


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TurnIn(_Body):
    """``POST /turns``: a user message and, optionally, the assistant's reply."""

    user: str
    assistant: str | None = None
    when: Moment = None
    metadata: dict[str, Any] | None = None
    extract: bool | None = None


class MessageIn(_Body):
    """One message, OpenAI-style."""

    role: str
    content: str | None = None
    name: str | None = None
    when: Moment = None
    metadata: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class MessagesIn(_Body):
    """``POST /messages``: messages logged in one transaction."""

    messages: list[MessageIn] = Field(min_length=1)
    extract: bool | None = None


class FactIn(_Body):
    """``POST /facts``: one long-term fact."""

    text: str
    importance: float | None = None
    category: str | None = None
    metadata: dict[str, Any] | None = None
    ttl_days: float | None = None


class FactCorrectionIn(_Body):
    """``PATCH /facts/{fact_id}``: what a correction changes (at least one); the old version stays as history."""

    text: str | None = None
    importance: float | None = None
    category: str | None = None


class FactsIn(_Body):
    """``POST /facts/batch``: facts stored in one transaction (all or none)."""

    facts: list[str | FactIn] = Field(min_length=1)


class TripleIn(_Body):
    """``POST /triples``: a relation of the entity graph."""

    subject: str
    predicate: str
    object: str
    confidence: float = 1.0
    metadata: dict[str, Any] | None = None


class RecallIn(_Body):
    """``POST /recall``."""

    query: str
    limit: int = 10
    tiers: list[str] | str | None = None
    days: float | None = None
    where: dict[str, Any] | None = None
    as_of: Moment = None
    diversify: bool = True


class ContextIn(_Body):
    """``POST /context``."""

    query: str | None = None
    max_tokens: int | None = None
    include_conversation: bool = True
    limit: int | None = None
    as_of: Moment = None


class ForgetIn(_Body):
    """``POST /forget``: ids of this user's messages, facts, entities or relations."""

    ids: list[str] = Field(min_length=1, max_length=10_000)


class ItemIn(_Body):
    """``PUT /items``: a keyed item (``UnifiedMemory.put_item``)."""

    namespace: list[str]
    key: str
    value: dict[str, Any]
    index: list[str] | bool | None = None
    ttl: float | None = None
    vectors: list[list[float]] | None = None


class ItemKeyIn(_Body):
    """``POST /items/delete``: one item's namespace and key."""

    namespace: list[str]
    key: str


class ItemGetIn(ItemKeyIn):
    """``POST /items/get``: one item's namespace and key, and whether reading restarts its TTL."""

    refresh_ttl: bool = True


class ItemSearchIn(_Body):
    """``POST /items/search`` (``UnifiedMemory.search_items``)."""

    namespace_prefix: list[str] = Field(default_factory=list)
    query: str | None = None
    filter: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    refresh_ttl: bool = True
    query_vector: list[float] | None = None
    distance_type: str = "cosine"


class ItemNamespacesIn(_Body):
    """``POST /items/namespaces`` (``UnifiedMemory.item_namespaces``)."""

    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0


class Ids(BaseModel):
    """The ids of what was written, in order."""

    ids: list[str]


class IdOut(BaseModel):
    """The id of what was written."""

    id: str


class Deleted(BaseModel):
    """Rows deleted per table."""

    deleted: dict[str, int]


class Imported(BaseModel):
    """Rows imported."""

    imported: int


class FactPage(BaseModel):
    """One page of facts; ``next_offset`` is None on the last page."""

    facts: list[dict[str, Any]]
    total: int
    next_offset: int | None


class RecallOut(BaseModel):
    """Recall hits, best first."""

    hits: list[dict[str, Any]]


class ErrorDetail(BaseModel):
    """What went wrong: a stable ``type`` (``invalid``, ``unauthorized``, …), the request field it
    names (``None`` when no single field is at fault) and a message for people."""

    type: str
    field: str | None
    message: str


class ErrorBody(BaseModel):
    """Every refusal's body (see :mod:`unified_memory.service.errors`)."""

    error: ErrorDetail
