"""MARSYS' ``KGMemory`` and ``MemoryManager`` (import them from :mod:`unified_memory.compat.marsys`).

    >>> from unified_memory.compat.marsys import MemoryManager
    >>> manager = MemoryManager(memory_type="kg", description="System prompt")
    >>> _ = manager.add(role="user", content="My sister Maria lives in Lisbon.")
    >>> ("Maria", "lives_in", "Lisbon") in {(f["subject"], f["predicate"], f["object"]) for f in manager.facts()}
    True
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from unified_memory.compat.marsys import (
    MEMORY_TYPES,
    ConversationMemory,
    ManagedConversationMemory,
    ManagedMemoryConfig,
)
from unified_memory.context import clean_item
from unified_memory.conversation import Conversation
from unified_memory.errors import NotFoundError, StorageError, invalid

__all__ = ["KGMemory", "MemoryManager"]


class KGMemory(ConversationMemory):
    """MARSYS' ``KGMemory``: the conversation plus a knowledge graph of (subject, predicate,
    object) facts in a :class:`~unified_memory.UnifiedMemory` (in-memory unless ``memory`` is given).
    Facts are extracted from ``extract_roles`` messages by ``LLMExtractor(model)``, or, without a
    model, by the offline rule extractor.

    >>> kg = KGMemory(description="Initial context")
    >>> _ = kg.add_fact(role="user", subject="Paris", predicate="is capital of", obj="France")
    >>> _ = kg.add(role="user", content="My sister Maria lives in Lisbon.")
    >>> [(f["subject"], f["predicate"], f["object"]) for f in kg.facts()][0]
    ('Paris', 'is_capital_of', 'France')
    """

    def __init__(self, model: Any = None, description: str | None = None, *, memory: Any = None,
                 extract_roles: tuple[str, ...] = ("user",), **engine_options: Any) -> None:
        super().__init__(description, **engine_options)
        self.model = model
        self.extract_roles = tuple(extract_roles)
        self._memory = memory
        self._extractor: Any = None
        if model is not None:
            from unified_memory.llm_extraction import LLMExtractor

            self._extractor = LLMExtractor(model)

    @property
    def memory(self) -> Any:
        """The :class:`~unified_memory.UnifiedMemory` holding the triples (created on first use)."""
        if self._memory is None:
            from unified_memory.memory import UnifiedMemory

            self._memory = UnifiedMemory(None, auto_promote=False)
        return self._memory

    def add(self, role: str | None = None, content: Any = None, **fields: Any) -> str:
        """Append a message (as :meth:`ConversationMemory.add`) and extract facts from its text."""
        message_id = super().add(role, content, **fields)
        added = self._conversation.get(message_id)
        if added is not None and added.role in self.extract_roles and added.content and added.content.strip():
            self.memory.add_turn(added.content, extract=True, extractor=self._extractor,
                                 metadata={"role": added.role, "message_id": message_id})
        return message_id

    def add_fact(self, role: str, subject: str, predicate: str, obj: str) -> str:
        """Store one fact as a triple; returns its id."""
        return self.memory.add_triple(subject, predicate, obj, metadata={"role": role})

    def facts(self) -> list[dict[str, Any]]:
        """The known facts: dicts of subject, predicate, object, role and id."""
        return [{"subject": t.subject, "predicate": t.predicate, "object": t.object,
                 "role": t.metadata.get("role"), "id": t.id} for t in self.memory.triples()]

    def get_messages(self) -> list[dict[str, Any]]:
        """The conversation, with a system block of the known facts after the system prompt."""
        messages = super().get_messages()
        facts = self.facts()
        if facts:
            lines = "\n".join(clean_item(f"- {f['subject']} {f['predicate'].replace('_', ' ')} {f['object']}")
                              for f in facts)
            at = 1 if self._conversation.system_prompt else 0
            messages.insert(at, {"role": "system", "content": f"Known facts:\n{lines}"})
        return messages


class MemoryManager:
    """MARSYS' ``MemoryManager``: builds the memory of ``memory_type`` and behaves like it;
    adds ``save_to_file`` / ``load_from_file``. ``kg`` works without a model (rule
    extraction; MARSYS requires one).

    >>> import tempfile, os
    >>> manager = MemoryManager(memory_type="conversation_history", description="System prompt")
    >>> _ = manager.add(role="user", content="Hello")
    >>> path = os.path.join(tempfile.mkdtemp(), "memory.json")
    >>> manager.save_to_file(path, additional_state={"planning": {"step": 2}})
    >>> MemoryManager(memory_type="conversation_history").load_from_file(path)
    {'planning': {'step': 2}}
    """

    def __init__(self, memory_type: str = "conversation_history", description: str | None = None,
                 memory_config: ManagedMemoryConfig | Mapping[str, Any] | None = None, model: Any = None,
                 **kwargs: Any) -> None:
        if memory_type == "conversation_history":
            memory: ConversationMemory = ConversationMemory(description, **kwargs)
        elif memory_type == "managed_conversation":
            kwargs.setdefault("compaction_model", model)
            memory = ManagedConversationMemory(memory_config, description, **kwargs)
        elif memory_type == "kg":
            memory = KGMemory(model, description, **kwargs)
        else:
            raise invalid("memory_type", f"unknown memory type {memory_type!r}; choose from {', '.join(MEMORY_TYPES)}")
        self.memory_type = memory_type
        self.memory = memory

    def __getattr__(self, name: str) -> Any:
        if name == "memory":
            raise AttributeError(name)
        return getattr(self.memory, name)

    def set_event_context(self, agent_name: str | None, event_bus: Any, session_id: str | None = None) -> None:
        """Route the memory's reset and compaction events to ``event_bus``."""
        self.memory.set_event_context(agent_name, event_bus, session_id)

    def save_to_file(self, path: str | os.PathLike[str], additional_state: Mapping[str, Any] | None = None) -> None:
        """Write the memory (and ``additional_state``) to a JSON file, atomically."""
        data: dict[str, Any] = {"format": "unified-memory.marsys", "memory_type": self.memory_type,
                                "state": self.memory.conversation.to_dict(),
                                "additional_state": dict(additional_state or {})}
        if isinstance(self.memory, KGMemory):
            data["triples"] = self.memory.facts()
        target = Path(path)
        fd, tmp = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load_from_file(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Restore the memory saved by :meth:`save_to_file`; returns its ``additional_state``."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise NotFoundError(f"path: no memory file {str(path)!r}", field="path") from None
        except json.JSONDecodeError as exc:
            raise StorageError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                               field="path") from None
        if not isinstance(data, dict) or data.get("format") != "unified-memory.marsys":
            raise StorageError(f"{path}: not a memory file written by save_to_file", field="path")
        if data.get("memory_type") != self.memory_type:
            raise invalid("memory_type", f"{path} holds a {data.get('memory_type')!r} memory, this manager "
                                         f"is {self.memory_type!r}")
        old = self.memory.conversation
        self.memory._attach(Conversation.from_dict(
            data["state"], compact_fn=old.compact_fn, compaction_llm=old.compaction_llm,
            count_tokens=old.count_tokens, on_compact=old.on_compact))
        if isinstance(self.memory, KGMemory):
            known = {(f["subject"], f["predicate"], f["object"]) for f in self.memory.facts()}
            for fact in data.get("triples", []):
                if (fact["subject"], fact["predicate"], fact["object"]) not in known:
                    self.memory.add_fact(fact.get("role"), fact["subject"], fact["predicate"], fact["object"])
        return dict(data.get("additional_state") or {})
