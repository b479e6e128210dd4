"""Saved HNSW partitions beside a SQLite file, so that reopening a large memory loads its
graph instead of rebuilding it (building 300,000 x 384 takes minutes; loading, about a second).

A partition is saved as three files named by a hash of its name in ``<memory file>.vectors/``:
the faiss index (``faiss.write_index``: graph and vectors), a JSON file of its ids and ranks,
both tagged with a random generation, then a small manifest naming that generation, the
journal position the partition reflects (:mod:`tiers.journal`) and its ``tag`` (kind, model,
dimensions), replaced atomically last — so a crash leaves either the old set or the new one
(and perhaps a ``.tmp`` file, deleted with the partition), never a mix. Whatever a load cannot
read, finds inconsistent, or finds of another format or tag, is deleted and the partition is
built from the store as before. JSON and faiss's own format only: no pickle.

Removed vectors are zeroed in the graph (:class:`~tiers.hnsw_index.HnswPartition`), so a saved
file holds no removed item's vector. :class:`tiers.vectors.PartitionedVectors` saves only under
the database's write lock, and a forget deletes the user's saved files inside its own write,
before it commits: once a forget returns, no saved file holds a forgotten vector, even after a
SIGKILL. The files are loaded into memory, not memory-mapped: faiss 1.15 maps an
``IndexHNSWFlat`` only read-only (``IO_FLAG_MMAP_IFC``), and adding to it, or zeroing a removed
vector, aborts the process.

    >>> import tempfile
    >>> vectors = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    >>> vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    >>> part = HnswPartition(8); part.put([f"v{i}" for i in range(50)], vectors, np.arange(50))
    >>> folder = tempfile.mkdtemp(); save(folder, "facts/ada", part, head=7, tag="t")
    >>> again, head = load(folder, "facts/ada", "t"); again.search(vectors[3], 1)[0][0], len(again), head
    ('v3', 50, 7)
    >>> load(folder, "facts/ada", "another model"), os.listdir(folder)
    (None, [])
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from pathlib import Path

import numpy as np

from tiers.hnsw_index import HnswPartition, faiss_module

__all__ = ["save", "load", "move", "delete"]

_FORMAT = 2


def _stem(partition: str) -> str:
    return hashlib.blake2b(partition.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary(path: Path) -> Path:
    return path.with_name(path.name + f".{secrets.token_hex(4)}.tmp")


def _write(path: Path, text: str) -> None:
    temporary = _temporary(path)
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def _remove(folder: Path, stem: str, keep: str | None = None) -> None:
    removed = False
    for path in folder.glob(f"{stem}.*"):
        if keep is None or (keep not in path.name and path.name != f"{stem}.json"):
            with contextlib.suppress(OSError):
                path.unlink()
                removed = True
    if removed:
        with contextlib.suppress(OSError):
            _sync(folder)  # the unlinks are durable before the caller's transaction commits


def save(directory: str | os.PathLike[str], partition: str, part: HnswPartition, *, head: int, tag: str) -> None:
    """Save ``part`` as ``partition`` in ``directory`` (created if missing), as of journal
    position ``head``."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    stem, generation = _stem(partition), secrets.token_hex(6)
    graph, temporary = folder / f"{stem}.{generation}.faiss", None
    try:
        temporary = _temporary(graph)
        faiss_module().write_index(part.graph, str(temporary))
        _sync(temporary)
        os.replace(temporary, graph)
    except BaseException:
        if temporary is not None:
            with contextlib.suppress(OSError):
                temporary.unlink()
        raise
    names = part.names
    state = {"format": _FORMAT, "partition": partition, "dim": part.dim, "params": part.params,
             "names": names, "order": part.order[:len(names)].tolist(), "next_order": part.next_order,
             "live": len(part), "graph_bytes": graph.stat().st_size}
    _write(folder / f"{stem}.{generation}.ids.json", json.dumps(state))
    _write(folder / f"{stem}.json", json.dumps({"format": _FORMAT, "partition": partition, "tag": tag,
                                                "generation": generation, "head": head}))
    _sync(folder)
    _remove(folder, stem, keep=generation)


def _manifest(folder: Path, partition: str) -> dict | None:
    path = folder / f"{_stem(partition)}.json"
    if not path.exists():
        return None
    head = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(head, dict) or head.get("format") != _FORMAT or head.get("partition") != partition \
            or not str(head.get("generation")).isalnum() or not isinstance(head.get("head"), int):
        raise ValueError("another format or partition")
    return head


def move(directory: str | os.PathLike[str], partition: str, head: int, tag: str) -> bool:
    """Record that the saved partition (unchanged) reflects journal position ``head`` too;
    ``False`` when there is no usable saved copy with this ``tag``."""
    folder = Path(directory)
    try:
        manifest = _manifest(folder, partition)
    except (OSError, ValueError):
        return False
    if manifest is None or manifest.get("tag") != tag:
        return False
    _write(folder / f"{_stem(partition)}.json", json.dumps({**manifest, "head": head}))
    return True


def load(directory: str | os.PathLike[str], partition: str, tag: str) -> tuple[HnswPartition, int] | None:
    """The partition saved in ``directory`` with this ``tag``, and its journal position; ``None``
    when none is saved, or it is unreadable or of another tag (then its files are deleted)."""
    folder, stem = Path(directory), _stem(partition)
    try:
        manifest = _manifest(folder, partition)
        if manifest is None:
            return None
        if manifest.get("tag") != tag:
            raise ValueError("saved with another model or kind")
        generation = manifest["generation"]
        state = json.loads((folder / f"{stem}.{generation}.ids.json").read_text(encoding="utf-8"))
        graph_path = folder / f"{stem}.{generation}.faiss"
        if state["partition"] != partition or graph_path.stat().st_size != state["graph_bytes"]:
            raise ValueError("mismatched files")
        graph = faiss_module().read_index(str(graph_path))
        names = state["names"]
        if (graph.d != state["dim"] or graph.ntotal != len(names) or len(state["order"]) != len(names)
                or sum(name is not None for name in names) != state["live"]
                or not all(name is None or isinstance(name, str) for name in names)):
            raise ValueError("inconsistent")
        part = HnswPartition.restore(graph, names, np.asarray(state["order"], dtype=np.int64),
                                     next_order=int(state["next_order"]), params=state["params"])
        if len(part) != state["live"]:
            raise ValueError("an id is saved twice")
        return part, int(manifest["head"])
    except Exception:  # damaged, truncated, another version: rebuilt from the store instead
        _remove(folder, stem)
        return None


def delete(directory: str | os.PathLike[str], partition: str) -> None:
    """Delete a saved partition's files, half-written ones included (none saved: nothing to do)."""
    folder = Path(directory)
    if folder.is_dir():
        _remove(folder, _stem(partition))
