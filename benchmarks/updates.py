"""Updates benchmark: when a personal fact changes, does memory put the new value first?

    python benchmarks/updates.py [--retrieval lexical hybrid] [--cases N] [--locomo PATH/locomo_dev.json]
        [--locomo-conversations N] [--out FILE.md] [--json FILE.json]

**Corpus.** ``tests/data/updates.json`` (our own, written for this project; see its ``about``): each
case is one attribute of the user (where they live, employer, partner, diet, vehicle, device, pets,
favourites, schedules, contact details, what they learn or play, people in roles) stated with an old
value in a first conversation and changed a month later in a second one, in one of ten phrasings of
change ("from X to Y", "no longer", "not ... anymore", "used to", "switched/changed to", "sold ... and
bought", "left ...; my new ... is", "gave up X ... Y instead", "Y now", a count that changes), each
statement among 2-4 unrelated turns, then a question worded unlike either statement.

**Procedure, per case and retrieval mode.** A fresh ``UnifiedMemory(None, retrieval=mode,
clock=...)`` (hybrid: one bundled-model embedder shared by all cases); the clock reads the simulated
time. Conversation 1: every ``[user, assistant]`` turn through ``add_turn(user, assistant, when=t)``,
turns ``minutes_between_turns`` apart from ``start``, then ``end_session()``; conversation 2 the same
``days_between_conversations`` later; the question is asked ``question_after_minutes`` after the last
turn: ``recall(question, limit=10)``, then ``context(question, max_tokens=600)``. Library defaults
otherwise (the rule extractor at write time).

**Definitions.** A text *names* a value when the value occurs in it as a whole word or phrase,
ignoring case (the corpus guarantees: the old statement names only the old value, the new statement
names the new value, fillers, replies and the question name neither). A text naming only the old value
*marks it as past* when it also holds one of ``PAST_MARKERS`` (formerly, previously, used to, no
longer, anymore, until, superseded, left, sold, gave up, broke up, ...): it does not present the old
value as current (a clause cut from the new statement, "Karen left the company", or an entity's
"user formerly lives in Porto").

- *Value hits*: the recall hits naming the old or the new value, in rank order, leaving out hits that
  name only the old value and mark it as past.
- **newer-first@1**: the first value hit names the new value (alone, or beside the old one: in this
  corpus only the second conversation names the new value, so a hit naming both states the change).
  No value hit at all is a miss.
- **new-only first@1** (stricter): the first value hit names the new value and not the old one, i.e. a
  statement of the current value outranks the statement of the change.
- **old as current in context**: in ``context(question, max_tokens=600).text``, a line of the
  ``## Facts`` section names the old value but not the new one, does not mark it as past, and no line
  above it in the block names the new value. (The block marks a superseded fact "(until YYYY-MM)" and
  a message that stated one "(no longer current)": such a line marks its value as past. Before issue
  16 nothing was marked, so a superseded fact shown before the new value counted.)
- **old above new anywhere**: the same over every line of the block (facts, entities, episodes and
  the conversation summary).
- *new in recall / new in context*: some hit of the top 10 / the block names the new value; *old in
  recall*: some hit names the old value (the history is still reachable).
- *old value stored*: some long-term fact, any status, names the old value; *old fact superseded*:
  every fact naming only the old value is no longer active (the update was detected), over the cases
  where one exists; *new value stored*: some active fact names the new value.

Rates are over cases, overall, per attribute and per phrasing. ``--locomo PATH`` also runs
``benchmarks/locomo.py``'s UnifiedMemory evaluation (single scope, same retrieval modes) on the
LoCoMo development file (CC BY-NC 4.0, read from its path, never copied) and reports its R@k beside
the figures recorded before issue 16's changes (``LOCOMO_BEFORE``), so a regression shows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the bundled model only; never reach the network
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import ROOT, library_version, publish  # noqa: E402

from scoring.text import analyze  # noqa: E402
from unified_memory import UnifiedMemory  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "updates.json"
RECALL_LIMIT = 10
CONTEXT_TOKENS = 600
PAST_MARKERS = re.compile(  # words that put a value in the past ("Karen left the company", "user formerly ...")
    r"\b(?:formerly|former|previously|used to|no longer|anymore|any more|until|superseded|outdated|in the past|"
    r"ex-|left|quit|sold|gave up|stopped|ended|broke up|split up|divorced)\b", re.I)
TARGETS = {"newer_first": 0.95, "old_as_current": 0.02}
# LoCoMo dev (all 10 conversations, 883 questions of categories 1-4, single scope), measured by this
# script before issue 16's library changes: the "before" of "no regression".
LOCOMO_BEFORE: dict[str, Any] = {
    "library": "git 631b796, sources ac3995bf0e",
    "lexical": {"R@5": 0.6860, "R@10": 0.7566, "R@20": 0.8143, "context": 0.8673},
    "hybrid": {"R@5": 0.7238, "R@10": 0.7891, "R@20": 0.8495, "context": 0.9036}}
LOCOMO_QUESTIONS = 883


def names(text: str, value: str) -> bool:
    """Whether ``value`` occurs in ``text`` as a whole word or phrase, ignoring case.

    >>> names("We moved from Porto to Ghent", "porto"), names("Portobello Road", "Porto")
    (True, False)
    """
    return re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", text, re.I) is not None


def kind(text: str, old: str, new: str) -> str:
    """``new``, ``both``, ``old``, ``old_past`` (only the old value, marked as past) or ``none``.

    >>> [kind(t, "Porto", "Ghent") for t in ("I live in Ghent", "from Porto to Ghent", "I live in Porto",
    ...                                      "Porto (place): user formerly lives in Porto", "hello")]
    ['new', 'both', 'old', 'old_past', 'none']
    """
    has_old, has_new = names(text, old), names(text, new)
    if has_new:
        return "both" if has_old else "new"
    if has_old:
        return "old_past" if PAST_MARKERS.search(text) else "old"
    return "none"


def block_lines(text: str) -> list[tuple[str, str]]:
    """(section, item text) of each item line of a context block, top to bottom."""
    section, out = "", []
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip().lower()
        elif line.startswith("- "):
            out.append((section, line[2:]))
    return out


def old_above_new(lines: list[tuple[str, str]], old: str, new: str, sections: Iterable[str] | None) -> bool:
    """A line (of ``sections``, all when None) names the old value as current before any line names the new one."""
    wanted = set(sections) if sections is not None else None
    for section, text in lines:
        k = kind(text, old, new)
        if k in ("new", "both"):
            return False
        if k == "old" and (wanted is None or section in wanted):
            return True
    return False


def wording(case: dict[str, Any]) -> str:
    """``shares a term with the new statement``, ``... with the old one only`` or ``with neither``
    (terms as the lexical index analyses them: lowercased, stemmed, stopwords out).

    >>> wording({"question": "Where do I live now?", "old_statement": "I live in Porto",
    ...          "new_statement": "We moved to Ghent"})
    'shares a term with the old statement only'
    """
    question = set(analyze(case["question"]))
    if question & set(analyze(case["new_statement"])):
        return "shares a term with the new statement"
    if question & set(analyze(case["old_statement"])):
        return "shares a term with the old statement only"
    return "shares no term with either statement"


@dataclass
class Outcome:
    """What one case gave under one retrieval mode."""

    id: str
    attribute: str
    phrasing: str
    wording: str  # which statements share an analysed term with the question: new, old only, neither
    newer_first: bool
    new_only_first: bool
    old_first: bool
    value_hit: bool  # some recall hit names a value (one naming only the old value as past is not counted)
    old_as_current: bool
    old_above_new_anywhere: bool
    new_in_recall: bool
    old_in_recall: bool
    new_in_context: bool
    old_stored: bool
    old_superseded: bool | None  # None: no fact names only the old value
    new_stored: bool
    first_value_hit: str  # "tier: text" of the first value hit, "" when none


class Clock:
    """The simulated time, readable as POSIX seconds."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def at(self, when: datetime) -> datetime:
        self.now = when.timestamp()
        return when


def play(mem: UnifiedMemory, clock: Clock, turns: list[list[str]], start: datetime, step: timedelta) -> datetime:
    """One conversation through add_turn, then end_session(); returns the time after its last turn."""
    for i, (user, assistant) in enumerate(turns):
        mem.add_turn(user, assistant, when=clock.at(start + i * step))
    end = clock.at(start + len(turns) * step)
    mem.end_session()
    return end


def run_case(case: dict[str, Any], corpus: dict[str, Any], retrieval: str, embedder: Any) -> Outcome:
    """One case in a fresh memory (see the module docstring)."""
    old, new = case["old_value"], case["new_value"]
    clock = Clock()
    start = datetime.fromisoformat(corpus["start"])
    step = timedelta(minutes=corpus["minutes_between_turns"])
    with UnifiedMemory(None, user_id="updates", retrieval=retrieval, clock=clock, embedder=embedder) as mem:
        play(mem, clock, case["first_conversation"], start, step)
        end = play(mem, clock, case["second_conversation"],
                   start + timedelta(days=corpus["days_between_conversations"]), step)
        clock.at(end + timedelta(minutes=corpus["question_after_minutes"]))
        hits = mem.recall(case["question"], limit=RECALL_LIMIT)
        block = mem.context(case["question"], max_tokens=CONTEXT_TOKENS)
        facts = mem.facts(include_inactive=True)
    value_hits = [(h, k) for h in hits if (k := kind(h.text, old, new)) in ("new", "both", "old")]
    lines = block_lines(block.text)
    old_only = [f for f in facts if kind(f.text, old, new) in ("old", "old_past")]
    return Outcome(
        id=case["id"], attribute=case["attribute"], phrasing=case["phrasing"], wording=wording(case),
        newer_first=bool(value_hits) and value_hits[0][1] in ("new", "both"),
        new_only_first=bool(value_hits) and value_hits[0][1] == "new",
        old_first=bool(value_hits) and value_hits[0][1] == "old",
        value_hit=bool(value_hits),
        old_as_current=old_above_new(lines, old, new, ["facts"]),
        old_above_new_anywhere=old_above_new(lines, old, new, None),
        new_in_recall=any(names(h.text, new) for h in hits),
        old_in_recall=any(names(h.text, old) for h in hits),
        new_in_context=names(block.text, new),
        old_stored=any(names(f.text, old) for f in facts),
        old_superseded=all(f.status != "active" for f in old_only) if old_only else None,
        new_stored=any(names(f.text, new) and f.status == "active" for f in facts),
        first_value_hit=f"{value_hits[0][0].tier}: {value_hits[0][0].text}" if value_hits else "")


def run_updates(corpus: dict[str, Any], cases: list[dict[str, Any]], retrieval: str) -> list[Outcome]:
    embedder = None
    if retrieval in ("hybrid", "embedding"):
        from scoring.embeddings import default_embedder

        embedder = default_embedder()  # one model for every case (each memory would load its own)
    return [run_case(case, corpus, retrieval, embedder) for case in cases]


# -- aggregation and report --------------------------------------------------------------------

COLUMNS: dict[str, tuple[str, Callable[[Outcome], bool | None]]] = {
    "newer_first": ("newer-first@1", lambda o: o.newer_first),
    "new_only_first": ("new-only first@1", lambda o: o.new_only_first),
    "old_first": ("old first@1", lambda o: o.old_first),
    "no_value_hit": (f"no value hit in top-{RECALL_LIMIT}", lambda o: not o.value_hit),
    "old_as_current": (f"old as current in context({CONTEXT_TOKENS})", lambda o: o.old_as_current),
    "old_above_new_anywhere": ("old above new anywhere in context", lambda o: o.old_above_new_anywhere),
    "new_in_recall": (f"new in recall top-{RECALL_LIMIT}", lambda o: o.new_in_recall),
    "old_in_recall": (f"old in recall top-{RECALL_LIMIT}", lambda o: o.old_in_recall),
    "new_in_context": ("new in context", lambda o: o.new_in_context),
    "old_stored": ("old value stored", lambda o: o.old_stored),
    "old_superseded": ("old fact superseded", lambda o: o.old_superseded),
    "new_stored": ("new value stored (active)", lambda o: o.new_stored),
}
GROUP_COLUMNS = ("newer_first", "new_only_first", "old_first", "no_value_hit", "old_as_current", "old_stored",
                 "old_superseded", "new_stored")


def rates(outcomes: list[Outcome]) -> dict[str, Any]:
    """Each column's rate over the cases where it applies, and the number of cases."""
    out: dict[str, Any] = {"cases": len(outcomes)}
    for key, (_, get) in COLUMNS.items():
        values = [v for o in outcomes if (v := get(o)) is not None]
        out[key] = round(sum(values) / len(values), 4) if values else None
        if key == "old_superseded":
            out["old_superseded_of"] = len(values)
    return out


def grouped(outcomes: list[Outcome], field: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[getattr(o, field)].append(o)
    return {name: rates(group) for name, group in sorted(groups.items())}


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def group_table(title: str, groups: dict[str, dict[str, Any]]) -> list[str]:
    """Rows sorted worst newer-first@1 first."""
    head = [COLUMNS[k][0] for k in GROUP_COLUMNS]
    lines = [f"| {title} | cases | " + " | ".join(head) + " |", "|---" * (len(head) + 2) + "|"]
    for name, r in sorted(groups.items(), key=lambda item: (item[1]["newer_first"], -item[1]["old_as_current"])):
        cells = [pct(r[k]) + (f" of {r['old_superseded_of']}" if k == "old_superseded" else "")
                 for k in GROUP_COLUMNS]
        lines.append(f"| {name} | {r['cases']} | " + " | ".join(cells) + " |")
    return lines


def short(text: str, n: int = 90) -> str:
    text = text.replace("|", "/")
    return text if len(text) <= n else text[: n - 1] + "…"


def report(args: argparse.Namespace, corpus: dict[str, Any], cases: list[dict[str, Any]],
           results: dict[str, list[Outcome]], locomo: dict[str, dict[str, Any]], version: str) -> str:
    attributes = sorted({c["attribute"] for c in cases})
    phrasings = sorted({c["phrasing"] for c in cases})
    out = ["# Updates: newer values over older ones",
           f"Command: `{shlex.join(['python', 'benchmarks/updates.py', *sys.argv[1:]])}`",
           f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
           f"library: `{version}`; {datetime.now().date().isoformat()}.",
           f"Corpus: `tests/data/updates.json`, {len(cases)} of {len(corpus['cases'])} cases, "
           f"{len(attributes)} attributes, {len(phrasings)} phrasings of change. Each case: a fresh "
           "in-memory `UnifiedMemory`, the old statement among unrelated turns in conversation 1, "
           f"`end_session()`, the new one {corpus['days_between_conversations']} days later in conversation 2, "
           f"`end_session()`, then `recall(question, limit={RECALL_LIMIT})` and "
           f"`context(question, max_tokens={CONTEXT_TOKENS})`. Definitions: the docstring of "
           "`benchmarks/updates.py` (newer-first@1: the first recall hit naming either value names the new "
           "one, a hit naming only the old value and marking it as past being skipped; old as current: a "
           "Facts line names the old value, not the new one, unmarked, with no line naming the new value "
           "above it).",
           "## Overall"]
    table = ["| retrieval | cases | " + " | ".join(label for label, _ in COLUMNS.values()) + " |",
             "|---" * (len(COLUMNS) + 2) + "|"]
    for mode, outcomes in results.items():
        r = rates(outcomes)
        cells = [pct(r[k]) + (f" of {r['old_superseded_of']}" if k == "old_superseded" else "") for k in COLUMNS]
        table.append(f"| {mode} | {r['cases']} | " + " | ".join(cells) + " |")
    out.append("\n".join(table))
    out.append("newer-first@1 + old first@1 + no value hit = 100%: a case's first value hit names the new value, "
               f"or only the old one, or it has no value hit in the top {RECALL_LIMIT} (a retrieval miss, not an "
               "update miss). *old fact superseded* is over the cases where some fact names only the old value. "
               "*new in context* counts the conversation section too, whose summary of earlier turns holds every "
               "turn of these short conversations; the Facts section is what *old as current* reads.")
    for mode, outcomes in results.items():
        for field, title in (("attribute", "attribute"), ("phrasing", "phrasing"),
                             ("wording", "question wording")):
            out += [f"## {mode}: per {title} (worst newer-first@1 first)",
                    "\n".join(group_table(title, grouped(outcomes, field)))]
    if locomo:
        out += locomo_section(locomo)
    out += targets_section(results, locomo)
    for mode, outcomes in results.items():
        out += misses_section(mode, outcomes)
    now = library_version()
    if now != version:
        out.append(f"Note: the library changed during the run (now `{now}`).")
    return "\n\n".join(out) + "\n"


def locomo_section(locomo: dict[str, dict[str, Any]]) -> list[str]:
    questions = next(iter(locomo.values()))["questions"]["overall"]
    table = ["| retrieval | R@5 | R@10 | R@20 | evidence in context(2000) | before: R@5 / R@10 / R@20 / context "
             "| R@10 not lower |", "|---|---|---|---|---|---|---|"]
    for mode, s in locomo.items():
        now = [s["recall"][k]["overall"] for k in ("R@5", "R@10", "R@20")] + [s["evidence_in_context"]["overall"]]
        before = LOCOMO_BEFORE.get(mode)
        cells = " | ".join(f"{v:.4f}" for v in now)
        if not isinstance(before, dict):
            table.append(f"| {mode} | {cells} | – | – |")
            continue
        verdict = ("not comparable (a subset)" if questions != LOCOMO_QUESTIONS
                   else "yes" if round(now[1], 4) >= before["R@10"] else "**no: lower**")
        shown = " / ".join(f"{before[k]:.4f}" for k in ("R@5", "R@10", "R@20", "context"))
        table.append(f"| {mode} | {cells} | {shown} | {verdict} |")
    return ["## LoCoMo development set (no regression)",
            f"`benchmarks/locomo.py`'s UnifiedMemory evaluation (one scope per conversation, turn-level evidence "
            f"recall, mean over questions): {questions} questions of categories 1-4. Before = this script at "
            f"{LOCOMO_BEFORE['library']} (all {LOCOMO_QUESTIONS} questions), before issue 16's library changes.",
            "\n".join(table)]


def targets_section(results: dict[str, list[Outcome]], locomo: dict[str, dict[str, Any]]) -> list[str]:
    table = ["| target | retrieval | measured | verdict |", "|---|---|---|---|"]
    for mode, outcomes in results.items():
        r = rates(outcomes)
        table.append(f"| newer-first@1 ≥ {TARGETS['newer_first']:.0%} | {mode} | {pct(r['newer_first'])} | "
                     f"{'met' if r['newer_first'] >= TARGETS['newer_first'] else '**missed**'} |")
        table.append(f"| old as current in context ≤ {TARGETS['old_as_current']:.0%} | {mode} | "
                     f"{pct(r['old_as_current'])} | "
                     f"{'met' if r['old_as_current'] <= TARGETS['old_as_current'] else '**missed**'} |")
    if not locomo:
        table.append("| LoCoMo dev R@10 not lower | – | not run (`--locomo PATH`) | – |")
    else:
        table.append("| LoCoMo dev R@10 not lower | see above | – | – |")
    return ["## Targets (issue 16)", "\n".join(table)]


def misses_section(mode: str, outcomes: list[Outcome]) -> list[str]:
    """The cases whose first value hit names only the old value, or whose context shows it as current;
    then the retrieval misses by id."""
    shown = [o for o in outcomes if o.old_first or o.old_as_current]
    table = ["| case | phrasing | first value hit (tier: text) | old as current in context |", "|---|---|---|---|"]
    table += [f"| {o.id} | {o.phrasing} | {short(o.first_value_hit) or '(none)'} | "
              f"{'yes' if o.old_as_current else 'no'} |" for o in shown]
    none = [o.id for o in outcomes if not o.value_hit]
    return [f"## {mode}: cases with the old value first ({sum(o.old_first for o in outcomes)}) "
            f"or shown as current in context ({sum(o.old_as_current for o in outcomes)})",
            "\n".join(table),
            f"No value hit in the top {RECALL_LIMIT} ({len(none)}): " + (", ".join(none) if none else "none") + "."]


def spread(cases: list[dict[str, Any]], n: int | None) -> list[dict[str, Any]]:
    """``n`` cases spread evenly over the corpus (all when None)."""
    if n is None or n >= len(cases):
        return cases
    return [cases[i * len(cases) // n] for i in range(n)]


def run_locomo(path: Path, modes: list[str], conversations: int | None) -> dict[str, dict[str, Any]]:
    """benchmarks/locomo.py's UnifiedMemory scores (single scope) for each mode."""
    import locomo as bench

    samples = []
    for sample in json.loads(path.read_text(encoding="utf-8"))[:conversations]:
        turns = bench.load_turns(sample)
        samples.append((sample["sample_id"], turns, bench.load_questions(sample, {t.dia_id for t in turns}, None)))
    out = {}
    for mode in modes:
        out[mode] = bench.summary(bench.run_memory(samples, mode, "single"))
        print(f"LoCoMo {mode}: R@10 {out[mode]['recall']['R@10']['overall']:.4f}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--retrieval", nargs="+", default=["lexical"], choices=["lexical", "hybrid", "embedding"])
    parser.add_argument("--cases", type=int, default=None, help="only N cases, spread evenly over the corpus")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--locomo", type=Path, default=None, help="LoCoMo dev json: also report its R@k")
    parser.add_argument("--locomo-conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "updates.md")
    parser.add_argument("--json", type=Path, default=None, help="also write every case's outcome as JSON here")
    args = parser.parse_args(argv)

    version = library_version()
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    cases = spread(corpus["cases"], args.cases)
    results: dict[str, list[Outcome]] = {}
    for mode in args.retrieval:
        start = time.perf_counter()
        results[mode] = run_updates(corpus, cases, mode)
        r = rates(results[mode])
        print(f"{mode}: newer-first@1 {r['newer_first']:.3f}, old as current {r['old_as_current']:.3f} "
              f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    locomo = run_locomo(args.locomo, args.retrieval, args.locomo_conversations) if args.locomo else {}
    publish(report(args, corpus, cases, results, locomo, version), args.out)
    if args.json:
        args.json.write_text(json.dumps({
            "command": sys.argv, "library": version,
            "updates": {mode: {"overall": rates(o), "attribute": grouped(o, "attribute"),
                               "phrasing": grouped(o, "phrasing"), "cases": [asdict(x) for x in o]}
                        for mode, o in results.items()},
            "locomo": locomo}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
