import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiers.episodic import EpisodicLog
from tiers.indexes.neighbors import OWN_WEIGHT, ConversationTurn, neighbor_documents, split_parts
from tiers.storage.backend import Scope, Storage
from unified_memory.types import Message

MINUTE = 60.0


def turn(i, conversation=("", ""), at=None, text=None):
    return ConversationTurn(f"m{i}", conversation, MINUTE * i if at is None else at, text or f"text {i}")


def test_document_holds_own_text_twice_and_neighbours_on_each_side():
    turns = [turn(i) for i in range(5)]
    docs = dict(neighbor_documents(turns, width=2, max_gap=3600))
    assert split_parts(docs["m2"]) == ["text 2"] * OWN_WEIGHT + ["text 1", "text 3", "text 0", "text 4"]
    assert split_parts(docs["m0"]) == ["text 0"] * OWN_WEIGHT + ["text 1", "text 2"]


def test_width_zero_is_the_plain_text():
    docs = neighbor_documents([turn(0), turn(1)], width=0, max_gap=3600)
    assert docs == [("m0", "text 0"), ("m1", "text 1")]


def test_a_long_pause_or_another_conversation_is_not_a_neighbour():
    turns = [turn(0), turn(1, at=10_000.0), turn(2, conversation=("", "other"), at=10_001.0), turn(3, at=10_002.0)]
    docs = dict(neighbor_documents(turns, width=1, max_gap=3600))
    assert split_parts(docs["m0"]) == ["text 0"] * OWN_WEIGHT
    assert split_parts(docs["m1"]) == ["text 1"] * OWN_WEIGHT + ["text 3"]
    assert split_parts(docs["m2"]) == ["text 2"] * OWN_WEIGHT


def test_targets_limit_the_output_and_bad_width_is_refused():
    assert [i for i, _ in neighbor_documents([turn(i) for i in range(4)], width=1, max_gap=60,
                                             targets={"m1"})] == ["m1"]
    with pytest.raises(ValueError, match="width"):
        neighbor_documents([], width=-1, max_gap=60)


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.sampled_from(["", "s1", "s2"]), st.integers(0, 300),
                                           st.sampled_from(["a", "", "b c"])), min_size=1, max_size=4),
                        min_size=1, max_size=6),
       width=st.integers(0, 3))
def test_incremental_documents_equal_a_rebuild_from_the_store(batches, width):
    """Whatever the order of appends, the index holds what a rebuild from SQLite would."""
    log = EpisodicLog(Storage(None), neighbor_turns=width, neighbor_gap_seconds=100 * MINUTE)
    try:
        written: dict[str, str] = {}
        add = log.index.add

        def capture(user_id, items):
            items = list(items)
            written.update(items)
            add(user_id, items)

        log.index.add = capture
        clock = 0.0
        for batch in batches:
            by_session: dict[str, list[Message]] = {}
            for session, minutes, text in batch:
                clock += minutes * MINUTE
                by_session.setdefault(session, []).append(Message(role="user", content=text or None))
            for session, messages in by_session.items():
                with log.storage.atomic():
                    log.append(Scope("ada", session_id=session), messages, now=clock, importances=[0.5] * len(messages))
        assert written == dict(log._load_documents("ada"))
    finally:
        log.storage.close()  # a PostgreSQL database per example: its connection goes now
