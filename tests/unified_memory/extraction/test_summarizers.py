"""Summarize-on-trim: a persisted running summary that context() shows."""

import doctest
import re

from hypothesis import given, settings
from hypothesis import strategies as st

import unified_memory.extraction.summarizers
from scoring.importance import HeuristicImportanceScorer
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
@given(previous=st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),  # stored summaries
                        max_size=300),  # have no NUL and no lone surrogate (a summarizer refuses them)
       texts=st.lists(st.text(max_size=120), max_size=6),
       limit=st.integers(20, 400))
def test_extractive_summary_fits_and_is_deterministic(previous, texts, limit):
    messages = [Message(role="user", content=t) for t in texts if t.strip()]
    summarizer = ExtractiveSummarizer(max_chars=limit)
    first = summarizer.summarize(previous, messages)
    assert len(first) <= limit
    assert first == summarizer.summarize(previous, messages)


_SENTENCES = st.sampled_from(["I live in Lisbon.", "Hi!", "My sister is called Ana.", "ok", "I'm allergic to peanuts.",
                              "We met at Acme in 2020?", "Sounds nice.", "My cat Miso is 3 years old."])
_SAID = st.builds(
    lambda role, name, parts: Message(role=role, name=name, content=" ".join(parts)),
    st.sampled_from(["user", "assistant", "system"]),
    st.none() | st.sampled_from(["Ada", " Bob ", "Eve\nDoe", "Zoe\u2028"]),
    st.lists(_SENTENCES, min_size=1, max_size=3))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.lists(_SAID, max_size=3)), min_size=1, max_size=12),
       st.integers(20, 160))
def test_a_remembered_summary_updates_as_a_fresh_summarizer_would(updates, max_chars):
    """The summarizer remembers the summaries it returned (their lines and scores); updating
    one of them, or any other text, in any order of conversations, gives what a summarizer
    that remembers nothing gives."""
    remembering = ExtractiveSummarizer(max_chars=max_chars, scorer=HeuristicImportanceScorer())  # as a memory's
    summaries = ["", "", ""]  # three conversations updated in turn
    for conversation, messages in updates:
        expected = ExtractiveSummarizer(max_chars=max_chars).summarize(summaries[conversation], messages)
        summaries[conversation] = remembering.summarize(summaries[conversation], messages)
        assert summaries[conversation] == expected
    scorer_calls: list[str] = []

    def scorer(text: str) -> float:
        scorer_calls.append(text)
        return len(text) / 100

    given_scorer = ExtractiveSummarizer(max_chars=max_chars, scorer=scorer)
    text = given_scorer.summarize("", updates[0][1])
    scorer_calls.clear()
    given_scorer.summarize(text, [])
    lines = {line.strip() for line in text.splitlines() if line.strip()}
    assert len(scorer_calls) == len(lines)  # a given scorer is asked every time


def _reference_summary(previous: str, messages: list[Message], max_chars: int) -> str:
    """The extractive summary as first written (nothing remembered, every step spelled out)."""
    scorer = HeuristicImportanceScorer()
    units = list(dict.fromkeys(line.strip() for line in previous.splitlines() if line.strip()))
    for message in messages:
        if message.content and message.role in ("user", "assistant"):
            for sentence in re.split(r"(?<=[.!?])\s+", " ".join(message.content.split())):
                if sentence and f"{message.name or message.role}: {sentence}" not in units:
                    units.append(f"{message.name or message.role}: {sentence}")
    scores = [scorer(unit.split(": ", 1)[-1]) for unit in units]
    kept: set[int] = set()
    used = 0
    for i in sorted(range(len(units)), key=lambda i: (-scores[i], -i)):
        cost = len(units[i]) + (1 if kept else 0)
        if used + cost <= max_chars:
            kept.add(i)
            used += cost
    return "\n".join(units[i] for i in sorted(kept))


_PREVIOUS = st.lists(st.sampled_from(["user: I live in Lisbon.", "  Ada: Hi!  ", "", "user: ok", "user: I live in Lisbon.",
                                      "assistant: Sounds nice.", "Eve", "\u2028", "Zoe: My cat Miso is 3 years old."]),
                     max_size=6).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.lists(_SAID, max_size=3)), min_size=1, max_size=14),
       st.lists(_PREVIOUS, min_size=3, max_size=3), st.integers(20, 200))
def test_the_summary_is_the_reference_greedy_summary(updates, starts, max_chars):
    """Whatever the summarizer remembers and however it ranks, every update is the reference
    greedy summary of the previous one (stored summaries or any other text, with blank,
    repeated, padded or multi-line lines and speakers) and the trimmed messages."""
    summarizer = ExtractiveSummarizer(max_chars=max_chars)
    summaries = list(starts)
    for conversation, messages in updates:
        expected = _reference_summary(summaries[conversation], messages, max_chars)
        summaries[conversation] = summarizer.summarize(summaries[conversation], messages)
        assert summaries[conversation] == expected
