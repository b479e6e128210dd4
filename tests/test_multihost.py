"""Four hosts on one PostgreSQL memory (benchmarks/multihost.py): separate processes with their own
HOME, cache folder and working directory, sharing only the database (and, in one variant, a Chroma
server), write and recall for a fixed time while one of them is SIGKILLed mid-write."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("psycopg")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import multihost  # noqa: E402


def check(figures: dict) -> None:
    assert figures["failures"] == [], figures["failures"]
    assert figures["lost"] == [], f"acknowledged writes missing: {figures['lost'][:10]}"
    assert figures["duplicated"] == [], f"stored twice: {figures['duplicated'][:10]}"
    assert figures["errors"] == 0, figures["error_samples"]
    assert figures["acknowledged"] > 50
    assert figures["killed"] is not None and figures["acknowledged_by_host"][figures["killed"]] >= 20  # killed mid-stream
    assert figures["freshness_n"] > 10, "no host ever recalled another host's write"
    # A write on one host is recalled on another soon: within 5 s here, where a busy CI machine can stall a
    # host's loop (it took 1.25 s once); benchmarks/multihost.py measures the latency (max 38 / 291 ms, quiet).
    assert figures["freshness_max_ms"] < 5000, figures


def test_four_hosts_lose_and_duplicate_nothing_and_see_each_other_soon(pg_url):
    check(multihost.run(pg_url, hosts=4, seconds=8, kill=True))


def test_four_hosts_with_vectors_on_a_shared_chroma_server(pg_url, chroma_server):
    """Vectors from the feature-hashing embedder: what is tested is the hosts sharing a Chroma server
    (four hosts each loading the bundled model took a minute of this machine's two cores)."""
    figures = multihost.run(pg_url, hosts=4, seconds=8, kill=True, retrieval="hybrid",
                            chroma=f"127.0.0.1:{chroma_server}", embedder="hashing")
    check(figures)
