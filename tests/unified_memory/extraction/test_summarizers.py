"""Summarize-on-trim: a persisted running summary that context() shows."""

import doctest

from hypothesis import given, settings
from hypothesis import strategies as st

import unified_memory.extraction.summarizers
from unified_memory import UnifiedMemory
from unified_memory.extraction.summarizers import ExtractiveSummarizer, LLMSummarizer
from unified_memory.types import Message


def test_doctests():
    assert doctest.testmod(unified_memory.extraction.summarizers).failed == 0


def test_what_leaves_the_window_is_summarised_and_shown_before_the_conversation(tmp_path):
    path = tmp_path / "m.db"
    with UnifiedMemory(path, short_term_limit=2) as mem:
        mem.add_turn("I'm allergic to peanuts", "Noted")
        mem.add_turn("Let's plan dinner", "Sure")
        assert "allergic to peanuts" in mem.summary()
        block = mem.context("dinner ideas", max_tokens=400)
        conversation = block.text.split("## Conversation")[1]
        assert conversation.index("allergic to peanuts") < conversation.index("Let's plan dinner")
        assert "## Conversation" not in mem.context("dinner", max_tokens=400, include_conversation=False).text
    with UnifiedMemory(path, short_term_limit=2) as reopened:  # the summary persists
        assert "allergic to peanuts" in reopened.summary()
        reopened.clear()
        assert reopened.summary() == ""


def test_summaries_are_per_conversation_and_can_be_turned_off():
    with UnifiedMemory(short_term_limit=2) as mem:
        s1 = mem.scoped(session_id="s1")
        s1.add_turn("I live in Lisbon", "Nice")
        s1.add_turn("hello", "hi")
        assert "Lisbon" in s1.summary() and mem.scoped(session_id="s2").summary() == ""
        assert mem.scoped(user_id="bob", session_id="s1").summary() == ""
    with UnifiedMemory(short_term_limit=2, summarize_on_trim=False) as mem:
        mem.add_turn("I live in Lisbon", "Nice")
        mem.add_turn("hello", "hi")
        assert mem.summary() == ""


def test_an_llm_summarizer_is_used_and_falls_back_when_it_fails():
    replies = iter(["Ada is allergic to peanuts.", RuntimeError("model down")])

    def llm(messages):
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    summarizer = LLMSummarizer(llm)
    with UnifiedMemory(short_term_limit=2, summarizer=summarizer) as mem:
        mem.add_turn("I'm allergic to peanuts", "Noted")
        mem.add_turn("I keep bees", "Fun")
        assert mem.summary() == "Ada is allergic to peanuts."
        mem.add_turn("I play chess", "Great")
        assert summarizer.fallbacks == 1
        assert "Ada is allergic to peanuts." in mem.summary() and "keep bees" in mem.summary()


@settings(max_examples=50, deadline=None)
@given(previous=st.text(st.characters(blacklist_characters="\x00"), max_size=300),  # stored summaries have no NUL
       texts=st.lists(st.text(max_size=120), max_size=6),
       limit=st.integers(20, 400))
def test_extractive_summary_fits_and_is_deterministic(previous, texts, limit):
    messages = [Message(role="user", content=t) for t in texts if t.strip()]
    summarizer = ExtractiveSummarizer(max_chars=limit)
    first = summarizer.summarize(previous, messages)
    assert len(first) <= limit
    assert first == summarizer.summarize(previous, messages)
