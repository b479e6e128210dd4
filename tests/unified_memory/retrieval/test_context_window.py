"""context() reads the window again only once something was written (tiers.storage.backend.Storage.change_mark):
whoever wrote it — this memory, another one on the same file — the block shows the window as it is."""

from unified_memory import UnifiedMemory


def shown(block) -> list[str]:
    """The conversation lines of a block (the summary of earlier turns left out)."""
    lines = block.text.splitlines()
    lines = lines[lines.index("## Conversation") + 1:-1] if "## Conversation" in lines else []
    return [line for line in lines if not line.startswith("- summary of earlier turns:")]


def test_each_turn_shows_as_soon_as_it_is_added_and_leaves_with_the_window(clock):
    with UnifiedMemory(clock=clock, short_term_limit=4) as mem:
        for i in range(6):
            mem.add_turn(f"turn {i} about tea", f"reply {i}")
            before = mem.context("tea", max_tokens=2000)
            assert mem.context("tea", max_tokens=2000).text == before.text  # nothing written in between
            assert shown(before) == [line for j in range(max(0, i - 1), i + 1)
                                     for line in (f"- user: turn {j} about tea", f"- assistant: reply {j}")]
        mem.clear()
        assert shown(mem.context("tea", max_tokens=2000)) == []


def test_a_turn_another_memory_adds_to_the_file_shows(db_path, clock):
    with UnifiedMemory(db_path, clock=clock) as reader, UnifiedMemory(db_path, clock=clock) as writer:
        writer.add_turn("I like green tea", "Noted")
        assert shown(reader.context("tea", max_tokens=500)) == ["- user: I like green tea", "- assistant: Noted"]
        writer.add_turn("Oolong too", "Nice")
        assert shown(reader.context("tea", max_tokens=500))[-2:] == ["- user: Oolong too", "- assistant: Nice"]


def test_a_scoped_view_shows_its_own_window(db_path, clock):
    with UnifiedMemory(db_path, clock=clock, session_id="a") as mem:
        other = mem.scoped(session_id="b")  # the same file and backend, another window
        mem.add_turn("in session a", "ok")
        other.add_turn("in session b", "ok")
        assert shown(mem.context("session", max_tokens=500))[0] == "- user: in session a"
        assert shown(other.context("session", max_tokens=500))[0] == "- user: in session b"
        assert shown(mem.context("session", max_tokens=500))[0] == "- user: in session a"
