"""One conversation's short-term memory: the engine under every seed-style facade.

A :class:`Conversation` holds the messages an agent sends to its model, a system
prompt and a running summary. It can bound itself by messages and tokens (whole
interactions leave, tool calls never lose their results) and compact itself at a
token threshold through the pipeline of :mod:`unified_memory.conversation.compaction` — only at
a turn boundary: while the results of a parallel tool-call batch are still
arriving, compaction waits. Everything can be logged to JSONL and replayed
(:meth:`Conversation.restore_from_log`), or saved as a plain dict
(:meth:`~Conversation.to_dict`) in any :class:`~unified_memory.protocols.ConversationStore`.

    >>> from unified_memory import Conversation
    >>> conv = Conversation(system_prompt="Be brief.", max_messages=2)
    >>> _ = conv.add(role="user", content="My name is Ada")
    >>> _ = conv.add(role="assistant", content="Hi Ada")
    >>> _ = conv.add(role="user", content="What's my name?")
    >>> [m.content for m in conv.context()]
    ['Be brief.', "What's my name?"]
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from tiers.trimming import track_open_calls
from unified_memory.config import coerce_config
from unified_memory.conversation.compaction import (
    CompactionConfig,
    select_window,
    summary_message,
)
from unified_memory.conversation.log import ConversationLog
from unified_memory.conversation.persistence import PersistenceMethods, dump_message
from unified_memory.conversation.reduction import ReductionMethods
from unified_memory.conversation.state import ConversationState
from unified_memory.conversation.strategies import load_strategies
from unified_memory.errors import NotFoundError, UnifiedMemoryError, invalid, wrong_type
from unified_memory.events import EventBus, MemoryEvent
from unified_memory.extraction.summarizers import ExtractiveSummarizer
from unified_memory.privacy.redaction import make_scrubber
from unified_memory.protocols import Redactor, Summarizer
from unified_memory.retrieval.tokens import chars_per_token_counter, message_tokens
from unified_memory.types import Message
from unified_memory.validation import check_limit, check_text, pydantic_error

__all__ = ["Conversation"]



def _within(field: str, build: Callable[[Any], Any], value: Any) -> Any:
    """``build(value)``, its errors re-raised under ``field`` (``strategies.short_term...``)."""
    try:
        return build(value)
    except UnifiedMemoryError as exc:
        inner = exc.field
        name = field if inner in (None, "", "source", "strategy", field) or str(inner).startswith(f"{field}.") \
            else f"{field}.{inner}"
        message = str(exc)
        raise type(exc)(message if message.startswith(name) else f"{name}: {message}", field=name) from None


class Conversation(ReductionMethods, PersistenceMethods):
    """A conversation buffer with trimming, compaction, a JSONL log and round-trippable state.

    - ``max_messages`` / ``max_tokens``: a sliding window; whole interactions leave it,
      never while tool calls are pending; what left is in :attr:`last_trimmed` and, with
      ``summarize_on_trim``, folded into :attr:`summary` by ``summarizer``.
    - ``compaction`` (:class:`~unified_memory.conversation.compaction.CompactionConfig` or dict):
      compact when the context exceeds its threshold, at a turn boundary.
      ``compact_fn(messages, system_prompt) -> str`` replaces the summariser; else
      ``compaction_llm`` (a separate, cheaper model) writes the summary; else an
      offline extractive summary. ``on_compact(stats_dict)`` is called after each one.
    - ``log_base_path``: append every change to ``<log_base_path>/<session_id>.jsonl``.
    - ``strategies`` (:class:`~unified_memory.MemoryStrategies`, a dict, JSON text or a
      ``pathlib.Path``): the short-term strategy picks what :meth:`context` sends; the
      long-term one (summarizer, neuralyzer) rewrites the memory when a trigger fires,
      with ``compaction_llm`` as its model and ``strategy_memory`` (a UnifiedMemory) for
      ``store_summary_as_facts``.
    - ``redactor`` (any ``str -> str``, e.g. :class:`~unified_memory.SecretRedactor`): runs on
      every message (content, name, tool-call arguments, metadata), the system prompt and
      summaries set by hand before they are held, logged or saved.

    >>> conv = Conversation(compaction={"token_threshold": 60}, compact_fn=lambda msgs, sp: "they talked")
    >>> for i in range(6):
    ...     _ = conv.add(role="user", content=f"question {i} " * 5)
    >>> conv.summary, conv.compactions
    ('they talked', 2)
    """

    def __init__(self, *, system_prompt: str | None = None, session_id: str | None = None,
                 user_id: str | None = None, max_messages: int | None = None, max_tokens: int | None = None,
                 compaction: CompactionConfig | Mapping[str, Any] | None = None,
                 compact_fn: Callable[[list[Any], str | None], str] | None = None, compaction_llm: Any = None,
                 summarize_on_trim: bool = False, summarizer: Summarizer | None = None,
                 count_tokens: Callable[[str], int] | None = None,
                 on_compact: Callable[[dict[str, Any]], Any] | None = None,
                 log_base_path: str | None = None, strategies: Any = None, strategy_memory: Any = None,
                 redactor: Redactor | None = None) -> None:
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise wrong_type("system_prompt", "str", system_prompt)
        for field, value in (("session_id", session_id), ("user_id", user_id)):
            if value is not None:
                check_text(field, value)  # non-blank, no NUL or lone surrogate (saved and logged later)
        self.max_messages = None if max_messages is None else check_limit("max_messages", max_messages)
        self.max_tokens = None if max_tokens is None else check_limit("max_tokens", max_tokens)
        self.compaction = None if compaction is None else coerce_config(CompactionConfig, compaction, "compaction")
        self.strategies = None if strategies is None else _within("strategies", load_strategies, strategies)
        self.strategy_memory = strategy_memory
        if self.compaction is not None:  # an unknown model or no threshold at all fails here, not on add()
            _within("compaction", lambda _: self.compaction.threshold(), None)
        for field, value in (("compact_fn", compact_fn), ("on_compact", on_compact), ("count_tokens", count_tokens)):
            if value is not None and not callable(value):
                raise wrong_type(field, "callable", value)
        if summarizer is not None and not callable(getattr(summarizer, "summarize", None)):
            raise wrong_type("summarizer", "object with summarize(previous, messages)", summarizer)
        self._scrub = make_scrubber(redactor)
        if system_prompt is not None:
            system_prompt = self._scrub.text("system_prompt", system_prompt)
        self.system_prompt = system_prompt
        self.session_id = session_id or uuid.uuid4().hex
        self.user_id = user_id or "default"
        self.compact_fn = compact_fn
        self.compaction_llm = compaction_llm
        self.summarize_on_trim = bool(summarize_on_trim)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.count_tokens = count_tokens or chars_per_token_counter
        self.on_compact = on_compact
        self.summary: str | None = None
        self.last_trimmed: list[Any] = []
        self.compactions = 0
        self._messages: list[Any] = []
        self._trace: list[dict[str, Any]] = []
        self._events = EventBus()
        self._lock = threading.RLock()
        self._compaction_due = False
        self._calls_state: tuple[int, list[str | None], Any] = (0, [], None)
        self._token_cache: dict[str, tuple[Any, int]] = {}
        self._id_prefix = uuid.uuid4().hex[:12]
        self._id_counter = itertools.count(1)
        self._log = ConversationLog(log_base_path, self.session_id) if log_base_path is not None else None
        if system_prompt is not None:
            self._record({"type": "system_prompt", "system_prompt": system_prompt})

    # ---- reading -------------------------------------------------------------------------------
    @property
    def redactor(self) -> Redactor | None:
        """The redactor every held text goes through (``None``: none)."""
        return self._scrub.redactor

    @property
    def log_base_path(self) -> str | None:
        """Where the JSONL log is written (``None``: not logged)."""
        return None if self._log is None else str(self._log.base_path)

    @property
    def pending_tool_calls(self) -> int:
        """Tool calls issued and not yet answered; compaction waits while this is not 0."""
        with self._lock:
            return self._pending()

    def _pending(self) -> int:
        """Open calls, following appends incrementally; any other change of the list
        (its last scanned message is no longer where it was) means a rescan."""
        seen, open_calls, last = self._calls_state
        msgs = self._messages
        if seen > len(msgs) or (seen and msgs[seen - 1] is not last):
            seen, open_calls = 0, []
        for m in msgs[seen:]:
            track_open_calls(open_calls, m)
        self._calls_state = (len(msgs), open_calls, msgs[-1] if msgs else None)
        return len(open_calls)

    def messages(self) -> list[Any]:
        """Every held message, oldest first (a copy: changing it changes nothing here)."""
        with self._lock:
            return list(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    def get(self, message_id: str) -> Any | None:
        """The message with this id, or ``None``."""
        with self._lock:
            return next((m for m in self._messages if m.id == message_id), None)

    def recent(self, n: int) -> list[Any]:
        """The last ``n`` messages (``n`` >= 1)."""
        n = check_limit("n", n)
        with self._lock:
            return self._messages[-n:]

    def by_role(self, role: str, n: int | None = None) -> list[Any]:
        """Messages of ``role``, oldest first; the last ``n`` of them when ``n`` is given."""
        if role not in ("user", "assistant", "system", "tool"):
            raise invalid("role", f"expected user, assistant, system or tool, got {role!r}")
        with self._lock:
            found = [m for m in self._messages if m.role == role]
        return found if n is None else found[-check_limit("n", n):]

    def _image_estimate(self) -> int:
        return self.compaction.image_token_estimate if self.compaction is not None else 800

    def message_tokens(self, message: Any) -> int:
        """Tokens of one message, images and tool calls included (counted once per message)."""
        if not isinstance(message, Message):
            raise wrong_type("message", "Message", message)
        cached = self._token_cache.get(message.id)
        if cached is not None and cached[0] is message:
            return cached[1]
        tokens = message_tokens(message, self.count_tokens, image_token_estimate=self._image_estimate())
        if message.id is not None:
            if len(self._token_cache) > 2 * len(self._messages) + 64:
                self._token_cache.clear()
            self._token_cache[message.id] = (message, tokens)
        return tokens

    def context(self) -> list[Any]:
        """What to send to the model: the system prompt, the summary as a continuation
        message, then the conversation (in ``sliding_window`` mode only its recent window)."""
        from unified_memory.types import Message

        with self._lock:
            head = [Message(role="system", content=self.system_prompt)] if self.system_prompt else []
            body = list(self._messages)
            if self.compaction is not None and self.compaction.mode == "sliding_window":
                body = select_window(body, config=self.compaction, count_tokens=self.count_tokens,
                                     system_prompt=self.system_prompt)
            if self.strategies is not None and self.strategies.short_term is not None:
                body = self.strategies.short_term.select(body, count_tokens=self.count_tokens)
            if self.summary:
                head.append(summary_message(self.summary))
            return head + body

    def tokens(self) -> int:
        """Tokens of :meth:`context`: what the next model call costs in input."""
        return sum(self.message_tokens(m) for m in self.context())

    def get_memory_trace(self) -> list[dict[str, Any]]:
        """What happened to this conversation: trims, compactions (with their stats), resets."""
        with self._lock:
            return [dict(entry) for entry in self._trace]

    def on_event(self, hook: Callable[[MemoryEvent], None], *, kinds: Iterable[str] | None = None,
                 ) -> Callable[[], None]:
        """Call ``hook(event)`` on ``trim``, ``summarise``, ``compact`` and ``reset`` events;
        returns an unsubscribe function. Compaction reports ``started`` then ``completed`` or ``failed``."""
        return self._events.subscribe(hook, kinds=kinds)

    def _emit(self, kind: str, stage: str, error: str | None = None, **counts: int) -> None:
        self._events.emit(MemoryEvent(kind, stage, self.user_id, None, self.session_id, counts,
                                      datetime.now(UTC), error))  # type: ignore[arg-type]

    def _record(self, entry: Mapping[str, Any]) -> None:
        if self._log is not None:
            self._log.append(entry)

    def _note(self, kind: str, **details: Any) -> None:
        self._trace.append({"event": kind, "at": datetime.now(UTC).isoformat(), **details})

    # ---- writing -------------------------------------------------------------------------------
    def _coerce(self, field: str, message: Any, fields: Mapping[str, Any]) -> tuple[Any, bool]:
        from unified_memory.types import Message

        if message is not None and fields:
            raise invalid(field, "give a message or its fields, not both")
        if message is None:
            message = dict(fields)
        if isinstance(message, Message):
            msg = message  # valid already: Message validates on construction and assignment
        elif isinstance(message, Mapping):
            try:
                msg = Message.model_validate(dict(message))
            except ValidationError as exc:
                raise pydantic_error(field, exc) from None
        else:
            raise wrong_type(field, "Message or dict", message)
        if msg.content is None and not (msg.tool_calls or msg.images):
            raise invalid(f"{field}.content", f"required for a {msg.role} message without tool calls or images")
        chosen = msg.id is not None
        updates: dict[str, Any] = {}
        if not chosen:
            updates["id"] = f"{self._id_prefix}-{next(self._id_counter)}"
        if msg.created_at is None:
            updates["created_at"] = datetime.now(UTC)
        # a copy either way: the caller's object never becomes part of this conversation
        return self._scrub.message(field, msg.model_copy(update=updates, deep=isinstance(message, Message))), chosen

    def add(self, message: Any = None, /, **fields: Any) -> str:
        """Append a message (a :class:`~unified_memory.Message`, a dict, or its fields as
        keywords) and return its id; then trim and compact as configured.

        >>> conv = Conversation()
        >>> mid = conv.add(role="assistant", content=None, tool_calls=[{"id": "c1", "type": "function",
        ...                "function": {"name": "lookup", "arguments": "{}"}}])
        >>> conv.pending_tool_calls
        1
        """
        return self._append([self._coerce("message", message, fields)], ["message"])[0]

    def add_many(self, messages: Iterable[Any]) -> list[str]:
        """Append several messages at once (all validated first: one bad item adds nothing)."""
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise wrong_type("messages", "a list of messages", messages)
        names, items = [], []
        for i, m in enumerate(messages):
            names.append(f"messages[{i}]")
            items.append(self._coerce(names[-1], m, {}))
        return self._append(items, names)

    def _append(self, items: list[tuple[Any, bool]], names: list[str]) -> list[str]:
        """Append coerced ``(message, id chosen by the caller)`` pairs, then trim and compact."""
        with self._lock:
            if any(chosen for _, chosen in items):  # generated ids are unique; chosen ones are checked
                known = {m.id for m in self._messages}
                for name, (m, _) in zip(names, items, strict=True):
                    if m.id in known:
                        raise invalid(f"{name}.id", f"{m.id!r} is already in the conversation")
                    known.add(m.id)
            for m, _ in items:
                self._messages.append(m)
                self._record({"type": "message", "message": dump_message(m)})
            self._after_change()
        return [m.id for m, _ in items]

    def _after_change(self) -> None:
        self._enforce_limits()
        if self._pending():
            return  # not at a turn boundary: strategies and compaction wait for the batch
        if self.strategies is not None and self.strategies.long_term is not None:
            self._run_strategy(self.strategies.long_term)
        if self.compaction is None or self.compaction.mode != "compaction":
            return
        if self._compaction_due or self.tokens() > self.compaction.threshold():
            self._compact(self.compaction, auto=True)

    def update(self, message_id: str, **fields: Any) -> Any:
        """Change fields of a held message (validated); returns the new message."""
        with self._lock:
            index = self._index(message_id)
            data = {**self._messages[index].model_dump(), **fields, "id": message_id}
            new, _ = self._coerce("fields", data, {})
            self._messages[index] = new
            self._calls_state = (0, [], None)  # an earlier message changed: rescan the calls
            self._record({"type": "update", "message": dump_message(new)})
            return new

    def remove(self, message_id: str) -> Any:
        """Remove one message by id and return it."""
        with self._lock:
            removed = self._messages.pop(self._index(message_id))
            self._record({"type": "remove", "id": message_id})
            return removed

    def _index(self, message_id: str) -> int:
        for i, m in enumerate(self._messages):
            if m.id == message_id:
                return i
        raise NotFoundError(f"message_id: no message {message_id!r} in this conversation", field="message_id")

    def set_summary(self, text: str | None) -> None:
        """Replace the running summary (``None`` or ``''`` clears it)."""
        if text is not None and not isinstance(text, str):
            raise wrong_type("text", "str", text)
        text = self._scrub.text("text", text) if text else text
        with self._lock:
            self.summary = text or None
            self._record({"type": "summary", "summary": self.summary})

    def set_system_prompt(self, text: str | None) -> None:
        """Replace the system prompt (kept by :meth:`reset`)."""
        if text is not None and not isinstance(text, str):
            raise wrong_type("text", "str", text)
        text = self._scrub.text("text", text) if text else text
        with self._lock:
            self.system_prompt = text
            self._record({"type": "system_prompt", "system_prompt": text})

    def set_model(self, llm: Any) -> None:
        """Use ``llm`` (an :class:`~unified_memory.protocols.LLM` or callable) for compaction summaries."""
        from unified_memory.agents.llm import as_llm

        self.compaction_llm = as_llm(llm)

    def reset(self, *, keep_system_prompt: bool = True) -> dict[str, int]:
        """Forget the conversation (and the summary); returns what was dropped.

        >>> conv = Conversation(system_prompt="Be brief.")
        >>> _ = conv.add(role="user", content="hi")
        >>> conv.reset(), conv.system_prompt
        ({'messages': 1, 'summary': 0}, 'Be brief.')
        """
        with self._lock:
            counts = {"messages": len(self._messages), "summary": int(bool(self.summary))}
            self._apply_reset(keep_system_prompt)
            self._record({"type": "reset", "keep_system_prompt": keep_system_prompt})
            self._note("reset", **counts)
        self._emit("reset", "completed", **counts)
        return counts

    def _apply_reset(self, keep_system_prompt: bool) -> None:
        self._messages.clear()
        self.summary = None
        self.last_trimmed = []
        self._compaction_due = False
        if not keep_system_prompt:
            self.system_prompt = None

    # ---- restoring through the redactor -----------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any, **options: Any) -> Any:
        """Rebuild a conversation from :meth:`to_dict` output (see
        :meth:`PersistenceMethods.from_dict`); with a ``redactor`` option the saved
        messages and summary go through it before they are held or logged.

        >>> from unified_memory import SecretRedactor
        >>> conv = Conversation.from_dict({"session_id": "s1", "messages": [{"role": "user", "content": "ada@x.org"}]},
        ...                               redactor=SecretRedactor())
        >>> conv.messages()[0].content
        '[REDACTED:email]'
        """
        scrub = make_scrubber(options.get("redactor"))
        if scrub:
            state = data if isinstance(data, ConversationState) else ConversationState.from_dict(data)
            data = state.model_copy(update={"messages": scrub.messages("messages", state.messages),
                                            "summary": scrub.text("summary", state.summary) if state.summary
                                            else state.summary})
        return super().from_dict(data, **options)

    @classmethod
    def restore_from_log(cls, session_id: str, log_base_path: str, **options: Any) -> Any:
        """Replay a JSONL log (see :meth:`PersistenceMethods.restore_from_log`); with a
        ``redactor`` option what it held goes through it (the log itself is not rewritten)."""
        conv = super().restore_from_log(session_id, log_base_path, **options)
        scrub = conv._scrub
        if scrub:
            conv._messages = scrub.messages("messages", conv._messages)
            conv.summary = scrub.text("summary", conv.summary) if conv.summary else conv.summary
            if conv.system_prompt:
                conv.system_prompt = scrub.text("system_prompt", conv.system_prompt)
        return conv

    def branch(self, *, session_id: str | None = None) -> Any:
        """An independent copy under a new session id (not logged), with the same redactor."""
        copy = super().branch(session_id=session_id)
        copy._scrub = self._scrub
        return copy

    def __repr__(self) -> str:
        return (f"Conversation(session_id={self.session_id!r}, messages={len(self._messages)}, "
                f"summary={'yes' if self.summary else 'no'})")
