"""An :class:`~unified_memory.protocols.Extractor` that asks a chat model.

:class:`LLMExtractor` prompts an :class:`~unified_memory.protocols.LLM` with a JSON
schema (generated from strict pydantic models) for facts (with importance and
category), entities with attributes, and triples. The reply is validated as a
whole: malformed JSON or an invalid field (an importance of 1.5, a fact without
text) is retried once with the error spelled out, then the offline
:class:`~unified_memory.extraction.rules.RuleExtractor` answers instead. A model that
raises falls back at once. Nothing half-valid is ever returned.

    >>> from unified_memory.types import Message
    >>> reply = ('{"facts": [{"text": "I live in Lisbon", "importance": 0.8, "category": "location"}],'
    ...          ' "entities": [{"name": "Lisbon", "type": "place", "attributes": {}}],'
    ...          ' "triples": [{"subject": "user", "predicate": "lives_in", "object": "Lisbon"}]}')
    >>> extractor = LLMExtractor(lambda messages: reply)
    >>> out = extractor.extract(Message(role="user", content="I live in Lisbon"))
    >>> out.facts[0].text, out.triples[0].predicate, extractor.calls
    ('I live in Lisbon', 'lives_in', 1)
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unified_memory.agents.llm import as_llm
from unified_memory.errors import invalid, wrong_type
from unified_memory.protocols import Extractor
from unified_memory.retrieval.context import clean_item
from unified_memory.types import ExtractedEntity, ExtractedFact, ExtractedTriple, Extraction, Message

__all__ = ["LLMExtractor", "ExtractionReply", "extraction_schema", "parse_reply"]

log = logging.getLogger(__name__)

_MAX_ECHO = 4000  # characters of a bad reply echoed back in the retry prompt


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class FactReply(_Strict):
    text: str = Field(description="One self-contained sentence, in the speaker's own first-person words "
                                  "when it is about them, e.g. 'I live in Lisbon'.")
    importance: float = Field(ge=0.0, le=1.0, description="How worth remembering long-term, 0..1: "
                                                          "0.9 health/identity, 0.7 stable preferences, "
                                                          "0.3 passing remarks.")
    category: str | None = Field(default=None, description="identity, health, location, work, relationship, "
                                                           "preference, plan, other")
    subject: str | None = Field(default=None, description="Who the fact is about: 'user' or a name.")
    attribute: str | None = Field(default=None, description="Single-valued attribute it sets, so a later fact "
                                                            "can replace it: 'residence', 'employer', "
                                                            "'job_title', 'partner', 'diet', 'car', 'phone', "
                                                            "'number_of_cats', 'favorite_band', 'gp', "
                                                            "'email', 'yoga_class' ...")
    value: str | None = Field(default=None, description="The attribute's value now, e.g. 'Lisbon'.")
    replaces: list[str] = Field(default_factory=list, description="When the message says something changed "
                                "('I moved from Berlin to Lisbon', 'I sold the Civic and bought a Kia', 'Petra is "
                                "no longer my coach'): the old values it says are no longer current, e.g. "
                                "['Berlin'].")


class EntityReply(_Strict):
    name: str = Field(description="The entity's name as written.")
    type: str = Field(default="thing", description="person, place, organization, thing, ...")
    attributes: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, description="Known attributes, e.g. {\"relation\": \"sister\"}.")


class TripleReply(_Strict):
    subject: str = Field(description="An entity name, or 'user' for the speaker.")
    predicate: str = Field(description="snake_case relation, e.g. 'lives_in', 'has_sister'.")
    object: str
    single: bool = Field(default=False, description="true when the subject has one object of this relation at "
                         "a time, so a new object replaces the old (e.g. 'car', 'favorite_band', 'gp').")


class ExtractionReply(_Strict):
    """The JSON object the model must answer with (all three lists, possibly empty)."""

    facts: list[FactReply]
    entities: list[EntityReply]
    triples: list[TripleReply]


def extraction_schema() -> dict[str, Any]:
    """The JSON schema put in the system prompt.

    >>> sorted(extraction_schema()["properties"])
    ['entities', 'facts', 'triples']
    """
    return ExtractionReply.model_json_schema()


SYSTEM_PROMPT = """You extract long-term memory from one chat message.
Return facts worth remembering about the speaker and the people, places and things they mention
(skip greetings, small talk and questions), the entities with their attributes, and relations
between them as triples. Use only what the message (and the conversation before it) states.
When the message changes something said before ("I moved to Porto", "I no longer drive the Civic",
"my new manager is Dev"), state the new value as the fact, with its attribute, and list the old
values in "replaces".
Answer with ONE JSON object and nothing else, valid against this JSON schema:
{schema}
When there is nothing to remember, answer {{"facts": [], "entities": [], "triples": []}}."""

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def parse_reply(text: str) -> ExtractionReply:
    """Validate a model's reply (a bare JSON object, possibly in a ```json fence or after a
    sentence of prose); raises ``pydantic.ValidationError`` or ``ValueError``.

    >>> parse_reply('```json\\n{"facts": [], "entities": [], "triples": []}\\n```').facts
    []
    """
    if not isinstance(text, str):
        raise ValueError(f"the reply must be text, got {type(text).__name__}")
    fenced = _FENCE.search(text)
    payload = fenced.group(1) if fenced else text
    payload = payload.strip()
    if not payload.startswith(("{", "[")):  # prose around the object: cut it away
        start, end = payload.find("{"), payload.rfind("}")
        if start == -1 or end < start:
            raise ValueError("the reply holds no JSON object")
        payload = payload[start:end + 1]
    return ExtractionReply.model_validate_json(payload)


def _describe(exc: Exception) -> str:
    """A short, model-readable account of what was wrong with a reply."""
    if isinstance(exc, ValidationError):
        parts = []
        for error in exc.errors(include_url=False)[:6]:
            where = ".".join(str(p) for p in error["loc"]) or "reply"
            parts.append(f"{where}: {error['msg']}")
        more = exc.error_count() - len(parts)
        return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
    return str(exc)


def _convert(reply: ExtractionReply) -> Extraction:
    """The library's Extraction from a validated reply; entries with empty text are skipped."""
    facts = [ExtractedFact(text=f.text.strip(), importance=f.importance,
                           category=(f.category or "").strip() or None,
                           subject=(f.subject or "").strip() or None,
                           attribute=(f.attribute or "").strip() or None,
                           value=(f.value or "").strip() or None,
                           replaces=[r.strip() for r in f.replaces if r.strip()])
             for f in reply.facts if f.text.strip()]
    entities = [ExtractedEntity(name=e.name.strip(), type=e.type.strip() or "thing", attributes=dict(e.attributes))
                for e in reply.entities if e.name.strip()]
    triples = [ExtractedTriple(subject=t.subject.strip(), predicate=re.sub(r"\s+", "_", t.predicate.strip()),
                               object=t.object.strip(), single=t.single)
               for t in reply.triples if t.subject.strip() and t.predicate.strip() and t.object.strip()]
    return Extraction(facts=facts, entities=entities, triples=triples)


def _transcript(message: Message, context: Sequence[Message]) -> str:
    lines = []
    earlier = [m for m in context if isinstance(m, Message) and m.text().strip()]
    if earlier:
        lines.append("Conversation so far (for reference only):")
        lines.extend(f"[{m.role}] {clean_item(m.text())}" for m in earlier)
        lines.append("")
    speaker = f"{message.role} ({clean_item(message.name)})" if message.name else message.role
    # One line per message (⏎ marks its line breaks): a message cannot forge the next heading.
    lines.append(f"Extract memory from this message by the {speaker}:")
    lines.append(clean_item(message.text()))
    return "\n".join(lines)


class LLMExtractor:
    """Extracts facts, entities and triples with a chat model, falling back to rules.

    ``llm`` is an :class:`~unified_memory.protocols.LLM` or a callable ``messages -> str``.
    ``fallback`` (default :class:`~unified_memory.extraction.rules.RuleExtractor`) answers when
    the model raises, or its reply is still invalid after ``max_retries`` retries.

    For observability: ``calls`` (model calls made), ``retries``, ``fallbacks`` and
    ``last_error`` (why the last fallback or retry happened, ``None`` when none did).

    >>> from unified_memory.types import Message
    >>> extractor = LLMExtractor(lambda messages: "Sorry, I can't do JSON.")
    >>> out = extractor.extract(Message(role="user", content="I just moved to Berlin"))
    >>> out.facts[0].value, extractor.calls, extractor.retries, extractor.fallbacks
    ('Berlin', 2, 1, 1)
    """

    def __init__(self, llm: Any, *, fallback: Extractor | None = None, max_retries: int = 1) -> None:
        self.llm = as_llm(llm)
        if fallback is not None and not callable(getattr(fallback, "extract", None)):
            raise wrong_type("fallback", "object with an extract(message, context=...) method", fallback)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise invalid("max_retries", f"must be an int >= 0, got {max_retries!r}")
        if fallback is None:
            from unified_memory.extraction.rules import RuleExtractor

            fallback = RuleExtractor()
        self.fallback: Extractor = fallback
        self.max_retries = max_retries
        self.system_prompt = SYSTEM_PROMPT.format(schema=json.dumps(extraction_schema(), separators=(",", ":")))
        self.calls = 0
        self.retries = 0
        self.fallbacks = 0
        self.last_error: str | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LLMExtractor(llm={self.llm!r}, fallback={self.fallback!r}, max_retries={self.max_retries})"

    def _count(self, name: str, error: str | None = None) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)
            if error is not None:
                self.last_error = error

    def extract(self, message: Message, *, context: Sequence[Message] = ()) -> Extraction:
        """Propose facts, entities and triples from one message (``context``: the messages before it)."""
        if not isinstance(message, Message):
            raise wrong_type("message", "Message", message)
        if not message.text().strip():
            return Extraction()
        prompt: list[dict[str, Any]] = [{"role": "system", "content": self.system_prompt},
                                        {"role": "user", "content": _transcript(message, context)}]
        for attempt in range(self.max_retries + 1):
            self._count("calls")
            try:
                reply = self.llm.complete(prompt)
            except Exception as exc:  # the model is unreachable or broken: the rules answer
                return self._fall_back(message, context, f"the LLM raised {type(exc).__name__}: {exc}")
            try:
                return _convert(parse_reply(reply))
            except (ValidationError, ValueError) as exc:
                problem = _describe(exc)
            if attempt < self.max_retries:
                self._count("retries", f"invalid reply: {problem}")
                log.info("LLMExtractor: invalid reply (%s); retrying", problem)
                prompt = [*prompt,
                          {"role": "assistant", "content": (reply if isinstance(reply, str) else repr(reply))[:_MAX_ECHO]},
                          {"role": "user", "content": f"Your reply was invalid: {problem}. Answer again with only "
                                                      "the JSON object, valid against the schema."}]
        return self._fall_back(message, context, f"invalid reply: {problem}")

    def _fall_back(self, message: Message, context: Sequence[Message], why: str) -> Extraction:
        self._count("fallbacks", why)
        log.warning("LLMExtractor: falling back to %r (%s)", self.fallback, why)
        return self.fallback.extract(message, context=context)
