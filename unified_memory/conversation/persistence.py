"""Saving and restoring a :class:`~unified_memory.Conversation`: plain dicts, stores and the JSONL log.

A mixin of :class:`~unified_memory.Conversation`; its methods use the engine's
state (messages, summary, system prompt, log) and never call a model.

    >>> from unified_memory import Conversation
    >>> conv = Conversation(session_id="s1")
    >>> _ = conv.add(role="user", content="hi")
    >>> Conversation.from_dict(conv.to_dict()).messages() == conv.messages()
    True
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from unified_memory.conversation.state import ConversationState
from unified_memory.errors import MemoryValueError, NotFoundError, StorageError, invalid, wrong_type
from unified_memory.validation import check_text

__all__ = ["PersistenceMethods", "dump_message"]


def dump_message(message: Any) -> dict[str, Any]:
    """A message as JSON-compatible data without its unset fields.

    >>> from unified_memory.types import Message
    >>> dump_message(Message(role="user", content="hi"))
    {'role': 'user', 'content': 'hi', 'metadata': {}}
    """
    return message.model_dump(mode="json", exclude_none=True)


# Constructor keywords a saved state sets itself: not options of from_dict / load.
_STATE_FIELDS = ("session_id", "user_id", "system_prompt", "max_messages", "max_tokens", "compaction", "log_base_path")


def check_options(cls: type, options: Mapping[str, Any], taken: tuple[str, ...]) -> None:
    """Refuse constructor ``options`` that ``cls`` does not take, or that the caller sets itself
    (``taken``), with an error naming the keyword instead of Python's bare ``TypeError``."""
    accepted = [name for name, p in inspect.signature(cls).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in taken]
    for name in options:
        if name not in accepted:
            raise invalid(name, f"not an option here; choose from {sorted(accepted)}")


def check_store(store: Any, method: str) -> None:
    """``store`` must be a :class:`~unified_memory.protocols.ConversationStore` (have ``method``)."""
    if not callable(getattr(store, method, None)):
        raise wrong_type("store", f"ConversationStore (with a {method}() method)", store)


class PersistenceMethods:
    """``to_dict`` / ``from_dict``, ``save`` / ``load`` with a store, ``branch`` and
    ``restore_from_log`` for :class:`~unified_memory.Conversation`."""

    _messages: list[Any]
    _log: Any
    summary: str | None
    system_prompt: str | None
    compactions: int

    def get_session_state(self) -> ConversationState:
        """The whole state as a :class:`~unified_memory.ConversationState` record."""
        with self._lock:
            return ConversationState(
                session_id=self.session_id, user_id=self.user_id, system_prompt=self.system_prompt,
                summary=self.summary, messages=list(self._messages), max_messages=self.max_messages,
                max_tokens=self.max_tokens, compaction=self.compaction, log_base_path=self.log_base_path)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict of the state; :meth:`from_dict` restores it exactly.

        >>> from unified_memory import Conversation
        >>> conv = Conversation(session_id="s1", system_prompt="Be brief.")
        >>> _ = conv.add(role="user", content="hi")
        >>> Conversation.from_dict(conv.to_dict()).context() == conv.context()
        True
        """
        return self.get_session_state().to_dict()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | ConversationState, **options: Any) -> Any:
        """Rebuild a conversation from :meth:`to_dict` output, as it was: nothing is
        re-trimmed or re-compacted. ``options`` (e.g. ``compact_fn``) go to the constructor.
        With a ``log_base_path`` the restored conversation appends to the same log."""
        state = data if isinstance(data, ConversationState) else ConversationState.from_dict(data)
        check_options(cls, options, _STATE_FIELDS)
        conv = cls(session_id=state.session_id, user_id=state.user_id, system_prompt=state.system_prompt,
                   max_messages=state.max_messages, max_tokens=state.max_tokens, compaction=state.compaction,
                   log_base_path=state.log_base_path, **options)
        conv._messages = list(state.messages)
        conv.summary = state.summary
        # the log then replays to this very state, whatever it held before
        conv._record({"type": "snapshot", "system_prompt": conv.system_prompt, "summary": conv.summary,
                      "messages": [dump_message(m) for m in conv._messages]})
        return conv

    def branch(self, *, session_id: str | None = None) -> Any:
        """An independent copy under a new session id (not logged): explore a what-if."""
        if session_id is not None:
            check_text("session_id", session_id)  # a str, not blank, no NUL or lone surrogate
        data = self.to_dict()
        data.update(session_id=session_id or uuid.uuid4().hex, log_base_path=None)
        return type(self).from_dict(data, count_tokens=self.count_tokens, compact_fn=self.compact_fn,
                                    compaction_llm=self.compaction_llm, summarizer=self.summarizer,
                                    summarize_on_trim=self.summarize_on_trim, on_compact=self.on_compact)

    def save(self, store: Any, *, namespace: str = "default", ttl: float | None = None) -> None:
        """Save the state in a :class:`~unified_memory.protocols.ConversationStore` under the session id."""
        check_store(store, "save")
        store.save(self.session_id, self.to_dict(), namespace=namespace, ttl=ttl)

    @classmethod
    def load(cls, store: Any, session_id: str, *, namespace: str = "default", **options: Any) -> Any:
        """Load a conversation saved with :meth:`save`; a missing one is a :class:`NotFoundError`."""
        check_store(store, "load")
        check_options(cls, options, _STATE_FIELDS)  # before the store is asked
        data = store.load(session_id, namespace=namespace)
        if data is None:
            raise NotFoundError(f"session_id: no saved conversation {session_id!r} in namespace {namespace!r}",
                                field="session_id")
        return cls.from_dict(data, **options)

    @classmethod
    def restore_from_log(cls, session_id: str, log_base_path: str, **options: Any) -> Any:
        """Replay ``<log_base_path>/<session_id>.jsonl`` (messages, trims, compactions, resets)
        into a new conversation that keeps appending to the same log; no model is called.

        >>> import tempfile
        >>> from unified_memory import Conversation
        >>> logs = tempfile.mkdtemp()
        >>> conv = Conversation(session_id="user-123", log_base_path=logs)
        >>> _ = conv.add(role="user", content="I live in Lisbon")
        >>> Conversation.restore_from_log("user-123", logs).context() == conv.context()
        True
        """
        from unified_memory.types import Message

        if session_id is None:
            raise wrong_type("session_id", "str", session_id)
        if log_base_path is None:
            raise wrong_type("log_base_path", "str or path", log_base_path)
        check_options(cls, options, ("session_id", "log_base_path"))
        conv = cls(session_id=session_id, log_base_path=log_base_path, **options)
        log = conv._log
        assert log is not None
        if not log.exists():
            raise NotFoundError(f"session_id: no log at {log.path}", field="session_id")
        def text(entry: dict[str, Any], key: str) -> str | None:
            value = entry[key]
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{key!r} must be a string or null, got {type(value).__name__}")
            return value

        for number, entry in log.numbered_entries():
            kind = entry["type"]
            try:
                if kind == "message":
                    conv._messages.append(Message.model_validate(entry["message"]))
                elif kind == "update":
                    new = Message.model_validate(entry["message"])
                    conv._messages[conv._index(new.id)] = new
                elif kind == "remove":
                    conv._messages.pop(conv._index(entry["id"]))
                elif kind == "trim":
                    removed = entry["removed"]
                    if not isinstance(removed, list) or not all(isinstance(i, str) for i in removed):
                        raise TypeError("'removed' must be a list of message ids")
                    gone = set(removed)
                    conv._messages = [m for m in conv._messages if m.id not in gone]
                elif kind in ("compaction", "snapshot"):
                    if not isinstance(entry["messages"], list):
                        raise TypeError("'messages' must be a list of messages")
                    messages = [Message.model_validate(m) for m in entry["messages"]]
                    summary = text(entry, "summary")
                    prompt = text(entry, "system_prompt") if kind == "snapshot" else conv.system_prompt
                    conv._messages, conv.summary, conv.system_prompt = messages, summary, prompt
                    if kind == "compaction":
                        conv.compactions += 1
                elif kind == "summary":
                    conv.summary = text(entry, "summary")
                elif kind == "system_prompt":
                    conv.system_prompt = text(entry, "system_prompt")
                elif kind == "reset":
                    conv._apply_reset(entry.get("keep_system_prompt", True))
                else:
                    raise StorageError(f"{log.path}:{number}: unknown log entry type {kind!r}",
                                       field="log_base_path")
            except (KeyError, TypeError, ValidationError, NotFoundError, MemoryValueError) as exc:
                raise StorageError(f"{log.path}:{number}: cannot replay a {kind!r} entry: {exc}",
                                   field="log_base_path") from None
        return conv

