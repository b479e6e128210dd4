"""The LlamaIndex memory block (unified_memory.integrations.llama_index) with the real llama-index-core,
offline: what LlamaIndex's own block tests ask of a block (content for the prompt from ``aget``,
``aput`` taking what the chat queue flushes, truncation by priority, session ids), inside
``Memory.from_defaults``, on a local memory and through the service (``RemoteMemory``)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core", reason="needs the llama-index extra")

from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from llama_index.core.memory import Memory  # noqa: E402

from unified_memory import MemoryTypeError, MemoryValueError, UnifiedMemory  # noqa: E402
from unified_memory.integrations.llama_index import MemoryBlock  # noqa: E402


def run(coro):
    return asyncio.run(coro)


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def test_put_logs_the_flushed_messages_and_get_recalls_for_the_latest_ones():
    with UnifiedMemory(user_id="ada", retrieval="lexical") as mem:
        block = MemoryBlock(memory=mem, max_tokens=120)
        run(block.aput([user("I'm allergic to peanuts"), ChatMessage(role="assistant", content="Noted.")]))
        assert [m.content for m in mem.episodes()] == ["I'm allergic to peanuts", "Noted."]
        assert any("peanuts" in f.text for f in mem.facts())  # extracted as from any logged turn
        text = run(block.aget([user("hello"), user("what should I avoid eating? peanuts?")]))
        assert "peanuts" in text and text.startswith("<memory>")
        assert mem.context("peanuts", max_tokens=120, include_conversation=False).tokens <= 120


def test_get_without_messages_gives_the_most_important_facts_and_an_empty_memory_nothing():
    with UnifiedMemory(user_id="ada", retrieval="lexical") as mem:
        block = MemoryBlock(memory=mem)
        assert run(block.aget([])) == ""
        mem.remember("My daughter is called Ines", importance=0.9)
        assert "Ines" in run(block.aget(None))


def test_the_block_never_exceeds_its_budget_and_truncates_on_request():
    with UnifiedMemory(user_id="ada", retrieval="lexical") as mem:
        mem.remember_many([f"I collected stamp number {i} from Lisbon" for i in range(60)])
        block = MemoryBlock(memory=mem, max_tokens=200)
        text = run(block.aget([user("which stamps from Lisbon do I have?")]))
        full = mem.context("which stamps from Lisbon do I have?", max_tokens=200, include_conversation=False)
        assert text == full.text and full.tokens <= 200
        shorter = run(block.atruncate(text, 120))
        assert shorter is not None and len(shorter) < len(text) and "Lisbon" in shorter
        assert run(block.atruncate(shorter, 10_000)) is None  # nothing left to keep


def test_inside_llama_index_memory_the_queue_flushes_into_the_block_and_the_prompt_carries_it():
    with UnifiedMemory(user_id="ada", retrieval="lexical") as mem:
        block = MemoryBlock(memory=mem, max_tokens=300)
        memory = Memory.from_defaults(session_id="chat-1", token_limit=600, chat_history_token_ratio=0.2,
                                      token_flush_size=40, memory_blocks=[block])
        run(memory.aput(user("I live in Porto and I keep bees on the roof")))
        for i in range(12):  # enough chat to push the first message out of the queue
            run(memory.aput(user(f"filler message number {i} about nothing in particular")))
            run(memory.aput(ChatMessage(role="assistant", content=f"ok {i}")))
        logged = [m.content for m in mem.episodes(session_id="chat-1")]
        assert "I live in Porto and I keep bees on the roof" in logged  # flushed to the block, in its session
        history = run(memory.aget(input="where do I live? do I keep bees?"))
        system = [m for m in history if m.role == "system"]
        assert system and "long_term_memory" in system[0].content
        assert "- I live in Porto and I keep bees on the roof" in system[0].content  # the fact, recalled
        assert "filler message number 0" not in [m.content for m in history if m.role != "system"]  # left the queue


def test_sessions_keep_their_own_logs_and_share_the_long_term_facts():
    with UnifiedMemory(user_id="ada", retrieval="lexical") as mem:
        block = MemoryBlock(memory=mem)
        one, two = user("My sister Maria lives in Lisbon"), user("I like green tea")
        one.additional_kwargs["session_id"], two.additional_kwargs["session_id"] = "s1", "s2"
        run(block.aput([one, two]))
        assert [m.content for m in mem.episodes(session_id="s1")] == ["My sister Maria lives in Lisbon"]
        assert [m.content for m in mem.episodes(session_id="s2")] == ["I like green tea"]
        assert "Maria" in run(block.aget([user("where does Maria live?")], session_id="s2"))


def test_bad_arguments_are_the_librarys_errors_naming_the_field():
    with UnifiedMemory() as mem:
        for kwargs, error, field in [(dict(memory=3), MemoryTypeError, "memory"),
                                     (dict(memory=mem, max_tokens=0), MemoryValueError, "max_tokens"),
                                     (dict(memory=mem, query_messages="x"), MemoryValueError, "query_messages"),
                                     (dict(memory=mem, bogus=1), MemoryValueError, "bogus"),
                                     (dict(), MemoryValueError, "memory")]:
            with pytest.raises(error) as caught:
                MemoryBlock(**kwargs)
            assert caught.value.field == field


def test_through_the_service_with_remote_memory(tmp_path):
    pytest.importorskip("fastapi", reason="the service needs the server extra")
    from unified_memory import RemoteMemory
    from unified_memory.service.background import ServiceProcess

    with ServiceProcess(tmp_path / "memory.db") as service:
        key = service.create_key("ada")
        with RemoteMemory(service.url, key, user_id="ada", timeout=30) as remote:
            block = MemoryBlock(memory=remote, max_tokens=150)
            run(block.aput([user("I'm allergic to peanuts"), ChatMessage(role="assistant", content="Noted.")]))
            assert "peanuts" in run(block.aget([user("what should I avoid eating? peanuts?")]))
            assert [m.content for m in remote.episodes()] == ["I'm allergic to peanuts", "Noted."]


def test_the_example_agent_remembers_across_sessions(capsys, example):
    """``examples/llama_index_agent.py`` runs offline: Tuesday's new chat answers from Monday's."""
    module = example("llama_index_agent")
    assert module.main(["llama_index_agent.py", "Where does my sister live?", "What am I allergic to?"]) == 0
    out = capsys.readouterr().out
    assert "tuesday> Where does my sister live?\n  From memory: My sister Maria lives in Lisbon" in out
    assert "From memory: I'm allergic to peanuts" in out.split("What am I allergic to?")[1]
