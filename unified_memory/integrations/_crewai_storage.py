"""CrewAI's storage backend over the facts one :class:`~unified_memory.integrations.crewai.CrewMemory`
stored (:class:`AdapterFacts`), and a stored fact or a recall hit as CrewAI's ``MemoryRecord``:
CrewAI's fields (scope, categories, source, private) ride in the fact's metadata under
:data:`RECORD_KEY`, the adapter's name under :data:`NAME_KEY`. Only the adapter imports it, where
CrewAI is installed (:mod:`unified_memory.integrations.crewai` says how to install it).

    >>> under("/project/alpha", "/project"), under("/projects", "/project"), under("/anything", None)
    (True, False, True)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from unified_memory.errors import invalid

try:  # CrewAI is installed wherever the adapter runs
    from crewai.memory.types import MemoryRecord, ScopeInfo  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # imported without CrewAI (the package's own checks import every module): nothing here runs
    pass

__all__ = ["AdapterFacts", "NAME_KEY", "RECORD_KEY", "record_of", "under", "naive_utc"]

#: Metadata keys of a stored fact: the adapter ``name`` that stored it, and CrewAI's fields of the
#: record (scope, categories, source, private, agent_role).
NAME_KEY, RECORD_KEY = "crewai_memory", "crewai"
_PAGE = 500  # facts read per request when listing the adapter's own


def naive_utc(moment: datetime | None) -> datetime:
    """A datetime as CrewAI keeps them (naive, in UTC); now when there is none."""
    if moment is None:
        return datetime.now(UTC).replace(tzinfo=None)
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment


def under(scope: str, prefix: str | None) -> bool:
    """Whether a scope path is the prefix or below it (``None`` and ``/``: everything)."""
    root = (prefix or "").strip().rstrip("/")
    return not root or scope == root or scope.startswith(root + "/")


def record_of(item_id: str, text: str, metadata: Mapping[str, Any] | None, *, importance: float | None,
              created_at: datetime | None, last_accessed: datetime | None = None) -> MemoryRecord:
    """A stored fact (or a recall hit) as CrewAI's record: CrewAI's fields from its metadata."""
    meta = {k: v for k, v in (metadata or {}).items() if k not in (NAME_KEY, RECORD_KEY)}
    crew = (metadata or {}).get(RECORD_KEY)
    crew = crew if isinstance(crew, dict) else {}
    created, categories, source = naive_utc(created_at), crew.get("categories"), crew.get("source")
    return MemoryRecord(
        id=item_id, content=text, scope=str(crew.get("scope") or "/"),
        categories=[str(c) for c in categories] if isinstance(categories, list) else [],
        metadata=meta, importance=min(1.0, max(0.0, float(importance))) if importance is not None else 0.5,
        created_at=created, last_accessed=naive_utc(last_accessed) if last_accessed else created,
        source=source if isinstance(source, str) else None, private=crew.get("private") is True)


class AdapterFacts:
    """CrewAI's storage backend over the facts one :class:`CrewMemory` stored (its ``name``).

    Saving, listing, counting and deleting work on those facts. CrewAI's vector ``search`` does
    not: the memory recalls by the question's text, which :meth:`CrewMemory.recall` has.
    """

    def __init__(self, memory: Any, name: str) -> None:
        self.memory, self.name = memory, name

    def _own(self, *, everything: bool = False) -> list[Any]:
        """This adapter's facts, newest first (``everything``: superseded and expired ones too)."""
        found: list[Any] = []
        offset = 0
        while True:
            page = self.memory.facts(include_archived=True, include_inactive=everything, limit=_PAGE, offset=offset)
            found.extend(fact for fact in page if (fact.metadata or {}).get(NAME_KEY) == self.name)
            if len(page) < _PAGE:
                break
            offset += _PAGE
        return sorted(found, key=lambda fact: fact.created_at, reverse=True)

    def _records(self, *, everything: bool = False) -> list[MemoryRecord]:
        return [record_of(f.id, f.text, f.metadata, importance=f.importance, created_at=f.created_at,
                          last_accessed=f.last_accessed) for f in self._own(everything=everything)]

    def _matching(self, scope_prefix: str | None = None, categories: list[str] | None = None,
                  record_ids: list[str] | None = None, older_than: datetime | None = None,
                  metadata_filter: dict[str, Any] | None = None) -> list[MemoryRecord]:
        ids = set(record_ids) if record_ids is not None else None
        cutoff = naive_utc(older_than) if older_than is not None else None
        wanted = set(categories or ())
        return [r for r in self._records(everything=True)
                if under(r.scope, scope_prefix) and (ids is None or r.id in ids)
                and (not wanted or wanted & set(r.categories)) and (cutoff is None or r.created_at < cutoff)
                and all(r.metadata.get(k) == v for k, v in (metadata_filter or {}).items())]

    # -- CrewAI's StorageBackend protocol ------------------------------------------------------------

    def save(self, records: list[MemoryRecord], *, scored: bool = False, agent_role: str | None = None) -> None:
        """Store the records as facts of the user, in one transaction; each record takes its fact's id.
        ``scored``: the memory's importance scorer rates the texts (the records' importance is left out).
        ``agent_role``: the CrewAI agent that saved them (kept with CrewAI's fields)."""
        facts = []
        for record in records:
            crew: dict[str, Any] = {"scope": record.scope, "categories": list(record.categories),
                                    "source": record.source, "private": record.private}
            if agent_role is not None:
                crew["agent_role"] = agent_role
            facts.append({"text": record.content, "importance": None if scored else record.importance,
                          "category": record.categories[0] if record.categories else None,
                          "metadata": {**record.metadata, NAME_KEY: self.name, RECORD_KEY: crew}})
        for record, fact_id in zip(records, self.memory.remember_many(facts), strict=True):
            record.id = fact_id

    def search(self, query_embedding: list[float], *args: Any, **kwargs: Any) -> list[tuple[MemoryRecord, float]]:
        raise invalid("query_embedding", "the memory recalls by the question's text, not by a vector: "
                                         "use CrewMemory.recall(query)")

    def delete(self, scope_prefix: str | None = None, categories: list[str] | None = None,
               record_ids: list[str] | None = None, older_than: datetime | None = None,
               metadata_filter: dict[str, Any] | None = None) -> int:
        """Forget the adapter's facts that match (and what the memory drew only from them)."""
        ids = [r.id for r in self._matching(scope_prefix, categories, record_ids, older_than, metadata_filter)]
        if ids:
            self.memory.forget(ids=ids)
        return len(ids)

    def update(self, record: MemoryRecord) -> None:
        raise invalid("record_id", "a stored memory is not changed in place: forget it and remember the new content")

    def get_record(self, record_id: str) -> MemoryRecord | None:
        return next((r for r in self._records(everything=True) if r.id == record_id), None)

    def list_records(self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0) -> list[MemoryRecord]:
        return [r for r in self._records() if under(r.scope, scope_prefix)][offset:offset + limit]

    def get_scope_info(self, scope: str) -> ScopeInfo:
        path = scope.rstrip("/") or "/"
        inside = [r for r in self._records() if under(r.scope, path)]
        return ScopeInfo(path=path, record_count=len(inside),
                         categories=sorted({c for r in inside for c in r.categories}),
                         oldest_record=min((r.created_at for r in inside), default=None),
                         newest_record=max((r.created_at for r in inside), default=None),
                         child_scopes=self._children(path, inside))

    @staticmethod
    def _children(parent: str, records: Iterable[MemoryRecord]) -> list[str]:
        prefix = parent.rstrip("/") + "/"
        return sorted({prefix + r.scope[len(prefix):].split("/", 1)[0] for r in records
                       if r.scope.startswith(prefix) and r.scope[len(prefix):].split("/", 1)[0]})

    def list_scopes(self, parent: str = "/") -> list[str]:
        return self._children(parent, self._records())

    def list_categories(self, scope_prefix: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in self._records():
            if under(record.scope, scope_prefix):
                for category in record.categories:
                    counts[category] = counts.get(category, 0) + 1
        return counts

    def count(self, scope_prefix: str | None = None) -> int:
        return sum(1 for r in self._records() if under(r.scope, scope_prefix))

    def reset(self, scope_prefix: str | None = None) -> None:
        self.delete(scope_prefix=scope_prefix)

    async def asave(self, records: list[MemoryRecord]) -> None:
        await asyncio.to_thread(self.save, records)

    async def asearch(self, query_embedding: list[float], *args: Any, **kwargs: Any) -> list[tuple[MemoryRecord, float]]:
        return self.search(query_embedding)

    async def adelete(self, *args: Any, **kwargs: Any) -> int:
        return await asyncio.to_thread(lambda: self.delete(*args, **kwargs))

    def close(self) -> None:
        """Nothing to close: the memory belongs to whoever passed it in."""
