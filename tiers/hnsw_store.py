"""Saved HNSW partitions beside a SQLite file, so that reopening a large memory loads its
graph instead of rebuilding it (building 300,000 x 384 takes minutes; loading, about a second).

:class:`~tiers.numpy_index.NumpyVectorIndex` given a ``directory`` (``<memory file>.vectors``)
saves each HNSW partition it built or changed when it closes, and loads a saved one the first
time the partition is used. A partition is three files named by a hash of its name: the
usearch graph and a JSON file of its ids and ranks, both tagged with a random generation,
then a small manifest naming that generation, replaced atomically last — so a crash leaves
either the old set or the new one, never a mix. Whatever a load cannot read, or finds
inconsistent, is deleted and the partition is built from the store as before.

The saved partition needs no journal position: every id it holds is ``"<id>|<fingerprint of
model and text>"``, and :meth:`tiers.vectors.PartitionedVectors.ensure` compares them with the
store on first use, deleting what is stale and adding what is missing (from the embedding
cache). Like every index it is derived: deleting the partition (a forgotten user, a rebuild)
deletes its files. JSON and usearch's own format only: no pickle.

    >>> import tempfile
    >>> vectors = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    >>> vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    >>> part = HnswPartition.build([f"v{i}" for i in range(50)], vectors, np.arange(50))
    >>> folder = tempfile.mkdtemp(); save(folder, "facts/ada", part)
    >>> again = load(folder, "facts/ada"); again.search(vectors[3], 1)[0][0], len(again)
    ('v3', 50)
    >>> delete(folder, "facts/ada"); load(folder, "facts/ada") is None
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from pathlib import Path

import numpy as np

from tiers.hnsw_index import HnswPartition, _usearch

__all__ = ["save", "load", "delete"]

_FORMAT = 1


def _stem(partition: str) -> str:
    return hashlib.blake2b(partition.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + f".{secrets.token_hex(4)}.tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def _remove(folder: Path, stem: str, keep: str | None = None) -> None:
    for path in folder.glob(f"{stem}.*"):
        if keep is None or (keep not in path.name and path.name != f"{stem}.json"):
            with contextlib.suppress(OSError):
                path.unlink()


def save(directory: str | os.PathLike[str], partition: str, part: HnswPartition) -> None:
    """Save ``part`` as ``partition`` in ``directory`` (created if missing)."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    stem, generation = _stem(partition), secrets.token_hex(6)
    graph = folder / f"{stem}.{generation}.usearch"
    part.graph.save(str(graph))
    names = part.names
    state = {"format": _FORMAT, "partition": partition, "dim": part.dim, "params": part.params,
             "names": names, "order": part.order[:len(names)].tolist(), "next_order": part.next_order,
             "removed": part.removed, "live": len(part), "graph_bytes": graph.stat().st_size}
    _write(folder / f"{stem}.{generation}.ids.json", json.dumps(state))
    _write(folder / f"{stem}.json", json.dumps({"format": _FORMAT, "partition": partition,
                                                "generation": generation}))
    _remove(folder, stem, keep=generation)


def load(directory: str | os.PathLike[str], partition: str) -> HnswPartition | None:
    """The partition saved in ``directory``, or ``None`` (none saved, or unreadable: then deleted)."""
    folder, stem = Path(directory), _stem(partition)
    manifest = folder / f"{stem}.json"
    if not manifest.exists():
        return None
    try:
        head = json.loads(manifest.read_text(encoding="utf-8"))
        generation = head["generation"]
        if head["format"] != _FORMAT or head["partition"] != partition or not str(generation).isalnum():
            raise ValueError("another format or partition")
        state = json.loads((folder / f"{stem}.{generation}.ids.json").read_text(encoding="utf-8"))
        graph_path = folder / f"{stem}.{generation}.usearch"
        if state["partition"] != partition or graph_path.stat().st_size != state["graph_bytes"]:
            raise ValueError("mismatched files")
        graph = _usearch()(ndim=state["dim"], metric="ip", dtype="f32",
                           connectivity=state["params"]["connectivity"],
                           expansion_add=state["params"]["ef_construction"],
                           expansion_search=state["params"]["ef_search"])
        graph.load(str(graph_path))
        names = state["names"]
        if (graph.ndim != state["dim"] or len(graph) != state["live"]
                or sum(name is not None for name in names) != state["live"] or len(state["order"]) != len(names)):
            raise ValueError("inconsistent")
        return HnswPartition.restore(graph, names, np.asarray(state["order"], dtype=np.int64),
                                     next_order=int(state["next_order"]), removed=int(state["removed"]),
                                     params=state["params"])
    except Exception:  # damaged, truncated, another version: rebuilt from the store instead
        _remove(folder, stem)
        return None


def delete(directory: str | os.PathLike[str], partition: str) -> None:
    """Delete a saved partition's files (none saved: nothing to do)."""
    folder = Path(directory)
    if folder.is_dir():
        _remove(folder, _stem(partition))
