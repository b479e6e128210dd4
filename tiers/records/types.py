"""The records the tiers keep and the front door hands out: messages, facts, entities, triples,
episodes, and what an extractor proposes. Public as :mod:`unified_memory.types`.

Every record is a pydantic v2 model with ``extra="forbid"``: an unknown field is an error that
names it, never silently dropped. Times are timezone-aware UTC ``datetime`` objects.

    >>> from tiers.records.types import Message
    >>> Message(role="user", content="I'm allergic to peanuts").role
    'user'

They live here, below the tiers that store them, so that no layer reaches up for them; the
results only the front door builds (recall hits, context blocks, stats, keyed items) stay in
:mod:`unified_memory.types`. This module imports only :mod:`tiers.records.values` (the rules a
stored value meets).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tiers.records.values import (
    check_json_value,
)

__all__ = [
    "Role",
    "Tier",
    "TIERS",
    "Record",
    "Message",
    "Fact",
    "Entity",
    "Triple",
    "Episode",
    "ExtractedFact",
    "ExtractedEntity",
    "ExtractedTriple",
    "Extraction",
    "utc_from_timestamp",
    "trusted_record",
]

Role = Literal["user", "assistant", "system", "tool"]
Tier = Literal["short_term", "long_term", "entity", "episodic"]
TIERS: tuple[str, ...] = ("short_term", "long_term", "entity", "episodic")


def utc_from_timestamp(ts: float | None) -> datetime | None:
    """Turn a stored POSIX timestamp into an aware UTC datetime (``None`` stays ``None``).

    >>> utc_from_timestamp(0).isoformat()
    '1970-01-01T00:00:00+00:00'
    """
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC)


class Record(BaseModel):
    """The base of every record: unknown fields are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


R = TypeVar("R", bound=BaseModel)
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def trusted_record(cls: type[R], **values: Any) -> R:
    """A record of values already checked (rows the library wrote, recall's own results): what
    ``cls.model_construct(**values)`` builds, without its per-field work (2 µs instead of 5 for a
    Message: a context builds some 120 records). Every field must be given; nothing is validated.

    >>> trusted_record(ExtractedEntity, name="Maria", type="person", attributes={}) == ExtractedEntity(
    ...     name="Maria", type="person")
    True
    """
    names = _FIELD_NAMES.get(cls)
    if names is None:  # pydantic's model_fields is a property that builds a dict on each access
        names = _FIELD_NAMES[cls] = tuple(cls.model_fields)
    record = cls.__new__(cls)
    fields = {name: values[name] for name in names}  # all of them, in declared order
    if len(fields) != len(values):
        raise TypeError(f"{cls.__name__}: unknown fields {sorted(set(values) - set(fields))}")
    object.__setattr__(record, "__dict__", fields)
    object.__setattr__(record, "__pydantic_fields_set__", set(fields))
    object.__setattr__(record, "__pydantic_extra__", None)
    object.__setattr__(record, "__pydantic_private__", None)
    return record


class Message(Record):
    """One chat message, in the shape OpenAI-style chat APIs use.

    ``tool_calls`` is the assistant's list of calls (each a dict with an ``id``);
    a ``tool`` message answers one of them through ``tool_call_id``.

    >>> m = Message(role="assistant", content=None, tool_calls=[{"id": "c1", "type": "function",
    ...     "function": {"name": "lookup", "arguments": "{}"}}])
    >>> m.tool_call_ids()
    ['c1']
    """

    role: Role
    content: str | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    images: list[str] | None = None
    reasoning_details: list[dict[str, Any]] | None = None
    id: str | None = None
    created_at: datetime | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None

    @field_validator("metadata", "tool_calls", "reasoning_details")
    @classmethod
    def _json_only(cls, value: Any, info: Any) -> Any:
        return check_json_value(value, info.field_name)

    def tool_call_ids(self) -> list[str]:
        """The ids of the tool calls this message opens (empty when none).

        >>> Message(role="user", content="hi").tool_call_ids()
        []
        """
        return [str(call.get("id")) for call in (self.tool_calls or []) if call.get("id") is not None]

    def text(self) -> str:
        """The message's text, '' when it has none.

        >>> Message(role="assistant").text()
        ''
        """
        return self.content or ""


class Fact(Record):
    """A long-term fact with its importance, provenance and validity interval.

    ``status`` is ``active``, ``superseded`` (a newer fact on the same subject and
    attribute replaced it: ``valid_to`` says when), ``archived`` (pushed out of the
    active facts by ``long_term_limit``: kept, and still recalled, below active facts;
    files and exports of older versions called it ``evicted``) or ``expired`` (its
    ``ttl_days`` ran out).

    Facts are bi-temporal. ``valid_from`` / ``valid_to`` say when the fact was true in
    the world: from when it was said, or from the start it states ("since March 2024"),
    until the fact that replaced it became true (``None``: still true). ``recorded_at``
    / ``superseded_at`` say when the memory learned it and retired it (the clock of the
    write; ``None``: not retired). ``recall(..., as_of=...)`` answers from the facts valid
    then; ``facts(include_history=True)`` lists the superseded ones with their validity.

    >>> Fact(id="fact_1", text="I live in Lisbon", importance=0.8,
    ...      created_at=utc_from_timestamp(0), updated_at=utc_from_timestamp(0)).status
    'active'
    """

    id: str
    text: str
    importance: float = Field(ge=0.0, le=1.0)
    category: str | None = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    status: Literal["active", "superseded", "archived", "expired"] = "active"
    created_at: datetime
    updated_at: datetime
    last_accessed: datetime | None = None
    access_count: int = 0
    reinforcement_count: int = 0
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: str | None = None
    expires_at: datetime | None = None
    recorded_at: datetime | None = None
    superseded_at: datetime | None = None
    source: str = "remember"
    source_message_ids: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    user_id: str = "default"
    agent_id: str | None = None
    session_id: str | None = None


class Entity(Record):
    """A person, place, organisation or thing the conversation mentioned.

    >>> Entity(id="ent_1", name="Maria", type="person", first_seen=utc_from_timestamp(0),
    ...        last_seen=utc_from_timestamp(0)).mention_count
    1
    """

    id: str
    name: str
    type: str = "thing"
    attributes: dict[str, Any] = Field(default_factory=dict)
    mention_count: int = 1
    first_seen: datetime
    last_seen: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)
    user_id: str = "default"
    agent_id: str | None = None


class Triple(Record):
    """A relation ``subject --predicate--> object`` in the entity graph.

    A single-valued relation (where someone lives or works, their name...) stated
    anew with another object ends the old one: its ``valid_to`` is set.

    >>> Triple(id="tri_1", subject="Maria", predicate="lives_in", object="Lisbon",
    ...        created_at=utc_from_timestamp(0)).as_text()
    'Maria lives in Lisbon'
    """

    id: str
    subject: str
    predicate: str
    object: str
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    created_at: datetime
    source_message_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    valid_to: datetime | None = None
    user_id: str = "default"
    agent_id: str | None = None

    def as_text(self) -> str:
        """The triple as a readable sentence fragment (predicate underscores become spaces)."""
        return f"{self.subject} {self.predicate.replace('_', ' ')} {self.object}"


class Episode(Record):
    """One message of the episodic log, verbatim, with its time and scope.

    ``in_window`` says whether the message is still in the short-term window;
    ``promoted`` whether it has been through promotion.
    """

    id: str
    role: Role
    content: str | None
    name: str | None = None
    created_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    images: list[str] | None = None
    reasoning_details: list[dict[str, Any]] | None = None
    importance: float = 0.0
    in_window: bool = False
    promoted: bool = False
    user_id: str = "default"
    agent_id: str | None = None
    session_id: str | None = None

    def to_message(self) -> Message:
        """This log entry as a :class:`Message` (for sending back to a chat API)."""
        return Message(
            role=self.role,
            content=self.content,
            name=self.name,
            tool_calls=self.tool_calls,
            tool_call_id=self.tool_call_id,
            metadata=dict(self.metadata),
            images=self.images,
            reasoning_details=self.reasoning_details,
            id=self.id,
            created_at=self.created_at,
            user_id=self.user_id,
            agent_id=self.agent_id,
            session_id=self.session_id,
        )


class ExtractedFact(Record):
    """A fact proposed by an extractor, before the importance filter.

    ``subject`` / ``attribute`` / ``value`` name a slot ("user", "residence",
    "Lisbon") so a later fact on the same slot can supersede this one.
    """

    text: str = Field(description="The fact as one self-contained sentence.")
    importance: float | None = Field(default=None, ge=0.0, le=1.0,
                                     description="0..1; None lets the importance scorer decide.")
    category: str | None = Field(default=None, description="identity, health, preference, ...")
    subject: str | None = Field(default=None, description="Who the fact is about, e.g. 'user'.")
    attribute: str | None = Field(default=None, description="Which attribute, e.g. 'residence'.")
    value: str | None = Field(default=None, description="The attribute's value, e.g. 'Lisbon'.")
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    replaces: list[str] = Field(
        default_factory=list,
        description="Values this statement says are no longer current ('I sold the Civic' -> ['Civic']): a "
                    "current fact about the same subject that names every word of one of them is superseded.")


class ExtractedEntity(Record):
    """An entity proposed by an extractor."""

    name: str = Field(min_length=1, description="The entity's name as written.")
    type: str = Field(default="thing", description="person, place, organization, thing, ...")
    attributes: dict[str, Any] = Field(default_factory=dict)


class ExtractedTriple(Record):
    """A relation proposed by an extractor."""

    subject: str = Field(min_length=1)
    predicate: str = Field(min_length=1, description="snake_case relation, e.g. 'lives_in'.")
    object: str = Field(min_length=1)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    single: bool = Field(default=False, description=(
        "The subject holds one object of this relation at a time: a new object ends the old "
        "(the speaker's slots: 'my car is a Civic', then 'my car is a Golf now'). The relations of "
        "tiers.graph.entities.FUNCTIONAL_PREDICATES are single-valued whatever this says."))


class Extraction(Record):
    """What an extractor found in some messages."""

    facts: list[ExtractedFact] = Field(default_factory=list)
    entities: list[ExtractedEntity] = Field(default_factory=list)
    triples: list[ExtractedTriple] = Field(default_factory=list)
