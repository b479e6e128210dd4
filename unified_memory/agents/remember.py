"""``@remember``: give an agent class a memory without touching its code.

The decorator wraps the class's entry method (``run`` / ``arun`` / ``__call__`` /
``chat``, or ``method=``), sync or async. Around each call, for the user named by
a ``user_id=`` argument or ``self.user_id``:

* ``inject=True`` — recall the ``top_k`` memories relevant to the input and put a
  fenced memory block in front of ``self.system_prompt`` for the duration of the
  call (also at ``self.memory_context``); the prompt is restored afterwards, also
  when the call raises;
* ``extract=True`` — after a successful call, log the turn (input and output) and
  extract facts, entities and triples from it; a call that raises records nothing.

A memory failure never breaks the agent's answer: it is logged (logger
``unified_memory.agents.remember``) and passed to ``on_error`` if given; ``raise_errors=True``
raises it instead.

    >>> from unified_memory import UnifiedMemory, remember
    >>> mem = UnifiedMemory()
    >>> @remember(mem)
    ... class Echo:
    ...     system_prompt = "You are terse."
    ...     def run(self, message, *, user_id="default"):
    ...         return self.system_prompt
    >>> _ = Echo().run("My name is Ada and I live in Lisbon")
    >>> "Lisbon" in Echo().run("where do I live?")
    True
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from unified_memory.errors import NotFoundError, invalid, wrong_type
from unified_memory.memory import UnifiedMemory
from unified_memory.protocols import MemoryClient

__all__ = ["remember", "register_store", "get_store", "ENTRY_METHODS"]

ENTRY_METHODS = ("run", "arun", "__call__", "chat")
_INPUT_NAMES = ("message", "input", "prompt", "query", "text", "content")
_LOG = logging.getLogger(__name__)
_STORES: dict[str, MemoryClient] = {}
_STORES_LOCK = threading.Lock()


def register_store(name: str, memory: MemoryClient) -> None:
    """Make ``memory`` (a ``UnifiedMemory`` or a ``RemoteMemory``) available to
    ``@remember(store=name)`` (lauren-ai's style).

    >>> register_store("user_memory", UnifiedMemory())
    >>> get_store("user_memory").user_id
    'default'
    """
    if not isinstance(name, str) or not name.strip():
        raise invalid("name", f"must be a non-empty str, got {name!r}")
    if not isinstance(memory, MemoryClient):
        raise wrong_type("memory", "UnifiedMemory or RemoteMemory", memory)
    with _STORES_LOCK:
        _STORES[name] = memory


def get_store(name: str) -> MemoryClient:
    """The memory registered under ``name``.

    >>> get_store("nowhere")
    Traceback (most recent call last):
    ...
    unified_memory.errors.NotFoundError: store: no memory registered as 'nowhere'; call register_store('nowhere', memory) first
    """
    if not isinstance(name, str):
        raise wrong_type("name", "str", name)
    with _STORES_LOCK:
        memory = _STORES.get(name)
    if memory is None:
        raise NotFoundError(f"store: no memory registered as {name!r}; call register_store({name!r}, memory) first",
                            field="store")
    return memory


def _resolve_store(store: Any) -> Callable[[], MemoryClient]:
    """``store`` as a way to get the memory at call time (a registered name may be
    registered after the class is decorated). A ``UnifiedMemory``, a ``RemoteMemory`` or
    anything else with the :class:`~unified_memory.protocols.MemoryClient` methods is used as is."""
    if isinstance(store, UnifiedMemory | MemoryClient):
        return lambda: store
    if isinstance(store, os.PathLike) or (isinstance(store, str) and store.endswith((".db", ".sqlite", ".sqlite3"))):
        opened = UnifiedMemory(store)
        return lambda: opened
    if isinstance(store, str) and store.strip():
        return lambda: get_store(store)
    raise wrong_type("store", "UnifiedMemory, RemoteMemory, a path to a .db file, or a name given to register_store",
                     store)


def _input_text(signature: inspect.Signature, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
    """The user's input: the first str argument after ``self`` (or a keyword like ``message=``)."""
    try:
        bound = signature.bind_partial(None, *args, **kwargs)
    except TypeError:
        bound = None
    if bound is not None:
        for name, value in list(bound.arguments.items())[1:]:
            if isinstance(value, str) and value.strip() and name != "user_id":
                return value
    for name in _INPUT_NAMES:
        value = kwargs.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _output_text(result: Any) -> str | None:
    if result is None:
        return None
    if isinstance(result, str):
        return result
    for attribute in ("content", "text", "output"):  # common reply objects
        value = getattr(result, attribute, None)
        if isinstance(value, str):
            return value
    return str(result)


@dataclass(frozen=True)
class _Binding:
    """What one decorated method needs at each call."""

    store: Callable[[], MemoryClient]
    extract: bool
    inject: bool
    top_k: int
    max_tokens: int
    prompt_attribute: str
    raise_errors: bool
    on_error: Callable[[str, BaseException], None] | None
    signature: inspect.Signature
    extractor: Any = None  # an LLMExtractor over ``extraction_model``, or None: the memory's own

    def _failed(self, stage: str, exc: BaseException, memory: MemoryClient | None = None) -> None:
        """Log, report to ``on_error`` and to the memory's event hooks (kind ``agent``), raise if asked."""
        _LOG.warning("memory %s failed: %s: %s", stage, type(exc).__name__, exc)
        if memory is not None:
            memory.report_failure("agent", f"{stage}: {type(exc).__name__}: {exc}")
        if self.on_error is not None:
            self.on_error(stage, exc)
        if self.raise_errors:
            raise exc

    def memory_for(self, agent: Any, kwargs: Mapping[str, Any]) -> MemoryClient | None:
        try:
            memory = self.store()
            user_id = kwargs.get("user_id") or getattr(agent, "user_id", None)
            return memory.scoped(user_id=user_id) if user_id and user_id != memory.user_id else memory
        except Exception as exc:  # noqa: BLE001 - reported, never breaks the agent
            self._failed("open", exc)
            return None

    @contextmanager
    def injected(self, agent: Any, memory: MemoryClient | None, text: str | None) -> Iterator[None]:
        """The memory block in front of the agent's prompt for the duration of the call."""
        if not self.inject or memory is None or text is None:
            yield
            return
        try:
            block = memory.context(text, max_tokens=self.max_tokens, include_conversation=False,
                                   limit=self.top_k).text
        except Exception as exc:  # noqa: BLE001
            self._failed("recall", exc, memory)
            block = ""
        name = self.prompt_attribute
        had_own = name in getattr(agent, "__dict__", {})
        original = getattr(agent, name, None)
        try:
            agent.memory_context = block
            if block:
                setattr(agent, name, f"{block}\n\n{original}" if original else block)
        except (AttributeError, TypeError) as exc:  # e.g. __slots__ without room for the prompt
            self._failed("inject", exc, memory)
            block = ""
        try:
            yield
        finally:
            if block:
                if had_own:
                    setattr(agent, name, original)
                else:
                    delattr(agent, name)  # the class attribute shows through again

    def record(self, memory: MemoryClient | None, text: str | None, result: Any) -> None:
        if not self.extract or memory is None or text is None:
            return
        try:
            memory.add_turn(text, _output_text(result), extract=True, extractor=self.extractor)
        except Exception as exc:  # noqa: BLE001
            self._failed("extract", exc, memory)


def _wrap(function: Callable[..., Any], binding: _Binding) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(function):
        @functools.wraps(function)
        async def async_call(self: Any, *args: Any, **kwargs: Any) -> Any:
            text = _input_text(binding.signature, args, kwargs)
            memory = binding.memory_for(self, kwargs)
            with binding.injected(self, memory, text):
                result = await function(self, *args, **kwargs)
            binding.record(memory, text, result)
            return result
        return async_call

    @functools.wraps(function)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        text = _input_text(binding.signature, args, kwargs)
        memory = binding.memory_for(self, kwargs)
        with binding.injected(self, memory, text):
            result = function(self, *args, **kwargs)
        binding.record(memory, text, result)
        return result
    return call


def remember(store: Any = None, *, extract: bool = True, inject: bool = True, top_k: int = 5,
             method: str | None = None, max_tokens: int = 1000, prompt_attribute: str = "system_prompt",
             raise_errors: bool = False, on_error: Callable[[str, BaseException], None] | None = None,
             extraction_model: Any = None) -> Callable[[type], type]:
    """Class decorator giving an agent long-term memory (see the module docstring).

    ``store`` is a :class:`UnifiedMemory`, a :class:`~unified_memory.remote.client.RemoteMemory`
    (the memory service), a path to a ``.db`` file, or a name given to :func:`register_store`. Each entry method found (``run``, ``arun``, ``__call__``,
    ``chat``) is wrapped, or only ``method``. ``extraction_model`` (an LLM or a
    ``messages -> str`` callable) extracts the agent's turns with an
    :class:`~unified_memory.extraction.llm_extractor.LLMExtractor` instead of the memory's extractor.

    >>> @remember(UnifiedMemory(), top_k=3)
    ... class Agent:
    ...     system_prompt = ""
    ...     async def arun(self, message):
    ...         return "ok"
    >>> import asyncio; asyncio.run(Agent().arun("hello"))
    'ok'
    """
    if store is None:
        raise invalid("store", "give a UnifiedMemory, a RemoteMemory, a .db path, or a name given to register_store")
    resolve = _resolve_store(store)
    for name, flag in (("extract", extract), ("inject", inject), ("raise_errors", raise_errors)):
        if not isinstance(flag, bool):
            raise wrong_type(name, "bool", flag)
    for name, number in (("top_k", top_k), ("max_tokens", max_tokens)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise invalid(name, f"must be a positive int, got {number!r}")
    if on_error is not None and not callable(on_error):
        raise wrong_type("on_error", "callable", on_error)
    for name, value in (("method", method), ("prompt_attribute", prompt_attribute)):
        if value is None and name == "method":
            continue
        if not isinstance(value, str):
            raise wrong_type(name, "str", value)
        if not value.isidentifier():
            raise invalid(name, f"must be an attribute name, got {value!r:.80}")
    extractor = None
    if extraction_model is not None:
        from unified_memory.extraction.llm_extractor import LLMExtractor

        extractor = LLMExtractor(extraction_model)

    def decorate(cls: type) -> type:
        if not isinstance(cls, type):
            raise wrong_type("remember", "a class to decorate", cls)
        names = [method] if method is not None else [n for n in ENTRY_METHODS if callable(getattr(cls, n, None))
                                                     and n in _defined_names(cls)]
        if not names or not callable(getattr(cls, names[0], None)):
            raise invalid("method", f"{cls.__name__} has no entry method to wrap: give method= "
                                    f"(looked for {', '.join(ENTRY_METHODS)})")
        for name in names:
            function = getattr(cls, name)
            binding = _Binding(resolve, extract=extract, inject=inject, top_k=top_k, max_tokens=max_tokens,
                               prompt_attribute=prompt_attribute, raise_errors=raise_errors, on_error=on_error,
                               signature=inspect.signature(function), extractor=extractor)
            setattr(cls, name, _wrap(function, binding))
        return cls

    return decorate


def _defined_names(cls: type) -> set[str]:
    """Names defined by the class or its bases (not ``object``'s own ``__call__`` etc.)."""
    return {name for klass in cls.__mro__ if klass is not object for name in vars(klass)}
