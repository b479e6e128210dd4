"""Plain typed records that cross the public API.

Every record is a pydantic v2 model with ``extra="forbid"``: an unknown field is
an error that names it, never silently dropped. Times are timezone-aware UTC
``datetime`` objects.

    >>> from unified_memory.types import Message
    >>> Message(role="user", content="I'm allergic to peanuts").role
    'user'

The records the tiers store (messages, facts, entities, triples, episodes, extractions) are
defined in :mod:`tiers.records.types`, below the tiers, and importable from here; the results
only the front door builds (recall hits, context blocks, stats, keyed items) are defined here.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import Field, field_validator, model_validator

from tiers.records.types import (
    TIERS,
    Entity,
    Episode,
    ExtractedEntity,
    ExtractedFact,
    ExtractedTriple,
    Extraction,
    Fact,
    Message,
    Record,
    Role,
    Tier,
    Triple,
    trusted_record,
    utc_from_timestamp,
)
from tiers.records.values import (  # noqa: F401 - the value rules, kept importable from here
    LONE_SURROGATE,
    MAX_JSON_DEPTH,
    check_json_value,
    holds_nul,
    json_depth,
    text_fault,
)

__all__ = [
    "Role",
    "Tier",
    "TIERS",
    "Message",
    "Fact",
    "Entity",
    "Triple",
    "Episode",
    "RecallHit",
    "SectionUsage",
    "ContextBlock",
    "Profile",
    "MemoryStats",
    "ExtractedFact",
    "ExtractedEntity",
    "ExtractedTriple",
    "Extraction",
    "StoredItem",
    "utc_from_timestamp",
    "json_depth",
    "trusted_record",
    "text_fault",
]


class RecallHit(Record):
    """One result of a federated recall, with the parts its score was made of.

    ``components`` always has ``relevance`` (0..1, comparable across tiers),
    ``importance``, ``recency`` and ``tier_weight``; their product-and-blend is
    ``score`` (see :func:`scoring.fusion.fuse`).
    """

    id: str
    tier: Tier
    text: str
    score: float
    components: dict[str, float | int | str | bool | None] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None

    @field_validator("score")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("score must be finite")
        return value


class SectionUsage(Record):
    """How one section of a context block spent its budget."""

    name: str
    budget: int
    tokens: int
    items: int
    dropped: int = 0


class ContextBlock(Record):
    """A token-budgeted memory block for the next LLM call.

    ``hits`` are exactly the recall hits whose text appears in ``text``;
    ``tokens`` is ``count_tokens(text)`` and never exceeds ``max_tokens``.
    """

    text: str
    tokens: int
    max_tokens: int
    hits: list[RecallHit] = Field(default_factory=list)
    sections: dict[str, SectionUsage] = Field(default_factory=dict)
    query: str | None = None

    def __str__(self) -> str:
        return self.text


class Profile(Record):
    """What the agent should always know about the user: their current key facts, safety first.

    ``facts`` are the facts behind it (active ones only: a superseded value is out), in the order
    shown; ``text`` is one line per fact (``- I'm allergic to peanuts``), and ``name`` what the user
    is called when the graph knows it. ``speakers`` says who said each fact (``{fact id: name}``)
    when the key facts were said by more than one named speaker (a group conversation): then each
    of their lines says who (``- Caroline: I'm keen on counseling``). See
    :mod:`unified_memory.retrieval.profile`.
    """

    text: str
    facts: list[Fact] = Field(default_factory=list)
    name: str | None = None
    speakers: dict[str, str] = Field(default_factory=dict)

    def __str__(self) -> str:
        return self.text


class MemoryStats(Record):
    """Counts of what one user's memory holds (the scope of the asking instance).

    ``facts`` counts the active facts, ``superseded_facts`` and ``archived_facts`` those
    kept as history or pushed out by ``long_term_limit``; ``evicted_facts`` is the old
    name of ``archived_facts`` (deprecated, the same value).

    >>> stats = MemoryStats(user_id="ada", messages=0, window_messages=0, window_tokens=0, pending_promotion=0,
    ...                     facts=100, superseded_facts=2, archived_facts=7, entities=0, triples=0, path=None,
    ...                     schema_version=2)
    >>> stats.archived_facts, stats.model_dump()["evicted_facts"]
    (7, 7)
    """

    user_id: str
    messages: int
    window_messages: int
    window_tokens: int
    pending_promotion: int
    facts: int
    superseded_facts: int
    archived_facts: int
    evicted_facts: int = Field(default=0, deprecated="evicted_facts is archived_facts (facts are archived, not "
                                                     "evicted): read archived_facts")
    entities: int
    triples: int
    path: str | None
    schema_version: int
    search: str = Field(default="in-process", description=(
        "Where recall finds its candidates: 'database' (PostgreSQL with pgvector: BM25 and vectors in tables, "
        "nothing per user in the process) or 'in-process' (this process's indexes)."))
    search_reason: str | None = Field(default=None, description="Why it searches in-process, when it does.")

    @model_validator(mode="before")
    @classmethod
    def _evicted_is_archived(cls, data: Any) -> Any:
        if isinstance(data, dict) and "archived_facts" in data and "evicted_facts" not in data:
            return {**data, "evicted_facts": data["archived_facts"]}
        return data


class StoredItem(Record):
    """A keyed item (:meth:`~unified_memory.UnifiedMemory.put_item`): a JSON object stored under a
    ``namespace`` (a tuple of labels) and a ``key``. A search with a query sets ``score``: the
    cosine similarity of the query to the item's closest indexed field when the search compares
    vectors, else its BM25 relevance in [0, 1] (``None``: the item has nothing indexed). The
    order is the memory's fused ranking, whose parts are in ``ranking`` (``fused``, ``lexical``,
    ``dense``, ``recency``).

    >>> from datetime import UTC, datetime
    >>> now = datetime(2024, 1, 1, tzinfo=UTC)
    >>> StoredItem(namespace=["notes"], key="n1", value={"text": "hi"}, created_at=now, updated_at=now).namespace
    ('notes',)
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None
    ranking: dict[str, float | None] | None = None
