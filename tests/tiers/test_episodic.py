from tiers.episodic import EpisodicLog
from tiers.short_term import ShortTermWindow
from tiers.storage.backend import Scope, Storage
from unified_memory.types import Message

ADA = Scope("ada", session_id="s1")
DAY = 86400.0


def log_with(*texts, scope=ADA, now=0.0, neighbor_turns=0):
    log = EpisodicLog(Storage(None), neighbor_turns=neighbor_turns)
    with log.storage.atomic():
        logged = log.append(scope, [Message(role="user", content=t, name="Ada", metadata={"n": i})
                                    for i, t in enumerate(texts)], now=now, importances=[0.5] * len(texts))
    return log, logged


def test_log_keeps_messages_verbatim_with_speaker_time_and_metadata():
    log, _ = log_with("I went hiking  \n in the Alps", now=5 * DAY)
    [episode] = log.list(ADA)
    assert episode.content == "I went hiking  \n in the Alps"
    assert episode.name == "Ada" and episode.metadata == {"n": 0}
    assert episode.created_at.timestamp() == 5 * DAY
    assert episode.session_id == "s1"


def test_search_includes_speaker_name_and_filters():
    log, _ = log_with("I love the mountains", "Pottery class today")
    assert [m.message.content for _, m in log.search(ADA, "Ada mountains", 5)][0] == "I love the mountains"
    assert [m.message.content for _, m in log.search(ADA, "pottery", 5, where={"n": 1})] == [
        "Pottery class today"]
    assert log.search(ADA, "pottery", 5, where={"n": 0}) == []
    assert log.search(Scope("bob"), "pottery", 5) == []


def test_a_reply_is_found_through_the_turn_before_it():
    log, _ = log_with("Did you finish the pottery class?", "Yes, it was wonderful", "Unrelated chat",
                      neighbor_turns=1)
    found = [m.message.content for _, m in log.search(ADA, "pottery", 5)]
    assert found[0] == "Did you finish the pottery class?"
    assert "Yes, it was wonderful" in found
    plain, _ = log_with("Did you finish the pottery class?", "Yes, it was wonderful")
    assert [m.message.content for _, m in plain.search(ADA, "pottery", 5)] == ["Did you finish the pottery class?"]


def test_explicit_message_time_wins_over_now():
    log = EpisodicLog(Storage(None))
    from datetime import UTC, datetime
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    with log.storage.atomic():
        log.append(ADA, [Message(role="user", content="hi", created_at=when)], now=0.0, importances=[0])
    assert log.list(ADA)[0].created_at == when


def test_due_and_prune_respect_the_window_and_promotion():
    log, logged = log_with("one", "two", "three", now=0.0)
    window = ShortTermWindow(log, max_messages=1)
    with log.storage.atomic():
        window.extend(ADA, logged, token_counts=[1, 1, 1])
    due = log.due_for_promotion(ADA)
    assert [m.message.content for m in due] == ["one", "two"]
    with log.storage.atomic():
        assert log.prune("ada", older_than=10 * DAY) == 0  # not promoted yet: kept
        log.mark_promoted([m.seq for m in due])
        assert log.prune("ada", older_than=10 * DAY) == 2
    assert [e.content for e in log.list(ADA)] == ["three"]
    assert log.due_for_promotion(ADA) == []
    assert log.search(ADA, "one", 5) == []


def test_list_since_session_and_limit():
    log = EpisodicLog(Storage(None))
    with log.storage.atomic():
        for day in range(5):
            log.append(Scope("ada", session_id=f"s{day % 2}"), [Message(role="user", content=f"day {day}")],
                       now=day * DAY, importances=[0])
    scope = Scope("ada")
    assert [e.content for e in log.list(scope, since=3 * DAY)] == ["day 3", "day 4"]
    assert [e.content for e in log.list(scope, session_id="s1")] == ["day 1", "day 3"]
    assert [e.content for e in log.list(scope, limit=2)] == ["day 3", "day 4"]


def _due_steps(promoted: int) -> int:
    """SQLite VM steps (in units of 100) of one due_for_promotion in a conversation whose
    ``promoted`` older messages went through promotion and whose newest one did not."""
    log, logged = log_with(*[f"message {i}" for i in range(promoted + 1)])
    window = ShortTermWindow(log, max_messages=1)
    with log.storage.atomic():
        window.extend(ADA, logged, token_counts=[1] * len(logged))
        log.mark_promoted([m.seq for m in logged[:-2]])  # the second newest left the window unpromoted
    due, steps = _steps(log, ADA)
    assert due == [f"message {promoted - 1}"]
    return steps


def _steps(log: EpisodicLog, scope: Scope) -> tuple[list[str], int]:
    conn = log.storage.backend.db.conn  # type: ignore[attr-defined]
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    conn.set_progress_handler(count, 100)
    try:
        due = log.due_for_promotion(scope)
    finally:
        conn.set_progress_handler(None, 100)
    return [m.message.content or "" for m in due], steps[0]


def _sessions_steps(others: int) -> int:
    """Steps of due_for_promotion in a short conversation while ``others`` other conversations
    of the user each hold a message that was not promoted (in their windows)."""
    log = EpisodicLog(Storage(None), neighbor_turns=0)
    window = ShortTermWindow(log, max_messages=1)
    with log.storage.atomic():
        for i in range(others):
            scope = Scope("ada", session_id=f"other{i}")
            window.extend(scope, log.append(scope, [Message(role="user", content=f"other {i}")], now=0.0,
                                            importances=[0]), token_counts=[1])
        logged = log.append(ADA, [Message(role="user", content=c) for c in ("due", "held")], now=0.0,
                            importances=[0, 0])
        window.extend(ADA, logged, token_counts=[1, 1])
    due, steps = _steps(log, ADA)
    assert due == ["due"]
    return steps


def test_finding_what_is_due_does_not_walk_the_promoted_conversation():
    if log_with("x")[0].storage.dialect.postgres:
        return  # SQLite's plan is fixed by a hint; PostgreSQL plans by its statistics
    assert _due_steps(2000) <= _due_steps(20) + 2


def test_finding_what_is_due_does_not_walk_the_users_other_conversations():
    if log_with("x")[0].storage.dialect.postgres:
        return
    assert _sessions_steps(2000) <= _sessions_steps(20) + 2
