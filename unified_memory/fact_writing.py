"""The fact-writing side of :class:`~unified_memory.memory.UnifiedMemory`: ``remember``,
``remember_many`` and ``add_triple``. A mixin: it uses the memory's ``_backend``,
``_scope``, ``_write`` and ``_maintain``.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory() as mem:
    ...     _ = mem.remember("I keep bees", importance=0.8)
    ...     _ = mem.add_triple("Maria", "lives_in", "Lisbon")
    ...     [f.text for f in mem.facts()], [t.as_text() for t in mem.triples()]
    (['I keep bees'], ['Maria lives in Lisbon'])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from unified_memory.errors import invalid, wrong_type
from unified_memory.extraction.promotion import PromotionReport, Proposal
from unified_memory.types import ExtractedFact, ExtractedTriple, Message
from unified_memory.validation import check_metadata, check_text, check_ttl_days, check_unit

__all__ = ["FactWritingMethods"]


class FactWritingMethods:
    """Storing facts and relations directly (mixed into :class:`~unified_memory.memory.UnifiedMemory`)."""

    _backend: Any
    _scope: Any

    def remember(self, text: str, *, importance: float | None = None, category: str | None = None,
                 metadata: Mapping[str, Any] | None = None, ttl_days: float | None = None) -> str:
        """Store a long-term fact directly (reinforcing it if already known); returns its id.

        Entities and relations in the text go to the graph too.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     a = mem.remember("I'm allergic to peanuts")
        ...     a == mem.remember("I am allergic to peanuts.")
        True
        """
        return self._store_facts([self._fact_item("", {"text": text, "importance": importance, "category": category,
                                                       "metadata": metadata, "ttl_days": ttl_days})])[0]

    def remember_many(self, texts_or_facts: Iterable[str | Mapping[str, Any] | ExtractedFact]) -> list[str]:
        """Store many facts in one transaction; items are texts, dicts with ``text`` and
        the keywords of :meth:`remember`, or :class:`ExtractedFact` objects.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     len(mem.remember_many(["I live in Lisbon", {"text": "I like jazz", "importance": 0.4}]))
        2
        """
        if isinstance(texts_or_facts, str | bytes | Mapping) or not isinstance(texts_or_facts, Iterable):
            raise wrong_type("texts_or_facts", "list of str, dict or ExtractedFact", texts_or_facts)
        return self._store_facts([self._fact_item(f"texts_or_facts[{i}]", item)
                                  for i, item in enumerate(texts_or_facts)])

    def _store_facts(self, proposals: list[Proposal]) -> list[str]:
        backend = self._backend
        now = backend.clock()
        with self._write():
            per_item = backend.promoter.store(self._scope, proposals, now=now, report=PromotionReport(),
                                              source="remember", threshold=0.0)
            ids = [fact_ids[0] for fact_ids in per_item]
            self._maintain(now, promote=False, protect=ids)
        return ids

    def _fact_item(self, field: str, item: Any) -> Proposal:
        """Validate one item of :meth:`remember_many` into a proposal holding exactly one fact
        (``field=""``: the keywords of :meth:`remember`, named as they are)."""
        def name(key: str) -> str:
            return f"{field}.{key}" if field else key

        if isinstance(item, ExtractedFact):
            spec: dict[str, Any] = item.model_dump()
        elif isinstance(item, str):
            spec = {"text": item}
        elif isinstance(item, Mapping):
            spec = dict(item)
            unknown = set(spec) - {"text", "importance", "category", "metadata", "ttl_days"}
            if unknown:
                raise invalid(field, f"unknown keys {sorted(unknown)}")
        else:
            raise wrong_type(field, "str, dict or ExtractedFact", item)
        spec = self._backend.scrub.data(field or "fact", spec)  # text, slots, category and metadata
        text = check_text(name("text") if not isinstance(item, str) else field, spec.get("text")).strip()
        importance = check_unit(name("importance"), spec.get("importance"))
        category = spec.get("category")
        if category is not None and not isinstance(category, str):
            raise wrong_type(name("category"), "str", category)
        metadata = check_metadata(name("metadata"), spec.get("metadata"))
        ttl = check_ttl_days(name("ttl_days"), spec.get("ttl_days"), now=self._backend.clock())
        extraction = self._backend.extractor.extract(Message(role="user", content=text))
        # The text is stored whole, as one fact; the extractor lends it a slot and a category.
        found = next((f for f in extraction.facts if f.attribute), extraction.facts[0] if extraction.facts else None)
        if importance is None:
            importance = (found.importance if found is not None and found.importance is not None
                          and len(extraction.facts) == 1 else float(self._backend.scorer(text)))
        fact = ExtractedFact(
            text=text, importance=importance, category=category or (found.category if found else None),
            subject=spec.get("subject") or (found.subject if found else None),
            attribute=spec.get("attribute") or (found.attribute if found else None),
            value=spec.get("value") or (found.value if found else None),
        )
        return Proposal(extraction.model_copy(update={"facts": [fact]}), metadata=metadata, ttl_days=ttl)

    def add_triple(self, subject: str, predicate: str, obj: str, *, confidence: float = 1.0,
                   metadata: Mapping[str, Any] | None = None) -> str:
        """Add a relation to the entity graph (endpoints are created as needed); returns its id.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     _ = mem.add_triple("Maria", "lives_in", "Lisbon")
        ...     [t.as_text() for t in mem.triples()]
        ['Maria lives in Lisbon']
        """
        scrub = self._backend.scrub
        triple = ExtractedTriple(subject=scrub.text("subject", check_text("subject", subject)).strip(),
                                 predicate=scrub.text("predicate", check_text("predicate", predicate)).strip(),
                                 object=scrub.text("obj", check_text("obj", obj)).strip(),
                                 confidence=check_unit("confidence", confidence, optional=False))
        meta = scrub.data("metadata", check_metadata("metadata", metadata))
        with self._write():
            return self._backend.graph.add_triples(self._scope, [triple], now=self._backend.clock(),
                                                   metadata=meta)[0]
