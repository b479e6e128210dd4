"""Saving and restoring a :class:`~unified_memory.Conversation`: plain dicts, stores and the JSONL log.

The conversation's classmethods (``from_dict``, ``load``, ``restore_from_log``) build a
new conversation and hand its :class:`~unified_memory.conversation.buffer.ConversationBuffer`
to :func:`restore` (a saved state) or :func:`replay` (its log); nothing here calls a model.

    >>> from unified_memory import Conversation
    >>> conv = Conversation(session_id="s1")
    >>> _ = conv.add(role="user", content="hi")
    >>> Conversation.from_dict(conv.to_dict()).messages() == conv.messages()
    True
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from unified_memory.conversation.buffer import ConversationBuffer
from unified_memory.conversation.state import ConversationState
from unified_memory.errors import MemoryValueError, NotFoundError, StorageError, invalid, wrong_type
from unified_memory.privacy.redaction import Scrubber, make_scrubber
from unified_memory.types import Message

__all__ = ["STATE_FIELDS", "check_log_options", "check_options", "check_store", "dump_message", "load_saved", "replay",
           "restore", "saved_state"]


def dump_message(message: Message) -> dict[str, Any]:
    """A message as JSON-compatible data without its unset fields.

    >>> dump_message(Message(role="user", content="hi"))
    {'role': 'user', 'content': 'hi', 'metadata': {}}
    """
    return message.model_dump(mode="json", exclude_none=True)


# Constructor keywords a saved state sets itself (from its fields of the same names): not options of
# from_dict / load.
STATE_FIELDS = ("session_id", "user_id", "system_prompt", "max_messages", "max_tokens", "compaction", "log_base_path")


def check_options(cls: Callable[..., Any], options: Mapping[str, Any], taken: tuple[str, ...]) -> None:
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


def saved_state(data: Mapping[str, Any] | ConversationState, redactor: Any) -> ConversationState:
    """``data`` (:meth:`~unified_memory.Conversation.to_dict` output) as a validated
    :class:`~unified_memory.ConversationState`, its messages and summary through ``redactor``.

    >>> saved_state({"session_id": "s1", "summary": "hi"}, str.upper).summary
    'HI'
    """
    scrub = make_scrubber(redactor)
    state = data if isinstance(data, ConversationState) else ConversationState.from_dict(data)
    if not scrub:
        return state
    return state.model_copy(update={"messages": scrub.messages("messages", state.messages),
                                    "summary": scrub.text("summary", state.summary) if state.summary
                                    else state.summary})


def check_log_options(cls: Callable[..., Any], session_id: Any, log_base_path: Any, options: Mapping[str, Any],
                      ) -> None:
    """The arguments of ``restore_from_log``: a session id, a log directory and ``cls`` options."""
    if session_id is None:
        raise wrong_type("session_id", "str", session_id)
    if log_base_path is None:
        raise wrong_type("log_base_path", "str or path", log_base_path)
    check_options(cls, options, ("session_id", "log_base_path"))


def load_saved(cls: Callable[..., Any], store: Any, session_id: str, namespace: str, options: Mapping[str, Any],
               ) -> Any:
    """What ``store`` saved under ``session_id`` in ``namespace`` (the ``cls`` options are
    checked before the store is asked); nothing saved is a :class:`NotFoundError`."""
    check_store(store, "load")
    check_options(cls, options, STATE_FIELDS)
    data = store.load(session_id, namespace=namespace)
    if data is None:
        raise NotFoundError(f"session_id: no saved conversation {session_id!r} in namespace {namespace!r}",
                            field="session_id")
    return data


def restore(buffer: ConversationBuffer, state: ConversationState) -> None:
    """Put the messages and summary of ``state`` into a new conversation's ``buffer``, as they
    were, and log a snapshot: the log then replays to this very state, whatever it held before."""
    buffer.messages = list(state.messages)
    buffer.summary = state.summary
    buffer.record({"type": "snapshot", "system_prompt": buffer.system_prompt, "summary": buffer.summary,
                   "messages": [dump_message(m) for m in buffer.messages]})


def _text(entry: dict[str, Any], key: str) -> str | None:
    value = entry[key]
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{key!r} must be a string or null, got {type(value).__name__}")
    return value


def replay(buffer: ConversationBuffer, scrub: Scrubber) -> None:
    """Replay the buffer's JSONL log (messages, trims, compactions, resets) into it, then pass
    what it holds through ``scrub`` (the log itself is not rewritten). A missing log is a
    :class:`NotFoundError`, an entry that cannot be replayed a :class:`StorageError` naming its line."""
    log = buffer.log
    if log is None:
        raise wrong_type("log_base_path", "str or path", log)
    if not log.exists():
        raise NotFoundError(f"session_id: no log at {log.path}", field="session_id")
    for number, entry in log.numbered_entries():
        kind = entry["type"]
        try:
            if kind == "message":
                buffer.messages.append(Message.model_validate(entry["message"]))
            elif kind == "update":
                new = Message.model_validate(entry["message"])
                buffer.messages[buffer.index(new.id)] = new
            elif kind == "remove":
                buffer.messages.pop(buffer.index(entry["id"]))
            elif kind == "trim":
                removed = entry["removed"]
                if not isinstance(removed, list) or not all(isinstance(i, str) for i in removed):
                    raise TypeError("'removed' must be a list of message ids")
                gone = set(removed)
                buffer.messages = [m for m in buffer.messages if m.id not in gone]
            elif kind in ("compaction", "snapshot"):
                if not isinstance(entry["messages"], list):
                    raise TypeError("'messages' must be a list of messages")
                messages = [Message.model_validate(m) for m in entry["messages"]]
                summary = _text(entry, "summary")
                prompt = _text(entry, "system_prompt") if kind == "snapshot" else buffer.system_prompt
                buffer.messages, buffer.summary, buffer.system_prompt = messages, summary, prompt
                if kind == "compaction":
                    buffer.compactions += 1
            elif kind == "summary":
                buffer.summary = _text(entry, "summary")
            elif kind == "system_prompt":
                buffer.system_prompt = _text(entry, "system_prompt")
            elif kind == "reset":
                buffer.reset(entry.get("keep_system_prompt", True))
            else:
                raise StorageError(f"{log.path}:{number}: unknown log entry type {kind!r}", field="log_base_path")
        except (KeyError, TypeError, ValidationError, NotFoundError, MemoryValueError) as exc:
            raise StorageError(f"{log.path}:{number}: cannot replay a {kind!r} entry: {exc}",
                               field="log_base_path") from None
    if scrub:
        buffer.messages = scrub.messages("messages", buffer.messages)
        buffer.summary = scrub.text("summary", buffer.summary) if buffer.summary else buffer.summary
        if buffer.system_prompt:
            buffer.system_prompt = scrub.text("system_prompt", buffer.system_prompt)
