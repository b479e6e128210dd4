"""Chat models for unified-memory: the :class:`~unified_memory.protocols.LLM` protocol in use.

Anything with ``complete(messages) -> str`` is an LLM, and so is a plain callable
``messages -> str`` (:func:`as_llm` wraps it). :class:`OpenAICompatibleLLM` talks to
any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM, llama.cpp
server) through the official ``openai`` SDK (``pip install "unified-memory[llm]"``).

    >>> llm = as_llm(lambda messages: "echo: " + messages[-1]["content"])
    >>> llm.complete([{"role": "user", "content": "hi"}])
    'echo: hi'

Errors from the endpoint are raised as :class:`LLMError`, with the SDK's error
chained as ``__cause__``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from unified_memory.errors import DependencyError, LLMError, invalid, wrong_type
from unified_memory.protocols import LLM
from unified_memory.types import Message

__all__ = ["LLM", "LLMError", "CallableLLM", "OpenAICompatibleLLM", "as_llm", "acomplete"]

INSTALL_HINT = 'pip install "unified-memory[llm]"'


def _as_dicts(messages: Sequence[Mapping[str, Any] | Message]) -> list[dict[str, Any]]:
    """OpenAI-style message dicts from dicts or :class:`Message` objects."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise wrong_type("messages", "a list of message dicts", messages)
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if isinstance(message, Message):
            out.append({key: value for key, value in message.model_dump(
                include={"role", "content", "name", "tool_calls", "tool_call_id"}).items() if value is not None})
        elif isinstance(message, Mapping):
            out.append(dict(message))
        else:
            raise wrong_type(f"messages[{i}]", "dict or Message", message)
    return out


class CallableLLM:
    """An :class:`~unified_memory.protocols.LLM` made from a callable ``messages -> str``.

    >>> CallableLLM(lambda messages: "ok").complete([{"role": "user", "content": "hi"}])
    'ok'
    """

    def __init__(self, function: Callable[[list[dict[str, Any]]], str]) -> None:
        if not callable(function):
            raise wrong_type("llm", "a callable messages -> str", function)
        if inspect.iscoroutinefunction(function):
            raise wrong_type("llm", "a synchronous callable (give an object with complete() and acomplete() "
                                    "for async models)", function)
        self.function = function

    def __repr__(self) -> str:
        return f"CallableLLM({self.function!r})"

    def complete(self, messages: Sequence[Mapping[str, Any] | Message]) -> str:
        """Call the function with OpenAI-style message dicts; its reply must be a ``str``."""
        reply = self.function(_as_dicts(messages))
        if not isinstance(reply, str):
            raise wrong_type("llm", "a str reply", reply)
        return reply


def as_llm(obj: Any) -> LLM:
    """Accept an object with ``complete(messages)`` (returned as is) or a plain callable.

    >>> class Fixed:
    ...     def complete(self, messages):
    ...         return "fixed"
    >>> llm = Fixed()
    >>> as_llm(llm) is llm
    True
    >>> as_llm(3)
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryTypeError: llm: expected an object with complete(messages) or a callable messages -> str, got int
    """
    if callable(getattr(obj, "complete", None)):
        model: LLM = obj
        return model
    if callable(obj) and not isinstance(obj, type):
        return CallableLLM(obj)
    raise wrong_type("llm", "an object with complete(messages) or a callable messages -> str", obj)


async def acomplete(llm: Any, messages: Sequence[Mapping[str, Any] | Message]) -> str:
    """Await ``llm.acomplete(messages)`` when the model has it, else run ``complete`` in a thread.

    >>> asyncio.run(acomplete(lambda messages: "ok", [{"role": "user", "content": "hi"}]))
    'ok'
    """
    model = as_llm(llm)
    native = getattr(model, "acomplete", None)
    if callable(native):
        reply: str = await native(messages)
        return reply
    # the messages go to the model as given (dicts or Message objects), as before
    complete: Callable[..., str] = model.complete
    return await asyncio.to_thread(complete, messages)


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise DependencyError(f"OpenAICompatibleLLM needs the openai SDK: {INSTALL_HINT}") from exc
    return openai


class OpenAICompatibleLLM:
    """An :class:`~unified_memory.protocols.LLM` over any OpenAI-compatible chat-completions endpoint.

    ``base_url`` is e.g. ``http://localhost:11434/v1`` (Ollama), ``http://localhost:8000/v1``
    (vLLM) or ``http://localhost:8080/v1`` (llama.cpp server); ``None`` lets the SDK use
    ``OPENAI_BASE_URL`` or OpenAI itself. ``api_key`` defaults to ``OPENAI_API_KEY``, or
    ``"not-needed"`` (local servers ignore it). ``max_retries`` is the SDK's own retry count
    for connection errors, 429 and 5xx answers. ``client`` / ``async_client`` inject
    ready-made ``openai.OpenAI`` / ``openai.AsyncOpenAI`` clients (or look-alikes); without
    ``async_client``, :meth:`acomplete` runs :meth:`complete` in a worker thread when a
    ``client`` was given. The SDK is imported only when a client has to be built.

    >>> from types import SimpleNamespace as NS
    >>> reply = NS(choices=[NS(message=NS(content="Hello!"))])
    >>> fake = NS(chat=NS(completions=NS(create=lambda **kwargs: reply)))
    >>> OpenAICompatibleLLM("llama3.2", client=fake).complete([{"role": "user", "content": "hi"}])
    'Hello!'
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 temperature: float | None = 0.0, timeout: float = 30.0, max_retries: int = 2,
                 client: Any = None, async_client: Any = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise invalid("model", f"must be a non-empty model name, got {model!r}")
        if base_url is not None and not isinstance(base_url, str):
            raise wrong_type("base_url", "str", base_url)
        if api_key is not None and not isinstance(api_key, str):
            raise wrong_type("api_key", "str", api_key)
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, int | float)
                                        or not 0.0 <= temperature <= 2.0):
            raise invalid("temperature", f"must be a number in [0, 2] or None, got {temperature!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise invalid("timeout", f"must be a positive number of seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise invalid("max_retries", f"must be an int >= 0, got {max_retries!r}")
        self.model = model
        self.base_url = base_url
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY") or "not-needed"
        self.temperature = temperature
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self._async_client = async_client
        self._own_client = client is None  # we built it, so we can build its async twin
        self._client = self._build(async_=False) if client is None else client

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatibleLLM(model={self.model!r}, base_url={self.base_url!r})"

    def _build(self, *, async_: bool) -> Any:
        openai = _import_openai()
        factory = openai.AsyncOpenAI if async_ else openai.OpenAI
        return factory(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout,
                       max_retries=self.max_retries)

    def _request(self, messages: Sequence[Mapping[str, Any] | Message]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "messages": _as_dicts(messages)}
        if self.temperature is not None:
            request["temperature"] = self.temperature
        return request

    def _where(self) -> str:
        return self.base_url or "the default OpenAI endpoint"

    def _failed(self, exc: BaseException) -> LLMError:
        status = getattr(exc, "status_code", None)
        what = f"HTTP {status}" if status is not None else type(exc).__name__
        return LLMError(f"llm: chat completion with model {self.model!r} at {self._where()} failed "
                        f"({what}): {exc}", field="llm")

    def _text(self, response: Any) -> str:
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise LLMError(f"llm: the endpoint at {self._where()} returned no choices", field="llm") from exc
        return content if isinstance(content, str) else ""

    def complete(self, messages: Sequence[Mapping[str, Any] | Message]) -> str:
        """Send the messages, return the first choice's text ('' when it has none)."""
        request = self._request(messages)
        try:
            response = self._client.chat.completions.create(**request)
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._text(response)

    async def acomplete(self, messages: Sequence[Mapping[str, Any] | Message]) -> str:
        """Async :meth:`complete`. Builds a short-lived ``AsyncOpenAI`` client per call (so it is
        safe across event loops) unless ``async_client`` was given.

        >>> from types import SimpleNamespace as NS
        >>> async def create(**kwargs):
        ...     return NS(choices=[NS(message=NS(content="async hi"))])
        >>> fake = NS(chat=NS(completions=NS(create=create)))
        >>> llm = OpenAICompatibleLLM("m", client=fake, async_client=fake)
        >>> asyncio.run(llm.acomplete([{"role": "user", "content": "hi"}]))
        'async hi'
        """
        request = self._request(messages)
        if self._async_client is None and not self._own_client:
            return await asyncio.to_thread(self.complete, messages)
        client = self._async_client or self._build(async_=True)
        try:
            response = await client.chat.completions.create(**request)
        except Exception as exc:
            raise self._failed(exc) from exc
        finally:
            if self._async_client is None:
                await client.close()
        return self._text(response)

