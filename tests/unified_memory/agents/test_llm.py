"""The LLM adapters: as_llm, and OpenAICompatibleLLM against a real loopback HTTP server."""

from __future__ import annotations

import asyncio
import doctest
import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import unified_memory.agents.llm as llm_module
from unified_memory.agents.llm import CallableLLM, LLMError, OpenAICompatibleLLM, acomplete, as_llm
from unified_memory.errors import DependencyError, MemoryTypeError, MemoryValueError, UnifiedMemoryError
from unified_memory.protocols import LLM
from unified_memory.types import Message


class _ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ChatHandler)
        self.requests: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
        self.fail_with: int | None = None
        self.reply = "Hello from the loopback model"
        self.responder: Any = None  # optional: request body -> reply text


class _ChatHandler(BaseHTTPRequestHandler):
    server: _ChatServer

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        self.server.requests.append(body)
        self.server.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        if self.server.fail_with is not None:
            self._send(self.server.fail_with, {"error": {"message": "the model crashed", "type": "server_error",
                                                         "code": None, "param": None}})
            return
        self._send(200, {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": self.server.responder(body) if self.server.responder else self.server.reply},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11},
        })


@pytest.fixture
def server() -> Iterator[_ChatServer]:
    srv = _ChatServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


@pytest.fixture
def base_url(server: _ChatServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello"}]


# --------------------------------------------------------------------------- OpenAICompatibleLLM


def test_complete_round_trips_through_a_real_http_server(server: _ChatServer, base_url: str) -> None:
    pytest.importorskip("openai")
    llm = OpenAICompatibleLLM("tiny-model", base_url=base_url, api_key="sk-test", max_retries=0)
    assert isinstance(llm, LLM)
    assert llm.complete(MESSAGES) == "Hello from the loopback model"
    [request] = server.requests
    assert request["model"] == "tiny-model"
    assert request["messages"] == MESSAGES
    assert request["temperature"] == 0.0
    assert server.headers_seen[0]["authorization"] == "Bearer sk-test"


def test_acomplete_round_trips_and_works_across_event_loops(server: _ChatServer, base_url: str) -> None:
    pytest.importorskip("openai")
    llm = OpenAICompatibleLLM("tiny-model", base_url=base_url, max_retries=0)
    server.reply = "async hello"
    assert asyncio.run(llm.acomplete(MESSAGES)) == "async hello"
    assert asyncio.run(acomplete(llm, MESSAGES)) == "async hello"  # a second loop: no stale client
    assert [r["messages"] for r in server.requests] == [MESSAGES, MESSAGES]
    assert {r["model"] for r in server.requests} == {"tiny-model"}


def test_message_objects_are_sent_as_openai_dicts(server: _ChatServer, base_url: str) -> None:
    pytest.importorskip("openai")
    llm = OpenAICompatibleLLM("m", base_url=base_url, temperature=None, max_retries=0)
    llm.complete([Message(role="user", content="hi", metadata={"x": 1})])
    [request] = server.requests
    assert request["messages"] == [{"role": "user", "content": "hi"}]
    assert "temperature" not in request


def test_http_500_becomes_a_library_error_with_the_cause_chained(server: _ChatServer, base_url: str) -> None:
    openai = pytest.importorskip("openai")
    server.fail_with = 500
    llm = OpenAICompatibleLLM("tiny-model", base_url=base_url, max_retries=0)
    with pytest.raises(LLMError) as caught:
        llm.complete(MESSAGES)
    assert isinstance(caught.value, UnifiedMemoryError)
    assert caught.value.field == "llm"
    assert "HTTP 500" in str(caught.value) and "tiny-model" in str(caught.value)
    assert "the model crashed" in str(caught.value)
    assert isinstance(caught.value.__cause__, openai.APIStatusError)
    with pytest.raises(LLMError, match="HTTP 500"):
        asyncio.run(llm.acomplete(MESSAGES))


def test_the_sdk_retries_5xx_when_asked(server: _ChatServer, base_url: str) -> None:
    pytest.importorskip("openai")
    server.fail_with = 503
    llm = OpenAICompatibleLLM("m", base_url=base_url, max_retries=1, timeout=5)
    with pytest.raises(LLMError, match="HTTP 503"):
        llm.complete(MESSAGES)
    assert len(server.requests) == 2


def test_an_unreachable_endpoint_is_a_library_error(server: _ChatServer) -> None:
    pytest.importorskip("openai")
    port = server.server_address[1]
    server.shutdown()
    server.server_close()  # the port is now closed
    llm = OpenAICompatibleLLM("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=2)
    with pytest.raises(LLMError, match="APIConnectionError") as caught:
        llm.complete(MESSAGES)
    assert caught.value.__cause__ is not None


def test_api_key_defaults_to_the_environment_or_not_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert OpenAICompatibleLLM("m", base_url="http://127.0.0.1:9/v1").api_key == "not-needed"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    llm = OpenAICompatibleLLM("m", base_url="http://127.0.0.1:9/v1")
    assert llm.api_key == "sk-env"
    assert "sk-env" not in repr(llm)


def test_a_missing_sdk_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_openai(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "openai" or name.startswith("openai."):
            raise ImportError("No module named 'openai'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_openai)
    with pytest.raises(DependencyError, match=r'pip install "unified-memory\[llm\]"') as caught:
        OpenAICompatibleLLM("m")
    assert isinstance(caught.value, ImportError)


def test_an_injected_client_needs_no_sdk_and_acomplete_uses_a_thread() -> None:
    seen: list[dict[str, Any]] = []

    class Completions:
        def create(self, **kwargs: Any) -> Any:
            seen.append(kwargs)
            message = type("M", (), {"content": "from fake"})()
            return type("R", (), {"choices": [type("C", (), {"message": message})()]})()

    client = type("Client", (), {"chat": type("Chat", (), {"completions": Completions()})()})()
    llm = OpenAICompatibleLLM("m", client=client, temperature=0.7)
    assert llm.complete(MESSAGES) == "from fake"
    assert asyncio.run(llm.acomplete(MESSAGES)) == "from fake"
    assert seen[0] == {"model": "m", "messages": MESSAGES, "temperature": 0.7}


def test_an_empty_choice_list_is_a_library_error() -> None:
    client = type("Client", (), {"chat": type("Chat", (), {"completions": type("Co", (), {
        "create": lambda self, **kwargs: type("R", (), {"choices": []})()})()})()})()
    with pytest.raises(LLMError, match="no choices"):
        OpenAICompatibleLLM("m", client=client).complete(MESSAGES)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"model": ""}, "model"),
    ({"model": "m", "timeout": 0}, "timeout"),
    ({"model": "m", "temperature": 3}, "temperature"),
    ({"model": "m", "max_retries": -1}, "max_retries"),
])
def test_invalid_settings_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(MemoryValueError) as caught:
        OpenAICompatibleLLM(**kwargs, client=object())
    assert caught.value.field == field


# --------------------------------------------------------------------------- as_llm


def test_as_llm_wraps_a_plain_callable() -> None:
    seen: list[Any] = []
    llm = as_llm(lambda messages: seen.append(messages) or "ok")
    assert isinstance(llm, CallableLLM) and isinstance(llm, LLM)
    assert llm.complete([Message(role="user", content="hi")]) == "ok"
    assert seen == [[{"role": "user", "content": "hi"}]]


def test_as_llm_returns_an_object_with_complete_as_is() -> None:
    class Model:
        def complete(self, messages: Any) -> str:
            return "done"

    model = Model()
    assert as_llm(model) is model


@pytest.mark.parametrize("bad", [None, 3, "gpt-4o", object(), Message])
def test_as_llm_rejects_what_is_not_a_model(bad: Any) -> None:
    with pytest.raises(MemoryTypeError) as caught:
        as_llm(bad)
    assert caught.value.field == "llm"


def test_a_callable_must_reply_with_text_and_be_synchronous() -> None:
    with pytest.raises(MemoryTypeError, match="llm: expected a str reply"):
        as_llm(lambda messages: 42).complete(MESSAGES)

    async def async_model(messages: Any) -> str:
        return "x"

    with pytest.raises(MemoryTypeError, match="synchronous"):
        as_llm(async_model)
    with pytest.raises(MemoryTypeError, match="messages"):
        as_llm(lambda messages: "x").complete("not a list")


def test_acomplete_prefers_a_native_async_method() -> None:
    class Both:
        def complete(self, messages: Any) -> str:
            return "sync"

        async def acomplete(self, messages: Any) -> str:
            return "async"

    assert asyncio.run(acomplete(Both(), MESSAGES)) == "async"
    assert asyncio.run(acomplete(lambda messages: "sync", MESSAGES)) == "sync"


def test_docstring_examples_run() -> None:
    assert doctest.testmod(llm_module).failed == 0


# --------------------------------------------------------------------------- the example


def _load_example() -> Any:
    path = Path(__file__).resolve().parents[3] / "examples" / "openai_agent.py"
    spec = importlib.util.spec_from_file_location("openai_agent_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_imports_without_a_server_or_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORY_DB", raising=False)
    example = _load_example()
    assert example._llm is None  # nothing built, nothing contacted
    assert callable(example.Agent.run) and callable(example.main)


def test_the_example_agent_remembers_through_the_loopback_server(
        server: _ChatServer, base_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("MODEL", "loopback-model")
    monkeypatch.delenv("MEMORY_DB", raising=False)
    extraction = json.dumps({
        "facts": [{"text": "My sister Maria lives in Lisbon", "importance": 0.9, "category": "relationship"}],
        "entities": [{"name": "Maria", "type": "person", "attributes": {"relation": "sister"}}],
        "triples": [{"subject": "Maria", "predicate": "lives_in", "object": "Lisbon"}]})

    def respond(body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        if system.startswith("You extract long-term memory"):
            return extraction if "Maria" in body["messages"][1]["content"] else \
                '{"facts": [], "entities": [], "triples": []}'
        return "Noted." if "Lisbon" not in system else "Your sister Maria lives in Lisbon."

    server.responder = respond
    example = _load_example()
    assert example.main(["openai_agent.py", "My sister Maria lives in Lisbon", "Where does my sister live?"]) == 0
    out = capsys.readouterr().out
    assert "agent> Noted." in out
    assert "agent> Your sister Maria lives in Lisbon." in out  # the memory reached the second prompt
    assert "- My sister Maria lives in Lisbon" in out
    assert {r["model"] for r in server.requests} == {"loopback-model"}
    assert example.mem.triples()[0].as_text() == "Maria lives in Lisbon"
    example.mem.close()
