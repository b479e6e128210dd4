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

from unified_memory.compat._marsys_conversation import (
    MEMORY_TYPES,
    ConversationMemory,
    ManagedConversationMemory,
    ManagedMemoryConfig,
)
from unified_memory.conversation.engine import Conversation
from unified_memory.errors import MemoryTypeError, MemoryValueError, NotFoundError, StorageError, invalid
from unified_memory.retrieval.context import clean_item
from unified_memory.types import LONE_SURROGATE

__all__ = ["KGMemory", "MemoryManager"]


def _text(value: Any) -> bool:
    """Whether ``value`` is a str that can be stored (UTF-8: no lone surrogate)."""
    return isinstance(value, str) and not LONE_SURROGATE.search(value)


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
            from unified_memory.extraction.llm_extractor import LLMExtractor

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
        triple_id: str = self.memory.add_triple(subject, predicate, obj, metadata={"role": role})
        return triple_id

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
        """Restore the memory saved by :meth:`save_to_file`; returns its ``additional_state``.

        The whole file is checked before anything changes: a file that cannot be read, is
        not JSON or not one of ours raises :class:`StorageError` naming it (and the line
        for invalid JSON), and the memory is left as it was.
        """
        name = os.fspath(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise NotFoundError(f"path: no memory file {name!r}", field="path") from None
        except (OSError, UnicodeDecodeError) as exc:  # a directory, no permission, a symlink loop, not UTF-8
            raise StorageError(f"{name}: cannot read the memory file: {exc}", field="path") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StorageError(f"{name}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                               field="path") from None
        except RecursionError:
            raise StorageError(f"{name}: not valid JSON (nested too deeply)", field="path") from None
        except ValueError as exc:  # an integer of more than 4300 digits
            raise StorageError(f"{name}: not valid JSON: {exc}", field="path") from None
        if not isinstance(data, dict) or data.get("format") != "unified-memory.marsys":
            raise StorageError(f"{name}: not a memory file written by save_to_file", field="path")
        if data.get("memory_type") != self.memory_type:
            raise invalid("memory_type", f"{name} holds a {data.get('memory_type')!r} memory, this manager "
                                         f"is {self.memory_type!r}")
        additional = data.get("additional_state")
        if additional is not None and not isinstance(additional, dict):
            raise StorageError(f"{name}: additional_state: expected an object", field="path")
        triples = data.get("triples", []) if isinstance(self.memory, KGMemory) else []
        if not isinstance(triples, list) or not all(
                isinstance(f, dict) and all(_text(f.get(k)) and f[k].strip() for k in ("subject", "predicate", "object"))
                and (f.get("role") is None or _text(f["role"])) for f in triples):
            raise StorageError(f"{name}: triples: expected a list of {{subject, predicate, object, role}} "
                               "objects of non-empty strings", field="path")
        if not isinstance(data.get("state"), dict):
            raise StorageError(f"{name}: state: expected an object", field="path")
        old = self.memory.conversation
        try:
            restored = Conversation.from_dict(
                data["state"], compact_fn=old.compact_fn, compaction_llm=old.compaction_llm,
                count_tokens=old.count_tokens, on_compact=old.on_compact)
        except (MemoryValueError, MemoryTypeError) as exc:
            raise StorageError(f"{name}: {exc}", field="path") from None
        for i, message in enumerate(restored.messages()):  # structured content is stored as JSON text
            if message.metadata.get("content_format") == "json" and message.content is not None:
                try:
                    json.loads(message.content)
                except (ValueError, RecursionError):
                    raise StorageError(f"{name}: state.messages[{i}].content: not the JSON its content_format "
                                       "says", field="path") from None
        if isinstance(self.memory, KGMemory) and triples:
            kg = self.memory.memory
            known = {(f["subject"], f["predicate"], f["object"]) for f in self.memory.facts()}
            try:
                with kg.atomic():  # all the triples or none
                    for fact in triples:
                        if (fact["subject"], fact["predicate"], fact["object"]) not in known:
                            self.memory.add_fact(fact.get("role"), fact["subject"], fact["predicate"],
                                                 fact["object"])
            except (MemoryValueError, MemoryTypeError) as exc:
                raise StorageError(f"{name}: triples: {exc}", field="path") from None
        self.memory.conversation = restored
        return dict(additional or {})
