"""Write-path throughput and profile: ``remember_many`` in batches into a file that already
holds facts, and durable ``add_turn``, as :mod:`benchmarks.scale` does them.

    python benchmarks/write_path.py [--preload 50000] [--batches 4] [--batch 5000] [--turns 500]
        [--profile remember|turn|none] [--top 30] [--dir DIR] [--backend URL]

The file is filled with ``--preload`` seeded facts (``_synthetic.py``, in batches of ``--batch``, not
timed), then ``--batches`` more batches are timed (facts/s), then ``--turns`` single ``add_turn``
calls (user + assistant, turns/s). ``--profile`` runs that stage under cProfile and prints the
``--top`` functions by cumulative and by own time. ``--backend`` a ``postgresql://`` URL instead
of a file.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _synthetic import NOUNS, PLACES, synthetic_facts  # noqa: E402


def _profiled(enabled: bool, top: int, label: str):  # type: ignore[no-untyped-def]
    class _Stage:
        def __enter__(self) -> _Stage:
            self.prof = cProfile.Profile() if enabled else None
            if self.prof is not None:
                self.prof.enable()
            return self

        def __exit__(self, *exc: object) -> None:
            if self.prof is None:
                return
            self.prof.disable()
            for key in ("cumulative", "tottime"):
                out = io.StringIO()
                pstats.Stats(self.prof, stream=out).sort_stats(key).print_stats(top)
                print(f"--- {label}: by {key} ---\n{out.getvalue()}")
    return _Stage()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preload", type=int, default=50000)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--profile", choices=("remember", "turn", "none"), default="none")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--backend", default=None)
    args = parser.parse_args()

    from unified_memory import UnifiedMemory

    total = args.preload + args.batches * args.batch
    facts = synthetic_facts(total)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        target = args.backend or Path(tmp) / "write_path.db"
        with UnifiedMemory(target, long_term_limit=None, user_id="bench", retrieval="lexical") as mem:
            t0 = time.perf_counter()
            for i in range(0, args.preload, args.batch):
                mem.remember_many(facts[i:i + args.batch])
            print(f"preload {args.preload:,} facts: {args.preload / max(time.perf_counter() - t0, 1e-9):,.0f} facts/s")
            timed = facts[args.preload:]
            with _profiled(args.profile == "remember", args.top, "remember_many"):
                t0, c0 = time.perf_counter(), time.process_time()
                for i in range(0, len(timed), args.batch):
                    mem.remember_many(timed[i:i + args.batch])
                elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
            print(f"remember_many: {len(timed):,} facts in {elapsed:.2f} s = {len(timed) / elapsed:,.0f} facts/s "
                  f"(CPU {cpu:.2f} s = {len(timed) / cpu:,.0f} facts/s; batches of {args.batch:,} onto {args.preload:,})")
            with _profiled(args.profile == "turn", args.top, "add_turn"):
                t0, c0 = time.perf_counter(), time.process_time()
                for i in range(args.turns):
                    mem.add_turn(f"Turn {i}: I walked past the {NOUNS[i % len(NOUNS)]} shop in {PLACES[i % 20]}",
                                 "Sounds nice.")
                elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
            # CPU time as well: on a shared machine the wall clock also counts the others' work
            print(f"add_turn: {args.turns} turns in {elapsed:.2f} s = {args.turns / elapsed:,.0f} turns/s "
                  f"(CPU {cpu:.2f} s = {args.turns / cpu:,.0f} turns/s)")


if __name__ == "__main__":
    main()
