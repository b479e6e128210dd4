"""Chat-log file formats read by :func:`unified_memory.io.ingest.ingest_file`.

Parsing validates the whole text before anything is written: every message is a
checked :class:`~unified_memory.types.Message`, and every error names where it is
(``conversations[2].messages[5].role``, or the line of a JSONL file).

Formats:

- ``openai``: a JSON list of OpenAI-style messages, ``{"messages": [...]}``, or a list
  of conversations ``[{"id"?, "user_id"?, "session_id"?, "messages": [...]}, ...]``.
  Messages have ``role``, ``content`` (a string, or ``text`` / ``image_url`` parts),
  optional ``name``, ``tool_calls``, ``tool_call_id``, ``metadata`` and a time in
  ``created_at`` / ``when`` / ``timestamp`` (ISO 8601 or POSIX seconds; a message without
  one takes the time of the message before it, so the log keeps the file's order; a
  conversation without any is stamped when it is ingested). Other keys are ignored.
- ``jsonl``: one JSON object a line: a message (lines group into conversations by
  ``conversation_id`` / ``session_id``; all in one without them) or a conversation with ``messages``.
- ``locomo``: the LoCoMo benchmark's JSON. Each sample's ``sample_id`` is its user, each
  ``session_N`` a session ``"session_N"``; ``speaker_a`` speaks as ``user`` and ``speaker_b``
  as ``assistant`` (speaker name in ``name``); turns start at ``session_N_date_time`` a minute
  apart; a shared image's caption is appended as ``[shares a photo of ...]``.

    >>> parsed = parse_chat_text('[{"role": "user", "content": "hi"}]', "openai")
    >>> parsed.format, [m.content for m in parsed.sessions[0].messages]
    ('openai', ['hi'])
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from unified_memory.errors import MemoryTypeError, MemoryValueError, invalid
from unified_memory.types import LONE_SURROGATE, Message
from unified_memory.validation import check_metadata, check_scope_id, parse_when, to_message

__all__ = ["FORMATS", "ChatSession", "ParsedChat", "detect_format", "parse_chat_text", "parse_locomo_date"]

FORMATS = ("openai", "jsonl", "locomo")
_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id", "metadata")
_TIME_KEYS = ("created_at", "when", "timestamp")
_SESSION = re.compile(r"session_(\d+)")
_LOCOMO_DATE = "%I:%M %p on %d %B, %Y"


@dataclass(frozen=True, slots=True)
class ChatSession:
    """One conversation (or LoCoMo session) of a file: written in one transaction.

    ``conversation`` identifies it within the file (an explicit id, else its index);
    ``user_id`` / ``session_id`` are ``None`` when the file does not say.

    >>> ChatSession("#0", None, None, []).messages
    []
    """

    conversation: str
    user_id: str | None
    session_id: str | None
    messages: list[Message] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ParsedChat:
    """A whole parsed file: its format, how many conversations (LoCoMo samples) it holds,
    and its sessions in file order.

    >>> ParsedChat("openai", 0, []).sessions
    []
    """

    format: str
    conversations: int
    sessions: list[ChatSession]


class _Bad(Exception):
    """A structural error at ``location`` (raised while parsing, given its line afterwards)."""

    def __init__(self, location: str, message: str, line: int | None = None) -> None:
        super().__init__(f"{location}: {message}" if location else message)
        self.location, self.line = location, line


def parse_locomo_date(text: str) -> float:
    """A LoCoMo session date (``"1:56 pm on 8 May, 2023"``, taken as UTC; ISO 8601 also
    accepted) as POSIX seconds.

    >>> parse_locomo_date("1:56 pm on 8 May, 2023")
    1683554160.0
    """
    try:
        return datetime.strptime(text.strip(), _LOCOMO_DATE).replace(tzinfo=UTC).timestamp()
    except ValueError:
        stamp = parse_when("date", text)
        assert stamp is not None
        return stamp


def detect_format(name: str, text: str) -> str:
    """The format of a file from its name and text: ``.jsonl`` / ``.ndjson`` is JSONL;
    JSON holding LoCoMo samples is ``locomo``; other JSON is ``openai``; text that is not one
    JSON document but whose first line is a JSON object is JSONL; anything else ``openai``
    (whose parsing reports what is wrong, with its line).

    >>> detect_format("chat.json", '[{"sample_id": "s1", "conversation": {"speaker_a": "A"}}]')
    'locomo'
    >>> detect_format("chat.txt", '{"role": "user", "content": "hi"}\\n{"role": "assistant", "content": "yo"}')
    'jsonl'
    """
    return _shape(name, text) or "openai"


def _shape(name: str, text: str) -> str | None:
    """The format the name or the text shows (see :func:`detect_format`), ``None`` when neither does."""
    if Path(name).suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, nested too deeply, an int of more than 4300 digits
        first = next((line for line in text.splitlines() if line.strip()), "")
        try:
            return "jsonl" if isinstance(json.loads(first), dict) else None
        except (ValueError, RecursionError):
            return None
    samples = data if isinstance(data, list) else [data]
    if samples and all(isinstance(s, Mapping) and isinstance(s.get("conversation"), Mapping) for s in samples):
        return "locomo"
    return "openai"


def parse_chat_text(text: str, format: str, *, source: str = "<text>") -> ParsedChat:
    """Parse and validate a whole file's text in ``format`` (one of :data:`FORMATS`).

    Raises :class:`MemoryValueError` starting with ``source`` and naming the line
    (``"chat.jsonl:2: ..."``) or the location (``"chat.json: messages[1].role: ..."``);
    when the text is of another format than ``format`` (by ``source``'s extension or its
    content), the error says so (field ``format``) instead of what the wrong parser tripped on.

    >>> parse_chat_text('{"role": "user", "content": "a"}\\n{"role": "robot", "content": "b"}', "jsonl",
    ...                 source="chat.jsonl")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: chat.jsonl:2: message.role: Input should be 'user', 'assistant', 'system' or 'tool'
    >>> parse_chat_text('[{"role": "user", "content": "hi"}]', "locomo", source="chat.json")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: format: the content of chat.json does not match format 'locomo': it is 'openai' ...
    """
    if format not in FORMATS:
        raise invalid("format", f"must be one of {', '.join(FORMATS)} or auto, got {format!r}")
    try:
        return _parse(text, format)
    except _Bad as exc:
        error = _error(source, exc)
    shape = _shape(source, text)
    if shape is None or shape == format:
        raise error
    mismatch = f"the content of {source} does not match format {format!r}"
    try:
        _parse(text, shape)
    except _Bad as other:
        raise invalid("format", f"{mismatch}; read as {shape!r}, the format it looks like, it fails too: "
                                f"{_error(source, other)}") from None
    raise invalid("format", f"{mismatch}: it is {shape!r} (choose format {shape!r}, or 'auto' to detect it)")


def _parse(text: str, format: str) -> ParsedChat:
    if format == "jsonl":
        return _parse_jsonl(text)
    data = _loads(text, 0)
    return _parse_locomo(data) if format == "locomo" else _parse_openai(data)


def _error(source: str, exc: _Bad) -> MemoryValueError:
    prefix = f"{source}:{exc.line}: " if exc.line is not None else f"{source}: "
    return MemoryValueError(f"{prefix}{exc}", field=exc.location or None)


def _surrogate_at(data: Any) -> str | None:
    """The path of the first string (or key) holding a lone surrogate (``"\\ud800"`` in the
    JSON: it cannot be stored as UTF-8), or ``None``."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if LONE_SURROGATE.search(value):
                return where or "value"
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                path = f"{where}.{key}" if where else str(key)
                if LONE_SURROGATE.search(key):
                    return path
                stack.append((item, path))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]") for i, item in reversed(list(enumerate(value))))
    return None


def _loads(text: str, line_offset: int) -> Any:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Bad("", f"malformed JSON: {exc.msg} (column {exc.colno})", exc.lineno + line_offset) from None
    except RecursionError:  # a recursion bomb ('[[[[...'): refused like any malformed JSON
        raise _Bad("", "malformed JSON: nested too deeply") from None  # a JSONL line: named by the caller
    except ValueError as exc:  # an integer of more than 4300 digits
        raise _Bad("", f"malformed JSON: {exc}") from None
    where = _surrogate_at(data)
    if where is not None:
        raise _Bad(where, "not valid unicode text (it holds a lone surrogate)")
    return data


def _message(location: str, value: Any) -> Message:
    """One OpenAI-style message dict as a checked Message (unknown keys ignored)."""
    if not isinstance(value, Mapping):
        raise _Bad(location, f"expected a message object, got {type(value).__name__}")
    data = {key: value[key] for key in _MESSAGE_KEYS if key in value}
    time_key = next((key for key in _TIME_KEYS if value.get(key) is not None), None)
    content = data.get("content")
    if isinstance(content, list):
        data["content"], images = _parts(f"{location}.content", content)
        if images:
            data["images"] = images
    try:
        if "metadata" in data:
            data["metadata"] = check_metadata(f"{location}.metadata", data["metadata"])
        when = parse_when(f"{location}.{time_key}", value[time_key]) if time_key is not None else None
        return to_message(location, data, when=when)
    except (MemoryValueError, MemoryTypeError) as exc:
        raise _Bad(exc.field or location, str(exc).removeprefix(f"{exc.field}: ")) from None


def _parts(location: str, parts: list[Any]) -> tuple[str, list[str]]:
    """Text (parts joined by newlines) and image URLs of an OpenAI content-part list."""
    texts: list[str] = []
    images: list[str] = []
    for i, part in enumerate(parts):
        where = f"{location}[{i}]"
        if isinstance(part, str):
            texts.append(part)
        elif not isinstance(part, Mapping):
            raise _Bad(where, f"expected a content part object, got {type(part).__name__}")
        elif part.get("type") in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if not isinstance(url, str):
                raise _Bad(f"{where}.image_url", "expected a URL string or {\"url\": ...}")
            images.append(url)
        else:
            raise _Bad(f"{where}.type", f"expected a text or image_url part, got {part.get('type')!r}")
    return "\n".join(texts), images


def _identity(conversation: str, user: str | None) -> str:
    """A conversation's identity in its file: its id or index, and the user the file names."""
    return conversation if user is None else f"{conversation}@{user}"


def _fill_times(messages: list[Message]) -> list[Message]:
    """A message without a time takes the time of the one before it (the first ones, of
    the first that has one), so the log keeps the file's order; none timed: all ``None``."""
    known = next((m.created_at for m in messages if m.created_at is not None), None)
    if known is None:
        return messages
    filled = []
    for message in messages:
        if message.created_at is None:
            message = message.model_copy(update={"created_at": known})
        known = message.created_at
        filled.append(message)
    return filled


def _scope_id(location: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    try:
        return check_scope_id(location, value)
    except (MemoryValueError, MemoryTypeError) as exc:
        raise _Bad(location, str(exc).removeprefix(f"{location}: ")) from None


def _conversation(location: str, value: Any, index: int, *, named: bool) -> ChatSession:
    """A conversation object ``{"id"?, "user_id"?, "session_id"?, "messages": [...]}``;
    ``named``: an anonymous one gets session ``conversation_<index>``."""
    if not isinstance(value, Mapping):
        raise _Bad(location, f"expected a conversation object, got {type(value).__name__}")
    messages = value.get("messages")
    prefix = f"{location}." if location else ""
    if not isinstance(messages, list):
        raise _Bad(f"{prefix}messages", "expected a list of messages")
    ident = next((value[k] for k in ("conversation_id", "id", "session_id") if value.get(k) is not None), None)
    ident = _scope_id(f"{prefix}id", ident)
    session = _scope_id(f"{prefix}session_id", value.get("session_id")) or ident
    if session is None and named:
        session = f"conversation_{index}"
    user = _scope_id(f"{prefix}user_id", value.get("user_id"))
    return ChatSession(_identity(f"id:{ident}" if ident is not None else f"#{index}", user), user, session,
                       _fill_times([_message(f"{prefix}messages[{i}]", m) for i, m in enumerate(messages)]))


def _parse_openai(data: Any) -> ParsedChat:
    if isinstance(data, Mapping):
        return ParsedChat("openai", 1, [_conversation("", data, 0, named=False)])
    if not isinstance(data, list):
        raise _Bad("", f"expected a list of messages or conversations, got {type(data).__name__}")
    if data and all(isinstance(item, Mapping) and "messages" in item and "role" not in item for item in data):
        sessions = [_conversation(f"conversations[{i}]", c, i, named=True) for i, c in enumerate(data)]
        return ParsedChat("openai", len(sessions), sessions)
    messages = _fill_times([_message(f"messages[{i}]", m) for i, m in enumerate(data)])
    return ParsedChat("openai", 1 if messages else 0, [ChatSession("#0", None, None, messages)] if messages else [])


def _parse_jsonl(text: str) -> ParsedChat:
    groups: dict[tuple[str | None, str | None], list[Message]] = {}
    group_sessions: dict[tuple[str | None, str | None], str | None] = {}
    conversations: list[ChatSession] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = _loads(line, number - 1)
            if not isinstance(item, Mapping):
                raise _Bad("", f"expected a JSON object, got {type(item).__name__}")
            if "messages" in item and "role" not in item:
                conversations.append(_conversation("", item, len(conversations), named=True))
                continue
            ident = next((item[k] for k in ("conversation_id", "session_id") if item.get(k) is not None), None)
            key = (_scope_id("user_id", item.get("user_id")), _scope_id("conversation_id", ident))
            bucket = groups.setdefault(key, [])
            group_sessions.setdefault(key, _scope_id("session_id", item.get("session_id")) or key[1])
            bucket.append(_message("message", item))
        except _Bad as exc:
            raise _Bad(exc.location, str(exc).removeprefix(f"{exc.location}: ") if exc.location else str(exc),
                       exc.line or number) from None
    sessions = [ChatSession(_identity(f"id:{ident}" if ident is not None else "lines", user), user,
                            group_sessions[(user, ident)],
                            _fill_times(messages)) for (user, ident), messages in groups.items()]
    return ParsedChat("jsonl", len(sessions) + len(conversations), sessions + conversations)


def _parse_locomo(data: Any) -> ParsedChat:
    samples = [data] if isinstance(data, Mapping) else data
    if not isinstance(samples, list):
        raise _Bad("", f"expected a list of LoCoMo samples, got {type(data).__name__}")
    sessions: list[ChatSession] = []
    for s, sample in enumerate(samples):
        where = f"samples[{s}]"
        if not isinstance(sample, Mapping):
            raise _Bad(where, f"expected a sample object, got {type(sample).__name__}")
        sample_id = _scope_id(f"{where}.sample_id", sample.get("sample_id"))
        if sample_id is None:
            raise _Bad(f"{where}.sample_id", "required")
        conv = sample.get("conversation")
        if not isinstance(conv, Mapping):
            raise _Bad(f"{where}.conversation", "expected an object")
        where = f"{where}.conversation"
        roles: dict[str, str] = {}
        for key, role in (("speaker_a", "user"), ("speaker_b", "assistant")):
            if not isinstance(conv.get(key), str) or not conv[key].strip():
                raise _Bad(f"{where}.{key}", "expected the speaker's name")
            roles.setdefault(conv[key], role)
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k)))
        for n in numbers:
            turns, date = conv[f"session_{n}"], conv.get(f"session_{n}_date_time")
            if not isinstance(turns, list):
                raise _Bad(f"{where}.session_{n}", "expected a list of turns")
            start = None
            if date is not None:
                try:
                    start = parse_locomo_date(date) if isinstance(date, str) else parse_when("date", date)
                except (MemoryValueError, MemoryTypeError):
                    raise _Bad(f"{where}.session_{n}_date_time",
                               f"expected a date like '1:56 pm on 8 May, 2023', got {date!r}") from None
            messages = [_locomo_turn(f"{where}.session_{n}[{i}]", turn, roles, sample_id,
                                     None if start is None else start + 60.0 * i)
                        for i, turn in enumerate(turns)]
            if messages:
                sessions.append(ChatSession(f"sample:{sample_id}", sample_id, f"session_{n}", messages))
    return ParsedChat("locomo", len(samples), sessions)


def _locomo_turn(where: str, turn: Any, roles: dict[str, str], sample_id: str, when: float | None) -> Message:
    if not isinstance(turn, Mapping):
        raise _Bad(where, f"expected a turn object, got {type(turn).__name__}")
    speaker, text = turn.get("speaker"), turn.get("text")
    if not isinstance(speaker, str) or speaker not in roles:
        raise _Bad(f"{where}.speaker", f"expected one of {sorted(roles)}, got {speaker!r}")
    if not isinstance(text, str):
        raise _Bad(f"{where}.text", f"expected a string, got {type(text).__name__}")
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [shares a photo of {re.sub(r'^a (photo|photography) of ', '', caption.strip())}]"
    metadata: dict[str, Any] = {"sample_id": sample_id}
    if turn.get("dia_id") is not None:
        metadata["dia_id"] = str(turn["dia_id"])
    data: dict[str, Any] = {"role": roles[speaker], "content": text, "name": speaker, "metadata": metadata}
    urls = turn.get("img_url")
    if isinstance(urls, list) and urls and all(isinstance(u, str) for u in urls):
        data["images"] = urls
    try:
        return to_message(where, data, when=when)
    except (MemoryValueError, MemoryTypeError) as exc:
        raise _Bad(exc.field or where, str(exc).removeprefix(f"{exc.field}: ")) from None
