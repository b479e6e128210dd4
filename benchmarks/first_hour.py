"""The first hour of a new user, measured: evidence in recall and context at default settings,
how the context budget is shared with the conversation, and what write-time extraction costs.

Usage::

    python benchmarks/first_hour.py                       # lexical and hybrid, every part
    python benchmarks/first_hour.py --modes lexical --turns 500 --prefill 10000

Parts (written to ``benchmarks/results/first_hour.md``):

1. *Evidence.* ``tests/data/first_hour.json`` (our own corpus: a 50-turn agent loop with ten
   personal facts among small talk, then one everyday question per fact) goes through
   ``UnifiedMemory(path, user_id=...)`` with nothing else set; for each question, does
   ``recall(q, limit=3)`` and ``context(q, max_tokens=300)`` carry the evidence? Also with
   ``extract_on_write=False`` (the behaviour before write-time extraction), where only the
   window holds the evidence.
2. *Allocation.* The same at 300 and 1,000 tokens for several conversation shares of
   ``ContextConfig.shares``: evidence carried, conversation messages kept, and whether the
   latest exchange is in the block. On a LoCoMo development conversation too (when the data
   file is there): turn-level evidence in ``context(q, max_tokens=N)`` with the conversation
   included, its last 100 turns in the window.
3. *add_turn.* Durable ``add_turn`` (user + assistant) on a file holding ``--prefill``
   synthetic facts, cycling through the corpus's turns, with ``extract_on_write`` off
   (before) and on (after): mean, p50 and p95 per turn.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import ROOT, library_version, publish  # noqa: E402
from _synthetic import percentile, synthetic_facts  # noqa: E402

from unified_memory import ContextConfig, UnifiedMemory  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "first_hour.json"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
SHARES = (0.15, 0.3, 0.5)
BUDGETS = (300, 1000)


def load_corpus(path: Path = CORPUS) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def play(mem: UnifiedMemory, corpus: dict[str, Any]) -> None:
    """The 50-turn loop, a few minutes apart."""
    start = datetime.fromisoformat(corpus["start"])
    step = timedelta(minutes=corpus["minutes_between_turns"])
    for i, (user, assistant) in enumerate(corpus["turns"]):
        mem.add_turn(user, assistant, when=start + i * step)


def carries(text: str, evidence: list[str]) -> bool:
    low = text.lower()
    return any(e.lower() in low for e in evidence)


def evidence(mem: UnifiedMemory, corpus: dict[str, Any], budget: int) -> dict[str, float]:
    """Questions whose evidence is in recall's top 3 and in the context block; the block's
    conversation messages and whether it holds the latest exchange."""
    last_user, last_assistant = corpus["turns"][-1]
    found = {"recall": 0, "context": 0, "kept": 0, "latest": 0}
    for q in corpus["questions"]:
        hits = mem.recall(q["question"], limit=3)
        found["recall"] += any(carries(h.text, q["evidence"]) for h in hits)
        block = mem.context(q["question"], max_tokens=budget)
        found["context"] += carries(block.text, q["evidence"])
        found["kept"] += block.sections["conversation"].items
        found["latest"] += (last_user[:40] in block.text) and (last_assistant[:40] in block.text)
    n = len(corpus["questions"])
    return {"recall": found["recall"], "context": found["context"], "questions": n,
            "kept": found["kept"] / n, "latest": found["latest"] / n}


def part_evidence(modes: list[str], folder: Path) -> list[str]:
    corpus = load_corpus()
    lines = ["## 1. Evidence at default settings", "",
             f"`UnifiedMemory(path, user_id={corpus['user_id']!r})` and nothing else (retrieval as named); "
             f"{len(corpus['turns'])} turns, {len(corpus['questions'])} questions.", "",
             "| retrieval | extraction | facts after 50 turns | recall top-3 carries | context(300) carries "
             "| conversation messages in block | latest exchange in block |",
             "|---|---|---|---|---|---|---|"]
    for mode in modes:
        for extract in (False, True):
            path = folder / f"evidence-{mode}-{extract}.db"
            with UnifiedMemory(path, user_id=corpus["user_id"], retrieval=mode, extract_on_write=extract) as mem:
                play(mem, corpus)
                got = evidence(mem, corpus, 300)
                facts = len(mem.facts())
            lines.append(f"| {mode} | {'at write (default)' if extract else 'on leaving the window (before)'} "
                         f"| {facts} | {got['recall']} of {got['questions']} | {got['context']} of {got['questions']} "
                         f"| {got['kept']:.1f} | {got['latest']:.0%} |")
    return lines


def part_allocation(modes: list[str], folder: Path, locomo: Path, locomo_questions: int) -> list[str]:
    corpus = load_corpus()
    lines = ["## 2. How context shares its budget with the conversation", "",
             "The recalled sections (facts, entities, episodes) and the conversation are water-filled by "
             "their shares (a side that needs less gives the rest to the other); the recalled side is "
             "filled by recall score. Varying the conversation's share (the recalled side gets 1 - share):", "",
             "| retrieval | budget | conversation share | context carries | conversation messages | "
             "latest exchange |", "|---|---|---|---|---|---|"]
    for mode in modes:
        path = folder / f"allocation-{mode}.db"
        with UnifiedMemory(path, user_id=corpus["user_id"], retrieval=mode) as mem:
            play(mem, corpus)
        for budget in BUDGETS:
            for share in SHARES:
                config = ContextConfig(shares={"facts": 0.35, "entities": 0.15, "episodes": 0.2,
                                               "conversation": 0.7 * share / (1 - share)})
                with UnifiedMemory(path, user_id=corpus["user_id"], retrieval=mode, context=config) as mem:
                    got = evidence(mem, corpus, budget)
                lines.append(f"| {mode} | {budget} | {share:.2f} | {got['context']} of {got['questions']} | "
                             f"{got['kept']:.1f} | {got['latest']:.0%} |")
    if locomo.exists() and locomo_questions:
        lines += ["", "LoCoMo development conversation 1 (CC BY-NC 4.0, read from ../shared/data): "
                  "every turn through `add_message` (the last 100 stay in the window), then "
                  f"{locomo_questions} questions (categories 1-4); the fraction of each question's evidence "
                  "turns in `context(q, max_tokens=N)` with the conversation included:", "",
                  "| retrieval | budget | conversation share | evidence in context |", "|---|---|---|---|"]
        for mode in modes:
            lines += _locomo_allocation(mode, folder, locomo, locomo_questions)
    return lines


def _locomo_allocation(mode: str, folder: Path, locomo: Path, n_questions: int) -> list[str]:
    sample = json.loads(locomo.read_text(encoding="utf-8"))[0]
    conv = sample["conversation"]
    path = folder / f"locomo-{mode}.db"
    texts: dict[str, str] = {}
    with UnifiedMemory(path, user_id="locomo", retrieval=mode) as mem:
        index = 1
        while f"session_{index}" in conv:
            when = datetime.strptime(conv[f"session_{index}_date_time"], "%I:%M %p on %d %B, %Y")
            for offset, turn in enumerate(conv[f"session_{index}"]):
                text = turn["text"] + (f" [shares {turn['blip_caption']}]" if turn.get("blip_caption") else "")
                texts[turn["dia_id"]] = text
                mem.add_message("user", text, name=turn["speaker"], when=when + timedelta(minutes=offset),
                                metadata={"dia_id": turn["dia_id"]})
            index += 1
    questions = [q for q in sample["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")][:n_questions]
    lines = []
    for budget in (300, 2000):
        for share in SHARES:
            config = ContextConfig(shares={"facts": 0.35, "entities": 0.15, "episodes": 0.2,
                                           "conversation": 0.7 * share / (1 - share)})
            scores = []
            with UnifiedMemory(path, user_id="locomo", retrieval=mode, context=config) as mem:
                for q in questions:
                    block = mem.context(q["question"], max_tokens=budget)
                    wanted = [texts[d][:60] for d in q["evidence"] if d in texts]
                    if wanted:
                        scores.append(sum(w in block.text for w in wanted) / len(wanted))
            lines.append(f"| {mode} | {budget} | {share:.2f} | {statistics.mean(scores):.3f} |")
    return lines


def part_add_turn(modes: list[str], folder: Path, turns: int, prefill: int) -> list[str]:
    corpus = load_corpus()
    filling = min(turns, 50)  # the default window holds 100 messages: 50 turns
    lines = ["## 3. add_turn before and after write-time extraction", "",
             f"Durable `add_turn(user, assistant)` on a file already holding {prefill:,} facts, {turns} turns "
             f"cycling through the corpus (its ten personal facts restated every {len(corpus['turns'])} turns). "
             f"While the window fills (the first {filling} turns) extraction used to wait; once it is full, every "
             "turn pushes one out, and before this change that turn's user message was extracted then, so the "
             "steady state extracts one user message per turn either way. In hybrid mode the turns after the "
             f"first {filling} repeat the corpus, whose vectors are then in the embedding cache.", "",
             "| retrieval | extraction | window filling: mean / p50 / p95 ms | full window: mean / p50 / p95 ms "
             "| turns/s overall | facts written |", "|---|---|---|---|---|---|"]
    facts = synthetic_facts(prefill) if prefill else []
    for mode in modes:
        for extract in (False, True):
            path = folder / f"turns-{mode}-{extract}.db"
            with UnifiedMemory(path, user_id="bench", retrieval=mode, long_term_limit=None,
                               extract_on_write=extract) as mem:
                for i in range(0, len(facts), 5000):
                    mem.remember_many(facts[i:i + 5000])
                mem.recall("warm up the indexes")
                before = len(mem.facts())
                times = []
                for i in range(turns):
                    user, assistant = corpus["turns"][i % len(corpus["turns"])]
                    start = time.perf_counter()
                    mem.add_turn(user, assistant)
                    times.append((time.perf_counter() - start) * 1000)
                written = len(mem.facts()) - before
            phases = [_timing(times[:filling]), _timing(times[filling:]) if turns > filling else "-"]
            lines.append(f"| {mode} | {'at write (after)' if extract else 'on leaving the window (before)'} | "
                         f"{phases[0]} | {phases[1]} | {1000 * len(times) / sum(times):,.0f} | {written} |")
    return lines


def _timing(times: list[float]) -> str:
    return f"{statistics.mean(times):.2f} / {percentile(times, 0.5):.2f} / {percentile(times, 0.95):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="+", default=["lexical", "hybrid"], choices=["lexical", "hybrid"])
    parser.add_argument("--parts", nargs="+", default=["evidence", "allocation", "add_turn"],
                        choices=["evidence", "allocation", "add_turn"])
    parser.add_argument("--turns", type=int, default=500, help="add_turn calls timed per setting")
    parser.add_argument("--prefill", type=int, default=10_000, help="facts in the file before add_turn is timed")
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="LoCoMo development data (CC BY-NC 4.0)")
    parser.add_argument("--locomo-questions", type=int, default=100,
                        help="LoCoMo questions for the allocation part (0: skip)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "first_hour.md")
    args = parser.parse_args(argv)
    command = "python benchmarks/first_hour.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = ["# The first hour", "", f"Command: `{command.strip()}`", "",
             f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, Python {platform.python_version()}; "
             f"library: `{library_version()}`; {datetime.now():%Y-%m-%d}.", ""]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if "evidence" in args.parts:
            lines += part_evidence(args.modes, folder) + [""]
        if "allocation" in args.parts:
            lines += part_allocation(args.modes, folder, args.locomo, args.locomo_questions) + [""]
        if "add_turn" in args.parts:
            lines += part_add_turn(args.modes, folder, args.turns, args.prefill) + [""]
    publish("\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
