"""The memory as an OpenAI Agents SDK session (``pip install "unified-memory[openai-agents]"``).

The SDK's ``Runner`` reads a session's items before each run and adds the run's new items
after it. :class:`MemorySession` keeps those items in a :class:`~unified_memory.UnifiedMemory`
(or a :class:`~unified_memory.RemoteMemory`), under the session id:

- every item the SDK stores (messages, tool calls and their results, reasoning, hosted tool
  calls) is logged as a message of the session and comes back from ``get_items`` exactly as
  it was added;
- logging is what the memory does with any turn: facts, people and relations are extracted
  from what the user said, so a later session (or any recall) knows them;
- when the session's items grow past ``compaction``'s threshold, the older ones are folded
  into a summary by the conversation engine's compaction (:mod:`unified_memory.conversation.compaction`;
  a tool call and its result are never separated): ``get_items`` then returns the summary
  and the recent items. Nothing is deleted: the compacted items stay in the episodic log;
- ``pop_item`` forgets the newest item (and what was derived only from it);
  ``clear_session`` starts the session afresh: what was said stays in long-term memory
  (:meth:`~unified_memory.UnifiedMemory.forget` deletes it).

.. code-block:: python

    from agents import Agent, Runner
    from unified_memory import UnifiedMemory
    from unified_memory.integrations.openai_agents import MemorySession

    memory = UnifiedMemory("memory.db", user_id="ada")
    result = await Runner.run(agent, "I'm allergic to peanuts", session=MemorySession("chat-1", memory=memory))
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from unified_memory.config import coerce_config
from unified_memory.conversation.compaction import CompactionConfig, compact
from unified_memory.conversation.compaction_processors import summary_message
from unified_memory.errors import (
    DependencyError,
    MemoryTypeError,
    NotFoundError,
    UnifiedMemoryError,
    invalid,
    wrong_type,
)
from unified_memory.extraction.summarizers import ExtractiveSummarizer, llm_compact_fn, summarizer_compact_fn
from unified_memory.integrations._checks import check_memory
from unified_memory.retrieval.tokens import chars_per_token_counter, message_tokens
from unified_memory.types import Episode, Message
from unified_memory.validation import check_text

INSTALL_HINT = 'pip install "unified-memory[openai-agents]"'

try:
    from agents.memory import SessionSettings
except ImportError as exc:  # tests/integrations/test_without_frameworks.py
    raise DependencyError(f"unified_memory.integrations.openai_agents needs openai-agents: {INSTALL_HINT}") from exc

__all__ = ["MemorySession", "INSTALL_HINT", "DEFAULT_COMPACTION"]

#: The memory methods the session calls (a UnifiedMemory and a RemoteMemory both have them).
_NEEDED = ("aadd_messages", "aepisodes", "aforget", "scoped")
#: Metadata key of a logged message that holds the SDK item it stands for (when the message alone
#: does not rebuild it), and of the session's own markers (a compaction's summary, a clearing).
ITEM_KEY, MARK_KEY = "openai_item", "openai_session"
#: Compact past 20,000 tokens of items (about 80,000 characters) down to three quarters of that.
DEFAULT_COMPACTION = CompactionConfig(token_threshold=20_000)
_FIRST_WINDOW = 64  # log entries read back first; doubled until the latest marker is in view


def _text_of(content: Any) -> str:
    """The text of an item's content: a string, or the text of its parts (input, output, refusal)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text", part.get("refusal"))
                if isinstance(text, str):
                    parts.append(text)
        return "\n".join(parts)
    return ""


def _message(item: Any, where: str) -> Message:
    """The memory message an SDK item is logged as: its role and text, a tool call or a tool
    result where it is one; the item itself in the metadata unless the message alone rebuilds it."""
    if not isinstance(item, Mapping):
        raise wrong_type(where, "an input item (a dict)", item)
    try:
        json.dumps(item, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise invalid(where, f"must be JSON (as the SDK's own sessions store items): {exc}") from None
    kind, role = item.get("type"), item.get("role")
    fields: dict[str, Any]
    if kind in (None, "message") and role in ("user", "assistant", "system", "developer"):
        text = _text_of(item.get("content"))
        fields = {"role": "system" if role == "developer" else role, "content": text or f"({role} message)"}
    elif isinstance(item.get("call_id"), str) and str(kind).endswith("_output"):
        output = item.get("output")
        text = output if isinstance(output, str) else _text_of(output) or json.dumps(output)
        fields = {"role": "tool", "tool_call_id": item["call_id"], "content": text or f"({kind})"}
    elif isinstance(item.get("call_id"), str):  # a function, computer, shell... call the model made
        name = item.get("name") if isinstance(item.get("name"), str) else str(kind)
        arguments = item.get("arguments") if isinstance(item.get("arguments"), str) else ""
        fields = {"role": "assistant", "content": None,
                  "tool_calls": [{"id": item["call_id"], "type": "function",
                                  "function": {"name": name, "arguments": arguments}}]}
    else:  # reasoning, a hosted tool's call (web or file search...), anything newer
        summary = _text_of(item.get("summary")) if kind == "reasoning" else ""
        fields = {"role": "assistant", "content": summary or f"({kind or 'item'})"}
    message = Message(**fields)
    if _item(message) != item:
        message = message.model_copy(update={"metadata": {ITEM_KEY: dict(item)}})
    return message


def _item(message: Message | Episode) -> dict[str, Any]:
    """The SDK item a logged message stands for."""
    kept = message.metadata.get(ITEM_KEY)
    if isinstance(kept, dict):
        return kept
    return {"role": message.role, "content": message.content or ""}


def _settings(value: Any) -> SessionSettings:
    """``session_settings`` as the SDK's sessions take it: a ``SessionSettings``, a dict of its
    fields (an unknown key is refused, as the SDK refuses it), or ``None`` (the defaults)."""
    if value is None:
        return SessionSettings()
    if isinstance(value, SessionSettings):
        return value
    if not isinstance(value, Mapping):
        raise wrong_type("session_settings", "SessionSettings, a dict or None", value)
    known = [f.name for f in dataclasses.fields(SessionSettings) if f.init]
    unknown = sorted(str(key) for key in value if key not in known)
    if unknown:
        raise MemoryTypeError(f"session_settings: Unknown session settings: {', '.join(unknown)} "
                              f"(SessionSettings has {', '.join(known)})", field="session_settings")
    try:
        return SessionSettings(**value)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(["session_settings", *(str(part) for part in first["loc"])])
        raise invalid(name, str(first["msg"])) from None


def _marker(entry: Episode) -> dict[str, Any] | None:
    mark = entry.metadata.get(MARK_KEY)
    return mark if isinstance(mark, dict) else None


class MemorySession:
    """An OpenAI Agents SDK ``Session`` (the protocol: ``get_items``, ``add_items``,
    ``pop_item``, ``clear_session``) kept in a memory; see the module docstring.

    ``memory``: a :class:`~unified_memory.UnifiedMemory` or :class:`~unified_memory.RemoteMemory`;
    the session logs under its user (``user_id`` / ``agent_id`` scope it further) and
    ``session_id``. ``compaction``: a :class:`~unified_memory.conversation.compaction.CompactionConfig`
    or dict (``None``: never compact; default :data:`DEFAULT_COMPACTION`); the summary is
    written by ``compact_fn(messages, system_prompt) -> str``, else ``compaction_llm``, else
    offline (extractive). ``count_tokens`` measures items for it. ``extract``: facts are
    extracted from what is logged (``None``: the memory's setting). ``session_settings``:
    the SDK's ``SessionSettings`` or a dict of its fields (default ``SessionSettings()``, as
    the SDK's sessions; its ``limit`` is ``get_items``' default).
    """

    def __init__(self, session_id: str, *, memory: Any, user_id: str | None = None, agent_id: str | None = None,
                 compaction: CompactionConfig | Mapping[str, Any] | None = DEFAULT_COMPACTION,
                 compact_fn: Callable[[list[Any], str | None], str] | None = None, compaction_llm: Any = None,
                 count_tokens: Callable[[str], int] | None = None, extract: bool | None = None,
                 session_settings: SessionSettings | Mapping[str, Any] | None = None) -> None:
        check_text("session_id", session_id)
        check_memory(memory, _NEEDED)
        for field, hook in (("compact_fn", compact_fn), ("count_tokens", count_tokens)):
            if hook is not None and not callable(hook):
                raise wrong_type(field, "callable", hook)
        if extract is not None and not isinstance(extract, bool):
            raise wrong_type("extract", "bool or None", extract)
        self.session_id = session_id
        self.memory = memory.scoped(user_id=user_id, agent_id=agent_id, session_id=session_id)
        self.compaction = None if compaction is None else coerce_config(CompactionConfig, compaction, "compaction")
        if self.compaction is not None:
            self.compaction.threshold()  # a config with no threshold fails here, not on add_items
            if "tool_truncation" not in self.compaction.excluded_processors:  # items come back whole
                self.compaction = self.compaction.model_copy(
                    update={"excluded_processors": [*self.compaction.excluded_processors, "tool_truncation"]})
        if compact_fn is not None:
            self._summarize = compact_fn
        elif compaction_llm is not None:
            instructions = self.compaction.summarization.instructions if self.compaction else None
            self._summarize = llm_compact_fn(compaction_llm, instructions=instructions)
        else:
            self._summarize = summarizer_compact_fn(ExtractiveSummarizer())
        self.count_tokens = count_tokens or chars_per_token_counter
        self.extract = extract
        self.session_settings = session_settings  # checked by the setter

    def __repr__(self) -> str:
        return f"MemorySession(session_id={self.session_id!r})"

    @property
    def session_settings(self) -> SessionSettings:
        """The SDK's ``SessionSettings`` of this session (``SessionSettings()`` by default, as the
        SDK's own sessions); its ``limit`` is ``get_items``' default and the ``Runner``'s, which a
        ``RunConfig(session_settings=...)`` overrides. Set it to a ``SessionSettings``, a dict of
        its fields, or ``None`` (the default settings)."""
        return self._session_settings

    @session_settings.setter
    def session_settings(self, value: SessionSettings | Mapping[str, Any] | None) -> None:
        self._session_settings = _settings(value)

    # -- reading --------------------------------------------------------------------------------

    async def _window(self) -> tuple[str | None, list[Episode]]:
        """The session as the SDK sees it: the summary of what was compacted (``None``: none) and
        the log entries after the latest marker (compaction or clearing), oldest first."""
        size = _FIRST_WINDOW
        while True:
            entries: list[Episode] = await self.memory.aepisodes(session_id=self.session_id, limit=size)
            for index in range(len(entries) - 1, -1, -1):
                mark = _marker(entries[index])
                if mark is None:
                    continue
                after = [e for e in entries[index + 1:] if _marker(e) is None]
                if mark.get("cleared"):
                    return None, after
                through = mark.get("compacted_through")
                kept = [e for e in entries[:index] if _marker(e) is None]
                ids = [e.id for e in kept]
                start = ids.index(through) + 1 if through in ids else None
                if start is None and len(entries) == size:  # the compacted part reaches further back
                    break
                summary = mark.get("summary")
                return (summary if isinstance(summary, str) else None), kept[start or 0:] + after
            else:
                if len(entries) < size:
                    return None, entries
            size *= 4

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The session's items, oldest first (a compaction's summary first); ``limit``: the
        latest N of them, all of them when there are fewer (``None``: ``session_settings.limit``,
        else all; 0: none; negative: all, as the SDK's SQLite session)."""
        if limit is None:
            limit = self._session_settings.limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise wrong_type("limit", "int or None", limit)
        summary, entries = await self._window()
        items = ([_summary_item(summary)] if summary else []) + [_item(e) for e in entries]
        if limit is None or limit < 0:
            return items
        return items[-limit:] if limit else []

    # -- writing --------------------------------------------------------------------------------

    async def add_items(self, items: list[Any]) -> None:
        """Log the items (all checked first: one bad item logs nothing), then compact if due."""
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
            raise wrong_type("items", "a list of input items", items)
        messages = [_message(item, f"items[{i}]") for i, item in enumerate(items)]
        if not messages:
            return
        try:
            await self.memory.aadd_messages(messages, extract=self.extract)
        except UnifiedMemoryError as exc:  # the memory names messages[i]: here they are items[i]
            field = exc.field or ""
            if not field.startswith("messages["):
                raise
            raise type(exc)(str(exc).replace("messages[", "items[", 1), field="items[" + field[9:]) from None
        if self.compaction is not None:
            await self._compact_if_due()

    async def pop_item(self) -> dict[str, Any] | None:
        """Forget the newest item and return it (``None`` when there is none: a compaction's
        summary is not popped). Concurrent pops return each item once: one that another pop
        forgot first is skipped for the next newest."""
        while True:
            _, entries = await self._window()
            if not entries:
                return None
            newest = entries[-1]
            try:
                await self.memory.aforget(ids=[newest.id])
            except NotFoundError:
                continue  # popped meanwhile (by another pop of this session): take the next newest
            return _item(newest)

    async def clear_session(self) -> None:
        """Start the session afresh: ``get_items`` returns nothing until items are added. The
        items stay in the memory's episodic log (recall finds them; ``forget`` deletes them)."""
        await self.memory.aadd_messages([Message(role="system", content="(the session was cleared)",
                                                 metadata={MARK_KEY: {"cleared": True}})], extract=False)

    async def _compact_if_due(self) -> None:
        config = self.compaction
        assert config is not None
        summary, entries = await self._window()
        messages = [e.to_message() for e in entries]
        summary_tokens = (message_tokens(summary_message(summary), self.count_tokens) if summary else 0)
        total = summary_tokens + sum(message_tokens(m, self.count_tokens,
                                                    image_token_estimate=config.image_token_estimate)
                                     for m in messages)
        if total <= config.threshold():
            return
        result = compact(messages, config=config, count_tokens=self.count_tokens, summarize=self._summarize,
                         previous_summary=summary)
        kept = {m.id for m in result.messages}
        folded = [e for e in entries if e.id not in kept]
        if not folded or any(e.id in kept for e in entries[:len(folded)]):
            return  # nothing left the window, or not a prefix (never expected): leave it as it is
        text = result.summary if result.summary is not None else summary
        await self.memory.aadd_messages([Message(
            role="system", content=text or "(earlier items compacted)",
            metadata={MARK_KEY: {"compacted_through": folded[-1].id, "summary": text,
                                 "tokens_before": result.stats.tokens_before,
                                 "tokens_after": result.stats.tokens_after}})], extract=False)


def _summary_item(summary: str) -> dict[str, Any]:
    """The item that stands for the compacted part: the conversation engine's summary message."""
    message = summary_message(summary)
    return {"role": message.role, "content": message.content or ""}
