"""Long messages: the seconds of one `add_turn` per shape of message and size, and how they grow with length.

    python benchmarks/long_messages.py [--sizes 10000 100000 1000000] [--shapes like_tea sentences ...]
        [--retrieval lexical hybrid] [--repeat 1] [--out benchmarks/results/long_messages.md]

Each shape (see ``SHAPES``) is a user message of exactly the size asked, in characters: a phrase
repeated, one giant word, whitespace or punctuation only, capitalised names, dates, emoji,
random words... built to find the places where work grows faster than the text (security issue 36:
"I like " + "tea, " * 20000, a 100 KB message, took 18 s). For each retrieval mode, shape and size:
a fresh memory file in a temporary folder, `UnifiedMemory(path, user_id="a", retrieval=mode)`, one
`add_turn(message, "ok")` timed (wall-clock; the best of ``--repeat`` runs, each on a fresh file), the
memory closed. The ratio columns divide the seconds of a size by those of the size before: 10x the
text costs about 10x the time when the work is linear, 100x when it is quadratic. Below 0.05 s a
ratio mostly measures noise. A second table times the pieces that read the whole message, each alone
on the largest size: the rule extractor (which reads at most its first 20,000 characters), the
importance scorer and the secret redactor (`SecretRedactor`, off by default in `add_turn`).

Target (issue 36): every 100 KB message in under 2 s, and time about linear in the length.
Hybrid runs embed the message and its facts too (the models are loaded by a warm-up turn first, not timed).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
# Statements enough that a turn embeds more than a few texts: the first such batch loads the full model
# (seconds, once per process), which no length of message should be charged with.
WARM_UP = " ".join(f"I live in {city}. My sister Maria works at Acme {n}. I love jazz {n}. I'm allergic to nuts {n}."
                   for n, city in enumerate(["Lisbon", "Porto", "Braga", "Faro"]))
_WORDS = ("the a cat dog I my sister live Lisbon work Acme love jazz and but so moved to Berlin from Paris is was "
          "tea coffee Maria Anna happy today like allergic peanuts maybe exam Dr. born in 1990").split()


def _repeat(unit: str) -> Callable[[int], str]:
    """A shape: ``unit`` repeated, cut to the size."""
    return lambda size: (unit * (size // len(unit) + 1))[:size]


def _random_words(size: int) -> str:
    rng = random.Random(size)
    return " ".join(rng.choice(_WORDS) for _ in range(size // 4))[:size].ljust(size, "x")


#: name -> (what it is, size -> message). The first ones are issue 36's; the others aim at what a
#: pattern could rescan: long clauses, runs of whitespace, hyphenated words, abbreviations, hedges.
SHAPES: dict[str, tuple[str, Callable[[int], str]]] = {
    "like_tea": ('"I like " + "tea, " repeated', lambda n: ("I like " + _repeat("tea, ")(n))[:n]),
    "love_x": ('"I love " + "x " repeated', lambda n: ("I love " + _repeat("x ")(n))[:n]),
    "giant_word": ("one word, no space", _repeat("a")),
    "sentences": ('"My sister Maria lives in Lisbon. " repeated', _repeat("My sister Maria lives in Lisbon. ")),
    "and_clauses": ('"I live in Lisbon and I work at Acme and " repeated',
                    _repeat("I live in Lisbon and I work at Acme and ")),
    "commas": ("commas only", _repeat(",")),
    "moved": ('"I moved to Berlin and " repeated', _repeat("I moved to Berlin and ")),
    "newlines": ('"hi" then newlines only', lambda n: "hi" + "\n" * (n - 2)),
    "lines": ('"I like tea" lines', _repeat("I like tea\n")),
    "names": ('"Maria Anna Berta " repeated', _repeat("Maria Anna Berta ")),
    "my": ('"my " repeated', _repeat("my ")),
    "im": ("\"I'm \" repeated", _repeat("I'm ")),
    "dates": ('"on 2023-05-01 " repeated', _repeat("on 2023-05-01 ")),
    "emoji": ("emoji and non-ASCII letters", _repeat("caf\u00e9 \U0001F600 \u0131\u017f \u00fcber ")),
    "random": ("random words", _random_words),
    "spaces": ('"I like a", spaces, "b"', lambda n: "I like a" + " " * (n - 9) + "b"),
    "hyphens": ('"allergy " + "a-" repeated', lambda n: ("allergy " + _repeat("a-")(n))[:n]),
    "like_colon": ('"I like tea: " repeated', _repeat("I like tea: ")),
    "and_like": ('"I went and " + "like x: and " repeated', lambda n: ("I went and " + _repeat("like x: and ")(n))[:n]),
    "moved_from": ('"to me I " + "moved from Paris " repeated',
                   lambda n: ("to me I " + _repeat("moved from Paris ")(n))[:n]),
    "abbreviations": ('"Dr. " repeated', _repeat("Dr. ")),
    "hedges": ('"I live in Lisbon, " + "maybe a b c d e f, " repeated',
               lambda n: ("I live in Lisbon, " + _repeat("maybe a b c d e f, ")(n))[:n]),
    "events": ('"my exam " repeated', _repeat("my exam ")),
    "secrets": ('"password=x " + e-mails and phone numbers repeated',
                _repeat("password=x ada@example.com 555-123-4567 ")),
}


def _timed(mode: str, message: str, folder: Path, repeat: int) -> float:
    """The best wall-clock seconds of one ``add_turn`` of ``message``, each run on a fresh memory file."""
    from unified_memory import UnifiedMemory

    best = float("inf")
    for run in range(repeat):
        with tempfile.TemporaryDirectory(dir=folder) as where:
            mem = UnifiedMemory(str(Path(where) / f"long-{run}.db"), user_id="a", retrieval=mode)
            try:
                start = time.perf_counter()
                mem.add_turn(message, "ok")
                best = min(best, time.perf_counter() - start)
            finally:
                mem.close()
    return best


def _pieces(message: str, repeat: int = 1) -> dict[str, float]:
    """The best seconds of ``repeat`` runs of the pieces that read a whole message, each alone (fresh
    instances: no cache helps)."""
    from scoring.importance import HeuristicImportanceScorer
    from unified_memory import Message, RuleExtractor, SecretRedactor

    runs = {"rule extractor": lambda: RuleExtractor().extract(Message(role="user", content=message)),
            "importance scorer": lambda: HeuristicImportanceScorer().assess(message),
            "secret redactor": lambda: SecretRedactor()(message)}
    spent = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            spent[name] = min(spent[name], time.perf_counter() - start)
    return spent


def _kb(size: int) -> str:
    return f"{size / 1000:g} KB" if size < 1_000_000 else f"{size / 1_000_000:g} MB"


def _ratio(later: float, earlier: float) -> str:
    return f"{later / earlier:.0f}x" if earlier > 0 else "–"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                        help="message sizes in characters, smallest first")
    parser.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=list(SHAPES))
    parser.add_argument("--retrieval", nargs="+", default=["lexical", "hybrid"], choices=["lexical", "hybrid"])
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell (the best is kept)")
    parser.add_argument("--dir", type=Path, default=None, help="where the temporary memory files go")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "long_messages.md")
    args = parser.parse_args(argv)
    # here, not at import: the unit tests import SHAPES (tests/unified_memory/extraction/test_long_messages.py)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]
    from _report import library_version, machine, publish

    sizes = sorted(args.sizes)
    version, load_before = library_version(), os.getloadavg()[0]
    folder = args.dir or Path(tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    sections, slowest = [], {}
    for mode in args.retrieval:
        _timed(mode, WARM_UP, folder, 1)  # imports; for hybrid, both ways of embedding (a few texts, many)
        head = " | ".join(_kb(s) for s in sizes)
        ratios = " | ".join(f"{_kb(b)} / {_kb(a)}" for a, b in zip(sizes, sizes[1:], strict=False))
        rows = [f"| shape | {head} | {ratios} |", "|---" * (2 * len(sizes)) + "|"]
        for name in args.shapes:
            what, build = SHAPES[name]
            spent = [_timed(mode, build(size), folder, args.repeat) for size in sizes]
            slowest[mode, name] = spent
            cells = " | ".join(f"{s:.3f}" for s in spent)
            steps = " | ".join(_ratio(b, a) for a, b in zip(spent, spent[1:], strict=False))
            rows.append(f"| {name}: {what} | {cells} | {steps} |")
            print(rows[-1], flush=True)
        sections += [f"## add_turn, retrieval={mode} (seconds)", "\n".join(rows)]
    largest = sizes[-1]
    rows = [f"| shape | {' | '.join(_pieces('x'))} |", "|---|---|---|---|"]
    for name in args.shapes:
        spent = _pieces(SHAPES[name][1](largest), args.repeat)
        rows.append(f"| {name} | " + " | ".join(f"{s:.3f}" for s in spent.values()) + " |")
    sections += [f"## Pieces alone on {_kb(largest)} (seconds)", "\n".join(rows)]
    target = min(sizes, key=lambda s: abs(s - 100_000))
    at_target = {key: spent[sizes.index(target)] for key, spent in slowest.items()}
    worst = max(at_target, key=at_target.__getitem__)
    notes = [f"Slowest {_kb(target)} message: {worst[1]} with retrieval={worst[0]}, {at_target[worst]:.2f} s "
             f"({'within' if at_target[worst] < TARGET_S else 'OVER'} the {TARGET_S:.0f} s target).",
             f"1-minute load average before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
             f"(other processes on these {os.cpu_count()} CPUs inflate the timings)."]
    shown = " ".join(["python benchmarks/long_messages.py", *(argv if argv is not None else sys.argv[1:])])
    parts = ["# Long messages: add_turn time by shape and length", f"Command: `{shown}`",
             f"Machine: {machine()}, {platform.platform()}, {datetime.now(UTC):%Y-%m-%d}",
             f"Library: `{version}`",
             f"Target (issue 36): one `add_turn` of any 100 KB message in under {TARGET_S:.0f} s; time about "
             "linear in the length (each ratio column near the ratio of the sizes).",
             *sections, "\n".join(f"- {note}" for note in notes)]
    publish("\n\n".join(parts) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
