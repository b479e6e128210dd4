"""The memory as a CrewAI memory (``pip install "unified-memory[crewai]"``).

A CrewAI crew (``Crew(..., memory=...)``) or agent (``Agent(..., memory=...)``) recalls what
bears on each task before it runs, and saves what the task produced after it; its agents also
get "search memory" and "save to memory" tools. :class:`CrewMemory` is a CrewAI ``Memory``
that does all of this in a :class:`~unified_memory.UnifiedMemory` (or a
:class:`~unified_memory.RemoteMemory`), for the user that memory is scoped to (``user_id=``
scopes it to another user):

- ``remember(content, ...)`` / ``remember_many(contents, ...)`` store each content as a
  long-term fact of the user (``remember`` of the memory): the people, places and relations in
  it go to the entity graph, a fact the memory already holds is reinforced rather than stored
  twice, one that changes a single-valued fact ("I live in Porto" after "... Lisbon")
  supersedes it. CrewAI's scope, categories, source, ``private`` flag and agent role are kept
  in the fact's metadata, with the content's own ``metadata``. ``remember_many`` returns at
  once and stores in the background, as CrewAI's own memory does; a recall waits for it.
- ``extract_memories(content)``: of the text CrewAI saves after a task (its description, the
  agent, the expected output, the result) one memory is kept, with no model call: what was
  asked and the result (the model's reasoning before its "Final Answer:" left out). Give
  ``llm=`` to have CrewAI's model cut it into statements instead.
- ``recall(query, limit=...)`` is the memory's federated recall (facts, people and places,
  past conversations: ``tiers=`` narrows it) over everything the user's memory holds, what
  other applications and adapters stored too; each match carries the recall score. A
  ``scope`` or ``categories`` restricts it to what CrewAI stored there. ``depth`` is accepted
  and needs no model: the recall is one pass.
- ``forget(...)``, ``reset()``, ``list_records``, ``info``, ``tree``, ``list_scopes`` and
  ``list_categories`` see only the facts this adapter stored (under its ``name``): ``reset``
  forgets those, with what the memory drew only from them, and nothing else of the user.

No OpenAI key is needed: nothing here calls CrewAI's embedder or analysis model.

.. code-block:: python

    from crewai import Agent, Crew, Task
    from unified_memory import UnifiedMemory
    from unified_memory.integrations.crewai import CrewMemory

    memory = CrewMemory(memory=UnifiedMemory("memory.db"), user_id="ada")
    crew = Crew(agents=[agent], tasks=[task], memory=memory)
"""

from __future__ import annotations

import copy
import math
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from unified_memory.errors import DependencyError, NotFoundError, invalid, wrong_type
from unified_memory.integrations._checks import check_memory, library_error
from unified_memory.integrations._crewai_storage import NAME_KEY, RECORD_KEY, AdapterFacts, record_of, under
from unified_memory.validation import check_limit, check_metadata, check_scope_id, check_tiers, check_unit

INSTALL_HINT = 'pip install "unified-memory[crewai]"'

# (type: ignore: mypy runs where CrewAI may not be installed; it is then Any)
try:
    from crewai.events.event_bus import crewai_event_bus  # type: ignore[import-not-found,unused-ignore]
    from crewai.events.types.memory_events import (  # type: ignore[import-not-found,unused-ignore]
        MemoryQueryCompletedEvent,
        MemoryQueryFailedEvent,
        MemoryQueryStartedEvent,
        MemorySaveCompletedEvent,
        MemorySaveFailedEvent,
        MemorySaveStartedEvent,
    )
    from crewai.memory.types import MemoryMatch, MemoryRecord  # type: ignore[import-not-found,unused-ignore]
    from crewai.memory.unified_memory import Memory  # type: ignore[import-not-found,unused-ignore]
    from crewai.memory.utils import join_scope_paths  # type: ignore[import-not-found,unused-ignore]
    from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, field_validator
except ImportError as exc:  # tests/integrations/test_crewai_install_hint.py
    raise DependencyError(f"unified_memory.integrations.crewai needs crewai: {INSTALL_HINT}") from exc

__all__ = ["CrewMemory", "INSTALL_HINT", "NAME_KEY", "RECORD_KEY"]

#: The memory methods the adapter calls (a UnifiedMemory and a RemoteMemory both have them).
_NEEDED = ("remember_many", "recall", "facts", "forget", "scoped")
_OVERSAMPLE = 4  # recall this many times the limit: CrewAI's filters may drop hits
_TASK_RECORD = re.compile(r"\A(?P<label>Task|Input): (?P<asked>.*?)\nAgent: [^\n]*\n(?:Expected result: .*?\n)?"
                          r"Result: (?P<result>.*)\Z", re.DOTALL)
_SOURCE = "unified_memory"  # the source_type of the CrewAI memory events the adapter emits


def _task_memory(content: str) -> str:
    """The memory of CrewAI's text about a finished task ("Task: ...", "Agent: ...", "Expected result:
    ...", "Result: ..."): what was asked and the result, without CrewAI's agent and expected-output
    lines or the model's reasoning before its "Final Answer:". Other text is kept as it is."""
    found = _TASK_RECORD.match(content.strip())
    if found is None:
        return content.strip()
    result = found["result"].rsplit("Final Answer:", 1)[-1].strip()
    asked = f"{found['label']}: {found['asked'].strip()}"
    return f"{asked}\nResult: {result}" if result else asked


class CrewMemory(Memory):
    """A CrewAI ``Memory`` over unified-memory (see the module docstring).

    ``memory``: a :class:`~unified_memory.UnifiedMemory` or :class:`~unified_memory.RemoteMemory`.
    ``user_id``: the user whose memory it is (``None``: the user ``memory`` is scoped to).
    ``name``: ``reset`` and ``forget`` touch only the facts stored under this name.
    ``tiers``: the tiers ``recall`` searches (``None``: all of them). ``score_threshold``: the
    least recall score a match needs (``None``: any). ``importance``: the importance of saved
    facts when CrewAI gives none (``None``: the memory's importance scorer decides).
    CrewAI's own options (``read_only``, ``root_scope``, ``llm`` for ``extract_memories``) keep
    their meaning; its embedder and scoring weights are not used.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    memory: Any = Field(exclude=True, description="A UnifiedMemory or RemoteMemory.")
    user_id: str | None = Field(default=None, description="The user whose memory it is (None: the memory's user).")
    name: str = Field(default="crewai", description="reset() and forget() touch only what was stored under it.")
    tiers: tuple[str, ...] | None = Field(default=None, description="The tiers recall searches (None: all).")
    score_threshold: float | None = Field(default=None, description="The least recall score a match needs.")
    importance: float | None = Field(default=None, description="Importance of saved facts (None: the memory's).")
    _facts: AdapterFacts = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:  # the library's error, naming the field
            raise library_error(exc, "CrewMemory") from None

    @field_validator("memory", mode="plain")
    @classmethod
    def _memory_like(cls, value: Any) -> Any:
        return check_memory(value, _NEEDED)

    @field_validator("user_id", "name", "tiers", "score_threshold", "importance", mode="plain")
    @classmethod
    def _option(cls, value: Any, info: Any) -> Any:
        field = info.field_name
        if field == "user_id":
            return check_scope_id(field, value, optional=True)
        if field == "name":
            return check_scope_id(field, value)
        if value is None:
            return None
        if field == "tiers":
            return check_tiers(field, value)
        if field == "importance":
            return check_unit(field, value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise wrong_type(field, "a number or None", value)
        if not math.isfinite(value):
            raise invalid(field, f"must be a finite number, got {value!r}")
        return float(value)

    def model_post_init(self, context: Any) -> None:
        if self.user_id is not None and self.user_id != getattr(self.memory, "user_id", None):
            self.memory = self.memory.scoped(user_id=self.user_id)
        self._facts = AdapterFacts(self.memory, self.name)
        self.storage = self._facts  # before CrewAI's setup, which would open a LanceDB store for a string
        super().model_post_init(context)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> CrewMemory:
        """A copy with the same options and its own save thread that shares the memory (a handle on a
        database or a service). CrewAI's own deep copy fails before Python 3.13 (``threading.Lock``)."""
        memo = {} if memo is None else memo
        data = {name: value if name == "memory" else copy.deepcopy(value, memo)
                for name, value in self.__dict__.items() if name in self.model_fields_set and name != "storage"}
        clone = type(self)(**data)
        memo[id(self)] = clone
        return clone

    # -- saving ---------------------------------------------------------------------------------------

    def _new_records(self, contents: Any, scope: str | None, categories: list[str] | None,
                     metadata: dict[str, Any] | None, importance: float | None, source: str | None,
                     private: bool, root_scope: str | None, field: str) -> tuple[list[MemoryRecord], bool]:
        """CrewAI records of the contents, checked (a bad argument names its field), and whether
        the memory's scorer rates them (no importance given, here or as the adapter's option)."""
        if isinstance(contents, str | bytes | Mapping) or not isinstance(contents, Iterable):
            raise wrong_type(field, "a list of str", contents)
        if scope is not None and not isinstance(scope, str):
            raise wrong_type("scope", "str or None", scope)
        if categories is not None and (not isinstance(categories, list)
                                       or not all(isinstance(c, str) for c in categories)):
            raise wrong_type("categories", "a list of str or None", categories)
        meta = check_metadata("metadata", metadata)
        reserved = sorted({NAME_KEY, RECORD_KEY} & set(meta))
        if reserved:
            raise invalid("metadata", f"{reserved} are keys the adapter keeps; use other names")
        weight = check_unit("importance", importance)
        weight = self.importance if weight is None else weight
        if source is not None and not isinstance(source, str):
            raise wrong_type("source", "str or None", source)
        if not isinstance(private, bool):
            raise wrong_type("private", "bool", private)
        path = join_scope_paths(root_scope if root_scope is not None else self.root_scope, scope)
        records = []
        for i, content in enumerate(contents):
            where = field if field == "content" else f"{field}[{i}]"
            if not isinstance(content, str):
                raise wrong_type(where, "str", content)
            if not content.strip():
                raise invalid(where, "must not be empty")
            records.append(MemoryRecord(content=content.strip(), scope=path, categories=list(categories or ()),
                                        metadata=dict(meta), source=source, private=private,
                                        importance=self.default_importance if weight is None else weight))
        return records, weight is None

    def _emit(self, event: Any) -> None:
        """Tell CrewAI's event bus (its console output and traces), as CrewAI's own memory does."""
        try:
            crewai_event_bus.emit(self, event)
        except RuntimeError:  # the bus is shut down (the process is exiting)
            pass

    def _save(self, records: list[MemoryRecord], scored: bool, agent_role: str | None) -> list[MemoryRecord]:
        """Store the records (in CrewAI's save thread), between save-started and save-completed events."""
        start = time.perf_counter()
        value = records[0].content if len(records) == 1 else f"{len(records)} memories"
        metadata = dict(records[0].metadata) if records else {}
        self._emit(MemorySaveStartedEvent(value=value, metadata=metadata, agent_role=agent_role,
                                          source_type=_SOURCE))
        self._facts.save(records, scored=scored, agent_role=agent_role)
        self._emit(MemorySaveCompletedEvent(value=value, metadata=metadata, agent_role=agent_role,
                                            save_time_ms=(time.perf_counter() - start) * 1000, source_type=_SOURCE))
        return records

    def remember(self, content: str, scope: str | None = None, categories: list[str] | None = None,
                 metadata: dict[str, Any] | None = None, importance: float | None = None,
                 source: str | None = None, private: bool = False, agent_role: str | None = None,
                 root_scope: str | None = None) -> MemoryRecord | None:
        """Store one memory as a fact of the user now; returns its record (``None`` when read-only).
        The record shows CrewAI's ``default_importance`` when the memory's scorer rated the text."""
        if not isinstance(content, str):
            raise wrong_type("content", "str", content)
        if self.read_only:
            return None
        records, scored = self._new_records([content], scope, categories, metadata, importance, source, private,
                                            root_scope, "content")
        try:
            self._submit_save(self._save, records, scored, agent_role).result()
        except Exception as exc:
            self._emit(MemorySaveFailedEvent(value=content, metadata=metadata, error=str(exc), source_type=_SOURCE))
            raise
        return records[0]

    def remember_many(self, contents: list[str], scope: str | None = None, categories: list[str] | None = None,
                      metadata: dict[str, Any] | None = None, importance: float | None = None,
                      source: str | None = None, private: bool = False, agent_role: str | None = None,
                      root_scope: str | None = None) -> list[MemoryRecord]:
        """Store the memories in the background (checked now); returns ``[]`` as CrewAI's memory does."""
        if self.read_only or (isinstance(contents, list) and not contents):
            return []
        records, scored = self._new_records(contents, scope, categories, metadata, importance, source, private,
                                            root_scope, "contents")
        self._submit_save(self._save, records, scored, agent_role)  # a failure: CrewAI's save-failed event
        return []

    def extract_memories(self, content: str) -> list[str]:
        """The memories to save from a task's text: one, what was asked and the result (CrewAI's
        model cuts the text into statements instead when ``llm=`` was given)."""
        if not isinstance(content, str):
            raise wrong_type("content", "str", content)
        if "llm" in self.model_fields_set:
            return [str(statement) for statement in super().extract_memories(content)]
        return [_task_memory(content)] if content.strip() else []

    def update(self, record_id: str, content: str | None = None, scope: str | None = None,
               categories: list[str] | None = None, metadata: dict[str, Any] | None = None,
               importance: float | None = None) -> MemoryRecord:
        """Not supported: a stored memory is not changed in place (forget it, remember the new one)."""
        if self._facts.get_record(record_id) is None:
            raise NotFoundError(f"record_id: no memory {record_id!r} stored by this adapter", field="record_id")
        raise invalid("record_id", "a stored memory is not changed in place: forget it and remember the new content")

    # -- recalling ------------------------------------------------------------------------------------

    def recall(self, query: str, scope: str | None = None, categories: list[str] | None = None,
               limit: int = 10, depth: str = "deep", source: str | None = None,
               include_private: bool = False) -> list[MemoryMatch]:
        """The memory's recall for the query, best first, at most ``limit`` (see the module docstring)."""
        if not isinstance(query, str):
            raise wrong_type("query", "str", query)
        check_limit("limit", limit)
        if depth not in ("shallow", "deep"):
            raise invalid("depth", f"must be 'shallow' or 'deep', got {depth!r}")
        if scope is not None and not isinstance(scope, str):
            raise wrong_type("scope", "str or None", scope)
        if categories is not None and not isinstance(categories, list):
            raise wrong_type("categories", "a list of str or None", categories)
        self.drain_writes()  # what was saved in the background is found
        if not query.strip():
            return []
        path = join_scope_paths(self.root_scope, scope) if (scope or self.root_scope) else "/"
        start = time.perf_counter()
        self._emit(MemoryQueryStartedEvent(query=query, limit=limit, score_threshold=self.score_threshold,
                                           source_type=_SOURCE))
        try:
            matches = self._matches(query, path, set(categories or ()), limit, source, include_private)
        except Exception as exc:
            self._emit(MemoryQueryFailedEvent(query=query, limit=limit, score_threshold=self.score_threshold,
                                              error=str(exc), source_type=_SOURCE))
            raise
        self._emit(MemoryQueryCompletedEvent(query=query, results=matches, limit=limit,
                                             score_threshold=self.score_threshold,
                                             query_time_ms=(time.perf_counter() - start) * 1000, source_type=_SOURCE))
        return matches

    def _matches(self, query: str, path: str, wanted: set[str], limit: int, source: str | None,
                 include_private: bool) -> list[MemoryMatch]:
        """The recall's hits as CrewAI's matches, within the scope and categories, private ones kept
        for their source, at most ``limit``."""
        narrowed = path != "/" or bool(wanted)  # then only what CrewAI stored there matches
        hits = self.memory.recall(query, limit=min(limit * _OVERSAMPLE, 1000), tiers=self.tiers)
        matches: list[MemoryMatch] = []
        for hit in hits:
            meta = dict(hit.metadata or {})
            if meta.get(NAME_KEY) is None:
                if narrowed:
                    continue
                meta.pop(RECORD_KEY, None)  # another writer's key, not CrewAI's fields
            weight = (hit.components or {}).get("importance")
            record = record_of(hit.id, hit.text, meta, created_at=hit.created_at,
                               importance=float(weight) if isinstance(weight, int | float) else None)
            if not under(record.scope, path) or (wanted and not wanted & set(record.categories)):
                continue
            if record.private and not include_private and (source is None or record.source != source):
                continue  # a private memory is for the source that saved it
            if self.score_threshold is not None and hit.score < self.score_threshold:
                continue
            matches.append(MemoryMatch(record=record, score=float(hit.score), match_reasons=[str(hit.tier)]))
            if len(matches) == limit:
                break
        return matches
