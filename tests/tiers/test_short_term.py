from hypothesis import given, settings
from hypothesis import strategies as st

from tiers.episodic import EpisodicLog
from tiers.short_term import ShortTermWindow
from tiers.storage.backend import Scope, Storage
from tiers.trimming import plan_trim
from unified_memory.types import Message

ADA = Scope("ada")


def push(window, messages, scope=ADA, tokens=None):
    with window.storage.atomic():
        logged = window.log.append(scope, messages, now=0.0, importances=[0] * len(messages))
        return window.extend(scope, logged, token_counts=tokens or [len(m.text()) for m in messages])


def turn(i):
    return [Message(role="user", content=f"question {i}"), Message(role="assistant", content=f"answer {i}")]


def test_trims_whole_interactions_and_returns_them():
    window = ShortTermWindow(EpisodicLog(Storage(None)), max_messages=4)
    trimmed = []
    for i in range(4):
        trimmed += push(window, turn(i))
    assert [m.content for m in window.messages(ADA)] == ["question 2", "answer 2", "question 3", "answer 3"]
    assert [m.message.content for m in trimmed] == ["question 0", "answer 0", "question 1", "answer 1"]


def test_token_limit():
    window = ShortTermWindow(EpisodicLog(Storage(None)), max_messages=100, max_tokens=25)
    for i in range(5):
        push(window, turn(i))
    assert window.tokens(ADA) <= 25
    assert window.messages(ADA)[0].role == "user"


def test_pending_tool_calls_defer_trimming_and_pairs_stay_together():
    window = ShortTermWindow(EpisodicLog(Storage(None)), max_messages=2)
    push(window, turn(0))
    call = Message(role="assistant", tool_calls=[{"id": "c1"}, {"id": "c2"}])
    assert push(window, [Message(role="user", content="look up two things"), call]) == []  # calls pending
    assert push(window, [Message(role="tool", content="r1", tool_call_id="c1")]) == []  # c2 still pending
    assert len(window.messages(ADA)) == 5
    trimmed = push(window, [Message(role="tool", content="r2", tool_call_id="c2")])
    assert [m.message.content for m in trimmed] == ["question 0", "answer 0"]
    # the interaction is larger than the limit but is kept whole: no orphaned tool result
    assert [m.role for m in window.messages(ADA)] == ["user", "assistant", "tool", "tool"]


def test_windows_are_per_conversation_and_survive_reopen(tmp_path):
    path = tmp_path / "m.db"
    window = ShortTermWindow(EpisodicLog(Storage(path)), max_messages=10)
    push(window, turn(0), scope=Scope("ada", session_id="a"))
    push(window, turn(1), scope=Scope("ada", session_id="b"))
    window.storage.close()
    reopened = ShortTermWindow(EpisodicLog(Storage(path)), max_messages=10)
    assert [m.content for m in reopened.messages(Scope("ada", session_id="a"))] == ["question 0", "answer 0"]
    assert [m.content for m in reopened.messages(Scope("ada", session_id="b"))] == ["question 1", "answer 1"]
    assert reopened.messages(Scope("bob")) == []


def test_clear_empties_only_that_window():
    window = ShortTermWindow(EpisodicLog(Storage(None)), max_messages=10)
    push(window, turn(0))
    push(window, turn(1), scope=Scope("bob"))
    with window.storage.atomic():
        held = window.clear(ADA)
    assert len(held) == 2 and window.messages(ADA) == [] and len(window.messages(Scope("bob"))) == 2


_ROLES = st.sampled_from(["user", "user", "assistant", "assistant", "system", "tool", "call"])


def _message(kind: str, i: int) -> Message:
    if kind == "call":
        return Message(role="assistant", tool_calls=[{"id": f"c{i}"}])
    if kind == "tool":
        return Message(role="tool", content=f"result {i}", tool_call_id=f"c{i - 1}")
    return Message(role=kind, content=f"{kind} {i}")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(_ROLES, st.integers(0, 9)), min_size=1, max_size=3), min_size=1, max_size=14),
       st.integers(1, 6), st.none() | st.integers(1, 30), st.booleans())
def test_the_stored_window_trims_as_the_rules_say(writes, max_messages, max_tokens, plain):
    """Whatever path the stored window takes (plain turns, or every entry through plan_trim),
    it holds and returns what plan_trim decides over the same messages in memory."""
    window = ShortTermWindow(EpisodicLog(Storage(None)), max_messages=max_messages, max_tokens=max_tokens)
    mirror: list[tuple[Message, int]] = []  # the window by the rules, with each message's tokens
    n = 0
    for write in writes:
        messages = [_message("user" if plain and kind not in ("user", "assistant") else kind, n + k)
                    for k, (kind, _) in enumerate(write)]
        counts = [tokens for _, tokens in write]
        n += len(write)
        trimmed = push(window, messages, tokens=counts)
        mirror += zip(messages, counts, strict=True)
        plan = plan_trim([m for m, _ in mirror], max_messages=max_messages, max_tokens=max_tokens,
                         token_counts=[t for _, t in mirror] if max_tokens is not None else None)
        dropped = [mirror[i][0] for i in plan.drop]
        mirror = [entry for i, entry in enumerate(mirror) if i not in set(plan.drop)]
        assert [m.message.content or m.message.role for m in trimmed] == [m.content or m.role for m in dropped]
        assert [m.content or m.role for m in window.messages(ADA)] == [m.content or m.role for m, _ in mirror]
        assert window.tokens(ADA) == sum(t for _, t in mirror)


_SCOPES = [ADA, Scope("ada", session_id="b"), Scope("bob")]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.lists(st.tuples(_ROLES, st.integers(0, 9)), min_size=1, max_size=3),
                          st.booleans()), min_size=1, max_size=18),
       st.integers(1, 5), st.none() | st.integers(1, 30))
def test_interleaved_conversations_trim_each_by_the_rules(writes, max_messages, max_tokens):
    """Writes to three conversations in any order: each window holds and returns what plan_trim
    decides over its own messages (a system message or tool call in one conversation, or one
    that left its window already, changes nothing in the others), and ``extend_counted`` answers
    the tokens held when asked (or when a token limit counted them), else ``None``."""
    window = ShortTermWindow(EpisodicLog(Storage(None)), max_messages=max_messages, max_tokens=max_tokens)
    mirrors: dict[int, list[tuple[Message, int]]] = {i: [] for i in range(len(_SCOPES))}
    n = 0
    for at, write, held in writes:
        scope, mirror = _SCOPES[at], mirrors[at]
        messages = [_message(kind, n + k) for k, (kind, _) in enumerate(write)]
        counts = [tokens for _, tokens in write]
        n += len(write)
        with window.storage.atomic():
            logged = window.log.append(scope, messages, now=0.0, importances=[0] * len(messages))
            trimmed, tokens = window.extend_counted(scope, logged, token_counts=counts, held=held)
        mirror += zip(messages, counts, strict=True)
        plan = plan_trim([m for m, _ in mirror], max_messages=max_messages, max_tokens=max_tokens,
                         token_counts=[t for _, t in mirror] if max_tokens is not None else None)
        dropped = [mirror[i][0] for i in plan.drop]
        mirrors[at] = mirror = [entry for i, entry in enumerate(mirror) if i not in set(plan.drop)]
        assert [m.message.content or m.message.role for m in trimmed] == [m.content or m.role for m in dropped]
        assert trimmed == window.log.messages_by_seq([m.seq for m in trimmed])  # whole, as logged
        assert tokens == (sum(t for _, t in mirror) if held or max_tokens is not None else None)
        for other, kept in mirrors.items():
            assert [m.content or m.role for m in window.messages(_SCOPES[other])] == [m.content or m.role
                                                                                    for m, _ in kept]
