"""A fresh process embeds a query, and recalls from the command line, without importing PyTorch once
this machine holds a verified export of the bundled model (behaviour, not timing: see
benchmarks/cli_cold.py for the wall-clock)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scoring.embeddings import SentenceTransformerEmbedder

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "sentence_transformers")
TEXTS = ["what food should I avoid?", "", "Crème brûlée in Zürich, 北京烤鸭 🙂",
         "Maria: " + "lives in Lisbon, works at Acme, owns a dog named Biscuit; " * 25]

PREAMBLE = f"import json, sys\nHEAVY = {HEAVY!r}\n"
EMBED = PREAMBLE + """
from scoring.embeddings import SentenceTransformerEmbedder
emb = SentenceTransformerEmbedder()
vectors = emb.embed(json.loads(sys.argv[1]))
print(json.dumps({"vectors": vectors.tolist(), "loaded": emb.loaded,
                  "heavy": sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)}))
"""

CLI = PREAMBLE + """
from unified_memory.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "heavy": sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))}, out)
"""


@pytest.fixture(scope="module")
def embedder():
    for module in ("sentence_transformers", "onnxruntime", "onnx", "tokenizers"):
        pytest.importorskip(module)
    emb = SentenceTransformerEmbedder()
    emb.embed(["make and verify the export"])  # in this test session's cache folder (tests/conftest.py)
    return emb


def python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.mark.slow
@pytest.mark.embeddings
def test_a_fresh_process_embeds_without_torch_and_gets_the_pytorch_vectors(embedder):
    done = python("-c", EMBED, json.dumps(TEXTS))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    result = json.loads(done.stdout)
    assert result["heavy"] == [] and result["loaded"] is False
    reference = embedder.model.encode(TEXTS, normalize_embeddings=True)
    np.testing.assert_allclose(np.asarray(result["vectors"], dtype=np.float32), reference, atol=1e-5)


@pytest.mark.embeddings
def test_a_cold_cli_recall_never_imports_torch(embedder, tmp_path):
    from unified_memory import UnifiedMemory

    db = tmp_path / "m.db"
    facts = ["I'm allergic to peanuts", "My sister Maria lives in Lisbon", "I love jazz music"]
    with UnifiedMemory(db, user_id="ada", retrieval="hybrid", embedder=embedder) as mem:
        for fact in facts:
            mem.remember(fact)
        expected = mem.recall("which food must I avoid?", tiers="long_term", limit=3)
    report = tmp_path / "report.json"
    done = python("-c", CLI, str(report), "--db", str(db), "--user", "ada", "--json", "recall",
                  "which food must I avoid?", "--tiers", "long_term", "--limit", "3")
    assert done.stderr == ""
    assert json.loads(report.read_text()) == {"code": 0, "heavy": []}
    hits = json.loads(done.stdout)
    assert [h["text"] for h in hits] == [h.text for h in expected] and hits[0]["text"] == facts[0]
    for hit, want in zip(hits, expected, strict=True):
        assert hit["components"]["cosine"] == pytest.approx(want.components["cosine"], abs=1e-5)
