"""Which unit of a conversation turn to embed: LoCoMo evidence R@10 of dense search alone.

    python benchmarks/locomo_units.py PATH/locomo_dev.json [--samples conv-26 conv-30 conv-41]
        [--vector-cache FILE] [--out benchmarks/results/locomo_units.md]

The messages tier embeds a turn as the normalised sum of its parts: its own text twice and up to
two neighbour turns on each side (same session), each ``"speaker: text"`` (:mod:`tiers.indexes.neighbors`).
This script rebuilds those vectors from the raw data with the bundled MiniLM and compares, for dense
search alone (no BM25, no fusion), ways of embedding the turn's own part:

- ``turn``: the turn whole (what the library does);
- ``sentences``: each sentence alone, with the speaker's name (``"Melanie: I joined a gym."``), twice;
- ``turn+sentences``: the turn whole twice, plus each sentence once.

R@10 = fraction of a question's evidence turns among the 10 nearest turns, mean over questions of
categories 1-4 (as :mod:`benchmarks.locomo`). Only vectors and a dot product: it says what a unit
does for dense retrieval, not what recall makes of it (run ``locomo.py`` for that).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import library_version, publish  # noqa: E402
from locomo import CATEGORIES, Turn, VectorCache, embedder, load_questions, load_turns  # noqa: E402

from scoring.importance import split_sentences  # noqa: E402
from scoring.linalg import unit_rows  # noqa: E402

SCHEMES = ("turn", "sentences", "turn+sentences")
WIDTH = 2  # neighbour turns on each side, as EpisodicLog's default


def scheme_vectors(turns: list[Turn], embed) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    """One unit vector per turn for each scheme."""
    whole = embed([f"{t.speaker}: {t.text}" for t in turns])
    sentences, owner = [], []
    for i, t in enumerate(turns):
        for sentence in split_sentences(t.text) or [t.text]:
            sentences.append(f"{t.speaker}: {sentence}")
            owner.append(i)
    per_sentence = embed(sentences)
    summed = np.zeros_like(whole)
    np.add.at(summed, np.asarray(owner), per_sentence)
    neighbours = np.zeros_like(whole)
    for i, t in enumerate(turns):
        for step in range(1, WIDTH + 1):
            for j in (i - step, i + step):
                if 0 <= j < len(turns) and turns[j].session == t.session:
                    neighbours[i] += whole[j]
    return {"turn": unit_rows(2 * whole + neighbours), "sentences": unit_rows(2 * summed + neighbours),
            "turn+sentences": unit_rows(2 * whole + summed + neighbours)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path)
    parser.add_argument("--samples", nargs="+", default=None)
    parser.add_argument("--vector-cache", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "locomo_units.md")
    args = parser.parse_args()
    cache = VectorCache(args.vector_cache) if args.vector_cache else None
    model = cache if cache is not None else embedder(None)
    data = json.loads(args.path.read_text(encoding="utf-8"))
    chosen = [s for s in data if not args.samples or s["sample_id"] in args.samples]
    found: dict[tuple[str, int], list[float]] = {}
    for sample in chosen:
        turns = load_turns(sample)
        questions = load_questions(sample, {t.dia_id for t in turns}, None)
        vectors = scheme_vectors(turns, lambda texts: np.asarray(model.embed(texts), dtype=np.float32))
        asked = np.asarray(model.embed([q.text for q in questions]), dtype=np.float32)
        for scheme, matrix in vectors.items():
            for q, vector in zip(questions, asked, strict=True):
                top = {turns[i].dia_id for i in np.argsort(-(matrix @ vector), kind="stable")[:10]}
                found.setdefault((scheme, q.category), []).append(sum(e in top for e in q.evidence) / len(q.evidence))
    if cache is not None:
        cache.save()
    header = " | ".join(CATEGORIES[c] for c in sorted(CATEGORIES))
    lines = ["# Which unit of a turn to embed (LoCoMo, dense search alone, evidence R@10)", "",
             f"Command: `python {' '.join(sys.argv)}`", "", f"Library: {library_version()}; samples: "
             f"{', '.join(s['sample_id'] for s in chosen)}", "",
             f"| own part embedded as | {header} | overall |", "|---|" + "---|" * (len(CATEGORIES) + 1)]
    for scheme in SCHEMES:
        cells = [f"{np.mean(found[(scheme, c)]):.3f}" if (scheme, c) in found else "–" for c in sorted(CATEGORIES)]
        overall = np.mean([r for c in CATEGORIES for r in found.get((scheme, c), [])])
        lines.append(f"| {scheme} | {' | '.join(cells)} | {overall:.3f} |")
    publish("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
