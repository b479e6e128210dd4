"""Short-term memory speed and safety: our Conversation beside selectools' ConversationMemory.

An agent loop of N turns (a user message, an assistant message with two parallel
tool calls, their two results, the answer) is fed message by message to:

- selectools ``ConversationMemory(max_messages=100)`` (when ``selectools`` is installed);
- our ``Conversation(max_messages=100)`` (the same window);
- our ``Conversation`` compacting at 8,000 tokens (offline summary), logged to JSONL;
- our ``Conversation`` in ``sliding_window`` mode (raw history kept, grows to N×5).

For each: messages per second, and how often the history held a tool result
without its call or a completed call without its results (checked after every
message). Then the JSONL log of the compacting run is restored and timed.

    python benchmarks/conversation.py --turns 2000
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import library_version, publish

from unified_memory import Conversation

OUT = Path(__file__).resolve().parent / "results" / "conversation.md"


def agent_loop(turns: int) -> list[dict[str, Any]]:
    """The messages of ``turns`` agent-loop turns, as plain dicts."""
    out: list[dict[str, Any]] = []
    for t in range(turns):
        ids = [f"t{t}a", f"t{t}b"]
        out.append({"role": "user", "content": f"Turn {t}: what is the weather in city {t} and city {t + 1}?"})
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "weather", "arguments": json.dumps({"city": i})}}
            for i in ids]})
        out.extend({"role": "tool", "tool_call_id": i, "content": f"{i}: sunny, 21 degrees, light wind " * 8}
                   for i in ids)
        out.append({"role": "assistant", "content": f"Both cities are sunny today (turn {t})."})
    return out


def broken_pairs(history: list[tuple[str, list[str], str | None]], pending: bool) -> bool:
    """Whether (role, call ids, tool_call_id) rows hold an orphaned result or, when no
    batch is in flight, a call without its results."""
    opened: set[str] = set()
    answered: set[str] = set()
    for role, calls, answer in history:
        opened.update(calls)
        if role == "tool":
            if answer not in opened:
                return True
            answered.add(answer)
    return not pending and bool(opened - answered)


def ours_rows(conv: Conversation) -> list[tuple[str, list[str], str | None]]:
    return [(m.role, m.tool_call_ids(), m.tool_call_id) for m in conv.context()]


def run(name: str, messages: list[dict[str, Any]], add: Callable[[dict[str, Any]], None],
        rows: Callable[[], list[tuple[str, list[str], str | None]]]) -> dict[str, Any]:
    broken = 0
    spent = 0.0
    for i, message in enumerate(messages):
        start = time.perf_counter()
        add(message)
        spent += time.perf_counter() - start
        in_batch = message["role"] == "assistant" and bool(message.get("tool_calls")) or (
            message["role"] == "tool" and i + 1 < len(messages) and messages[i + 1]["role"] == "tool")
        broken += broken_pairs(rows(), pending=in_batch)
    return {"name": name, "rate": len(messages) / spent, "us": spent / len(messages) * 1e6, "broken": broken}


def selectools_run(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    try:
        from selectools import ConversationMemory, Role, ToolCall
        from selectools import Message as SMessage
    except ImportError:
        return None
    memory = ConversationMemory(max_messages=100)

    def add(m: dict[str, Any]) -> None:
        calls = [ToolCall(tool_name="weather", parameters={}, id=c["id"]) for c in m.get("tool_calls") or []]
        memory.add(SMessage(role=Role(m["role"]), content=m.get("content") or "", tool_calls=calls or None,
                            tool_call_id=m.get("tool_call_id")))

    def rows() -> list[tuple[str, list[str], str | None]]:
        return [(str(m.role.value), [c.id for c in (m.tool_calls or [])], m.tool_call_id)
                for m in memory.get_history()]

    return run("selectools ConversationMemory(max_messages=100)", messages, add, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    messages = agent_loop(args.turns)
    results = []
    peer = selectools_run(messages)
    if peer is not None:
        results.append(peer)
    window = Conversation(max_messages=100)
    results.append(run("Conversation(max_messages=100)", messages, window.add, lambda: ours_rows(window)))
    logs = tempfile.mkdtemp()
    compacting = Conversation(session_id="bench", log_base_path=logs, compaction={"token_threshold": 8000})
    results.append(run("Conversation(compaction: 8,000 tokens, JSONL log)", messages, compacting.add,
                       lambda: ours_rows(compacting)))
    sliding = Conversation(compaction={"token_threshold": 8000, "mode": "sliding_window"})
    results.append(run(f"Conversation(sliding_window, raw history to {len(messages):,})", messages,
                       sliding.add, lambda: ours_rows(sliding)))
    restores = []
    for _ in range(3):
        start = time.perf_counter()
        restored = Conversation.restore_from_log("bench", logs)
        restores.append(time.perf_counter() - start)
    assert restored.context() == compacting.context()
    log_lines = sum(1 for _ in open(Path(logs) / "bench.jsonl", encoding="utf-8"))

    lines = [
        "# Conversation: short-term memory speed and tool-call safety", "",
        f"`python benchmarks/conversation.py --turns {args.turns}` — {library_version()}; "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}.", "",
        f"{args.turns:,} agent-loop turns ({len(messages):,} messages: user, assistant with 2 parallel tool "
        "calls, 2 results, answer), added one at a time; after every message the history is checked for a "
        "tool result without its call, or a finished call without its results.", "",
        "| memory | messages/s | µs per message | histories with a broken tool pair |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {r['name']} | {r['rate']:,.0f} | {r['us']:,.1f} | {r['broken']:,} of {len(messages):,} |"
              for r in results]
    lines += ["", f"Compactions in the compacting run: {compacting.compactions:,}; its JSONL log "
              f"({log_lines:,} lines) restores in {statistics.median(restores) * 1000:,.1f} ms (median of 3) "
              "to the identical context.", ""]
    if peer is None:
        lines.append("(selectools is not installed: `pip install selectools` to add its column.)")
    publish("\n".join(lines), OUT)


if __name__ == "__main__":
    main()
