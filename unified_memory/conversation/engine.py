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

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

from unified_memory.config import coerce_config
from unified_memory.conversation.buffer import ConversationBuffer
from unified_memory.conversation.compaction import (
    CompactionConfig,
    CompactionStats,
    select_window,
    summary_message,
)
from unified_memory.conversation.intake import MessageIntake
from unified_memory.conversation.log import ConversationLog
from unified_memory.conversation.persistence import (
    STATE_FIELDS,
    check_log_options,
    check_options,
    check_store,
    dump_message,
    load_saved,
    replay,
    restore,
    saved_state,
)
from unified_memory.conversation.reduction import Reducer
from unified_memory.conversation.state import ConversationState
from unified_memory.conversation.strategies import MemoryStrategies, load_strategies
from unified_memory.errors import UnifiedMemoryError, invalid, wrong_type
from unified_memory.events import MemoryEvent
from unified_memory.extraction.summarizers import ExtractiveSummarizer
from unified_memory.privacy.redaction import make_scrubber
from unified_memory.protocols import Redactor, Summarizer
from unified_memory.retrieval.tokens import chars_per_token_counter, message_tokens
from unified_memory.types import Message
from unified_memory.validation import check_limit, check_text

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


class Conversation:
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
        self.strategies: MemoryStrategies | None = (None if strategies is None
                                                    else _within("strategies", load_strategies, strategies))
        self.strategy_memory = strategy_memory
        if self.compaction is not None:  # an unknown model or no threshold at all fails here, not on add()
            _within("compaction", lambda config: config.threshold(), self.compaction)
        for field, hook in (("compact_fn", compact_fn), ("on_compact", on_compact), ("count_tokens", count_tokens)):
            if hook is not None and not callable(hook):
                raise wrong_type(field, "callable", hook)
        if summarizer is not None and not callable(getattr(summarizer, "summarize", None)):
            raise wrong_type("summarizer", "object with summarize(previous, messages)", summarizer)
        self._intake = MessageIntake(make_scrubber(redactor), id_prefix=uuid.uuid4().hex[:12])
        if system_prompt is not None:
            system_prompt = self._intake.scrub.text("system_prompt", system_prompt)
        self.session_id = session_id or uuid.uuid4().hex
        self.user_id = user_id or "default"
        self.compact_fn = compact_fn
        self.compaction_llm = compaction_llm
        self.summarize_on_trim = bool(summarize_on_trim)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.count_tokens = count_tokens or chars_per_token_counter
        self.on_compact = on_compact
        self._buffer = ConversationBuffer(
            system_prompt=system_prompt,
            log=ConversationLog(log_base_path, self.session_id) if log_base_path is not None else None)
        self._reducer = Reducer(self._buffer, self)
        if system_prompt is not None:
            self._buffer.record({"type": "system_prompt", "system_prompt": system_prompt})

    # ---- what it holds (kept in the buffer) -----------------------------------------------------
    @property
    def system_prompt(self) -> str | None:
        """The system prompt (kept by :meth:`reset`); change it with :meth:`set_system_prompt`."""
        return self._buffer.system_prompt

    @system_prompt.setter
    def system_prompt(self, value: str | None) -> None:
        self._buffer.system_prompt = value

    @property
    def summary(self) -> str | None:
        """The running summary of what was compacted or trimmed away (``None``: none)."""
        return self._buffer.summary

    @summary.setter
    def summary(self, value: str | None) -> None:
        self._buffer.summary = value

    @property
    def compactions(self) -> int:
        """How many compactions rewrote the messages."""
        return self._buffer.compactions

    @compactions.setter
    def compactions(self, value: int) -> None:
        self._buffer.compactions = value

    @property
    def last_trimmed(self) -> list[Message]:
        """The messages the last trim dropped."""
        return self._buffer.last_trimmed

    @last_trimmed.setter
    def last_trimmed(self, value: list[Message]) -> None:
        self._buffer.last_trimmed = value

    # ---- reading -------------------------------------------------------------------------------
    @property
    def redactor(self) -> Redactor | None:
        """The redactor every held text goes through (``None``: none)."""
        return self._intake.scrub.redactor

    @property
    def log_base_path(self) -> str | None:
        """Where the JSONL log is written (``None``: not logged)."""
        log = self._buffer.log
        return None if log is None else str(log.base_path)

    @property
    def pending_tool_calls(self) -> int:
        """Tool calls issued and not yet answered; compaction waits while this is not 0."""
        with self._buffer.lock:
            return self._buffer.pending()

    def messages(self) -> list[Message]:
        """Every held message, oldest first (a copy: changing it changes nothing here)."""
        with self._buffer.lock:
            return list(self._buffer.messages)

    def live_messages(self) -> list[Message]:
        """The held messages themselves, not a copy: editing this list edits the conversation,
        with nothing logged, trimmed or compacted (for facades whose subclasses edit messages
        in place, as Motus' do). A trim or compaction replaces the list: ask again after one."""
        return self._buffer.messages

    def __len__(self) -> int:
        return len(self._buffer.messages)

    def get(self, message_id: str) -> Message | None:
        """The message with this id, or ``None``."""
        with self._buffer.lock:
            return next((m for m in self._buffer.messages if m.id == message_id), None)

    def recent(self, n: int) -> list[Message]:
        """The last ``n`` messages (``n`` >= 1)."""
        n = check_limit("n", n)
        with self._buffer.lock:
            return self._buffer.messages[-n:]

    def by_role(self, role: str, n: int | None = None) -> list[Message]:
        """Messages of ``role``, oldest first; the last ``n`` of them when ``n`` is given."""
        if role not in ("user", "assistant", "system", "tool"):
            raise invalid("role", f"expected user, assistant, system or tool, got {role!r}")
        with self._buffer.lock:
            found = [m for m in self._buffer.messages if m.role == role]
        return found if n is None else found[-check_limit("n", n):]

    def message_tokens(self, message: Any) -> int:
        """Tokens of one message, images and tool calls included (counted once per message)."""
        if not isinstance(message, Message):
            raise wrong_type("message", "Message", message)
        return self._buffer.tokens(message, self._count)

    def _count(self, message: Message) -> int:
        estimate = self.compaction.image_token_estimate if self.compaction is not None else 800
        return message_tokens(message, self.count_tokens, image_token_estimate=estimate)

    def context(self) -> list[Message]:
        """What to send to the model: the system prompt, the summary as a continuation
        message, then the conversation (in ``sliding_window`` mode only its recent window)."""
        with self._buffer.lock:
            head = [Message(role="system", content=self.system_prompt)] if self.system_prompt else []
            body = list(self._buffer.messages)
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
        with self._buffer.lock:
            return [dict(entry) for entry in self._buffer.trace]

    def on_event(self, hook: Callable[[MemoryEvent], None], *, kinds: Iterable[str] | None = None,
                 ) -> Callable[[], None]:
        """Call ``hook(event)`` on ``trim``, ``summarise``, ``compact`` and ``reset`` events;
        returns an unsubscribe function. Compaction reports ``started`` then ``completed`` or ``failed``."""
        return self._buffer.events.subscribe(hook, kinds=kinds)

    # ---- writing -------------------------------------------------------------------------------
    def add(self, message: Any = None, /, **fields: Any) -> str:
        """Append a message (a :class:`~unified_memory.Message`, a dict, or its fields as
        keywords) and return its id; then trim and compact as configured.

        >>> conv = Conversation()
        >>> mid = conv.add(role="assistant", content=None, tool_calls=[{"id": "c1", "type": "function",
        ...                "function": {"name": "lookup", "arguments": "{}"}}])
        >>> conv.pending_tool_calls
        1
        """
        return self._append([self._intake.coerce("message", message, fields)], ["message"])[0]

    def add_many(self, messages: Iterable[Any]) -> list[str]:
        """Append several messages at once (all validated first: one bad item adds nothing)."""
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise wrong_type("messages", "a list of messages", messages)
        names, items = [], []
        for i, m in enumerate(messages):
            names.append(f"messages[{i}]")
            items.append(self._intake.coerce(names[-1], m, {}))
        return self._append(items, names)

    def _append(self, items: list[tuple[Message, bool]], names: list[str]) -> list[str]:
        """Append coerced ``(message, id chosen by the caller)`` pairs, then trim and compact."""
        buf = self._buffer
        with buf.lock:
            if any(chosen for _, chosen in items):  # generated ids are unique; chosen ones are checked
                known = {m.id for m in buf.messages}
                for name, (m, _) in zip(names, items, strict=True):
                    if m.id in known:
                        raise invalid(f"{name}.id", f"{m.id!r} is already in the conversation")
                    known.add(m.id)
            for m, _ in items:
                buf.messages.append(m)
                buf.record({"type": "message", "message": dump_message(m)})
            self._reducer.after_change()
        return [str(m.id) for m, _ in items]

    def update(self, message_id: str, **fields: Any) -> Message:
        """Change fields of a held message (validated); returns the new message."""
        buf = self._buffer
        with buf.lock:
            index = buf.index(message_id)
            data = {**buf.messages[index].model_dump(), **fields, "id": message_id}
            new, _ = self._intake.coerce("fields", data, {})
            buf.messages[index] = new
            buf.rescan_calls()  # an earlier message changed: rescan the calls
            buf.record({"type": "update", "message": dump_message(new)})
            return new

    def remove(self, message_id: str | None) -> Message:
        """Remove one message by id and return it (``None``: the first without one, as a
        saved state without ids restores them)."""
        buf = self._buffer
        with buf.lock:
            removed = buf.messages.pop(buf.index(message_id))
            buf.record({"type": "remove", "id": message_id})
            return removed

    def set_summary(self, text: str | None) -> None:
        """Replace the running summary (``None`` or ``''`` clears it)."""
        if text is not None and not isinstance(text, str):
            raise wrong_type("text", "str", text)
        text = self._intake.scrub.text("text", text) if text else text
        with self._buffer.lock:
            self.summary = text or None
            self._buffer.record({"type": "summary", "summary": self.summary})

    def set_system_prompt(self, text: str | None) -> None:
        """Replace the system prompt (kept by :meth:`reset`)."""
        if text is not None and not isinstance(text, str):
            raise wrong_type("text", "str", text)
        text = self._intake.scrub.text("text", text) if text else text
        with self._buffer.lock:
            self.system_prompt = text
            self._buffer.record({"type": "system_prompt", "system_prompt": text})

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
        buf = self._buffer
        with buf.lock:
            counts = {"messages": len(buf.messages), "summary": int(bool(buf.summary))}
            buf.reset(keep_system_prompt)
            buf.record({"type": "reset", "keep_system_prompt": keep_system_prompt})
            buf.note("reset", **counts)
        buf.emit(self, "reset", "completed", messages=counts["messages"], summary=counts["summary"])
        return counts

    # ---- getting smaller (the reducer) -----------------------------------------------------------
    def fit(self, max_tokens: int) -> list[Message]:
        """The messages :meth:`trim_to_fit` would keep, without changing the conversation.

        >>> conv = Conversation()
        >>> _ = conv.add(role="user", content="an old question " * 5); _ = conv.add(role="user", content="new")
        >>> [m.content for m in conv.fit(10)], len(conv)
        (['new'], 2)
        """
        return self._reducer.fit(max_tokens)

    def trim_to_fit(self, max_tokens: int) -> list[Message]:
        """Drop the oldest whole interactions until the messages fit ``max_tokens``
        (system messages stay); returns what was dropped. Waits while calls are pending."""
        return self._reducer.trim_to_fit(max_tokens)

    def messages_to_summarize(self, keep_recent: int = 6) -> list[Message]:
        """The older non-system messages that :meth:`trim_to_recent` would drop."""
        return self._reducer.messages_to_summarize(keep_recent)

    def trim_to_recent(self, keep_recent: int = 6) -> list[Message]:
        """Keep only the last ``keep_recent`` non-system messages (never starting on an
        orphaned tool result); returns what was dropped."""
        return self._reducer.trim_to_recent(keep_recent)

    def compact(self) -> CompactionStats | None:
        """Compact now (thresholds aside); returns the stats, or ``None`` when tool results
        are still pending — then it runs as soon as the batch is complete."""
        return self._reducer.compact_now()

    # ---- saving and restoring (the persistence functions) ----------------------------------------
    def get_session_state(self) -> ConversationState:
        """The whole state as a :class:`~unified_memory.ConversationState` record."""
        buf = self._buffer
        with buf.lock:
            return ConversationState(
                session_id=self.session_id, user_id=self.user_id, system_prompt=buf.system_prompt,
                summary=buf.summary, messages=list(buf.messages), max_messages=self.max_messages,
                max_tokens=self.max_tokens, compaction=self.compaction, log_base_path=self.log_base_path)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict of the state; :meth:`from_dict` restores it exactly.

        >>> conv = Conversation(session_id="s1", system_prompt="Be brief.")
        >>> _ = conv.add(role="user", content="hi")
        >>> Conversation.from_dict(conv.to_dict()).context() == conv.context()
        True
        """
        return self.get_session_state().to_dict()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | ConversationState, **options: Any) -> Self:
        """Rebuild a conversation from :meth:`to_dict` output, as it was: nothing is
        re-trimmed or re-compacted. ``options`` (e.g. ``compact_fn``) go to the constructor;
        with a ``redactor`` the saved messages and summary go through it before they are held
        or logged. With a ``log_base_path`` the restored conversation appends to the same log.

        >>> from unified_memory import SecretRedactor
        >>> conv = Conversation.from_dict({"session_id": "s1", "messages": [{"role": "user", "content": "ada@x.org"}]},
        ...                               redactor=SecretRedactor())
        >>> conv.messages()[0].content
        '[REDACTED:email]'
        """
        state = saved_state(data, options.get("redactor"))
        check_options(cls, options, STATE_FIELDS)
        conv = cls(**{name: getattr(state, name) for name in STATE_FIELDS}, **options)
        restore(conv._buffer, state)
        return conv

    def branch(self, *, session_id: str | None = None) -> Self:
        """An independent copy under a new session id (not logged), with the same redactor:
        explore a what-if."""
        if session_id is not None:
            check_text("session_id", session_id)  # a str, not blank, no NUL or lone surrogate
        data = self.to_dict()
        data.update(session_id=session_id or uuid.uuid4().hex, log_base_path=None)
        copy = type(self).from_dict(data, count_tokens=self.count_tokens, compact_fn=self.compact_fn,
                                    compaction_llm=self.compaction_llm, summarizer=self.summarizer,
                                    summarize_on_trim=self.summarize_on_trim, on_compact=self.on_compact)
        copy._intake.scrub = self._intake.scrub
        return copy

    def save(self, store: Any, *, namespace: str = "default", ttl: float | None = None) -> None:
        """Save the state in a :class:`~unified_memory.protocols.ConversationStore` under the session id."""
        check_store(store, "save")
        store.save(self.session_id, self.to_dict(), namespace=namespace, ttl=ttl)

    @classmethod
    def load(cls, store: Any, session_id: str, *, namespace: str = "default", **options: Any) -> Self:
        """Load a conversation saved with :meth:`save`; a missing one is a :class:`NotFoundError`."""
        return cls.from_dict(load_saved(cls, store, session_id, namespace, options), **options)

    @classmethod
    def restore_from_log(cls, session_id: str, log_base_path: str, **options: Any) -> Self:
        """Replay ``<log_base_path>/<session_id>.jsonl`` (messages, trims, compactions, resets)
        into a new conversation that keeps appending to the same log; no model is called. With
        a ``redactor`` option what it held goes through it (the log itself is not rewritten).

        >>> import tempfile
        >>> logs = tempfile.mkdtemp()
        >>> conv = Conversation(session_id="user-123", log_base_path=logs)
        >>> _ = conv.add(role="user", content="I live in Lisbon")
        >>> Conversation.restore_from_log("user-123", logs).context() == conv.context()
        True
        """
        check_log_options(cls, session_id, log_base_path, options)
        conv = cls(session_id=session_id, log_base_path=log_base_path, **options)
        replay(conv._buffer, conv._intake.scrub)
        return conv

    def __repr__(self) -> str:
        return (f"Conversation(session_id={self.session_id!r}, messages={len(self._buffer.messages)}, "
                f"summary={'yes' if self.summary else 'no'})")
