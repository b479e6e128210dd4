"""Saved approximate vector partitions beside a SQLite file, so that reopening a large memory
maps its vectors and binary codes instead of reading 460 MB of embeddings back from the database
and encoding them again (seconds at 300,000 vectors; mapping them takes milliseconds).

A partition is saved as four files named by a hash of its name in ``<memory file>.vectors/``: its
float32 vectors (``.f32``) and their codes (``.codes``, :mod:`tiers.indexes.binary_codes`) as raw
row-major arrays, a JSON file of its ids and ranks, all three tagged with a random generation,
then a small manifest naming that generation, the journal position the partition reflects
(:mod:`tiers.storage.journal`) and its ``tag`` (kind, model, dimensions), replaced atomically last — so
a crash leaves either the old set or the new one (and perhaps a ``.tmp`` file, deleted with the
partition), never a mix. Whatever a load cannot read, finds inconsistent, or finds of another
format or tag, is deleted and the partition is built from the store as before. Raw arrays and
JSON only: no pickle.

A loaded partition's arrays are memory-mapped copy-on-write: pages are read when a search touches
them (a scan reads every code, the re-scoring only the rows it scores), a change stays private to
the process, and a partition that grows is copied into memory. A file is never written after it
is complete (a save writes a new generation), so a mapping never sees a file change under it;
a deleted file stays readable by the mappings that hold it.

A removed vector is overwritten in the matrix (:class:`~tiers.indexes.vector_partition.Partition`), so a
saved file holds no removed item's vector. :class:`tiers.indexes.vectors.PartitionedVectors` saves only
under the database's write lock, and a forget deletes the user's saved files inside its own
write, before it commits: once a forget returns, no saved file holds a forgotten vector, even
after a SIGKILL.

    >>> import tempfile
    >>> vectors = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    >>> vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    >>> part = Partition.adopt([f"v{i}" for i in range(50)], vectors); part.approximate(True)
    >>> folder = tempfile.mkdtemp(); save(folder, "facts/ada", part, head=7, tag="t")
    >>> again, head = load(folder, "facts/ada", "t"); again.search(vectors[3], 1, depth=5)[0][0], len(again), head
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
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from tiers.indexes import binary_codes
from tiers.indexes.vector_partition import Partition

__all__ = ["save", "load", "move", "delete"]

_FORMAT = 3  # 2: faiss HNSW graphs (their files are deleted at load, and the partition rebuilt)


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


def _atomic(path: Path, chunks: Iterable[bytes | memoryview]) -> None:
    """Write ``chunks`` to a temporary file beside ``path``, fsync it, then move it into place
    (a failure deletes the temporary file)."""
    temporary = _temporary(path)
    try:
        with open(temporary, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def _slices(array: np.ndarray) -> Iterator[memoryview]:
    """``array``'s bytes, 64 MB at a time (no whole-array copy)."""
    step = max(1, (64 << 20) // max(1, array[:1].nbytes))
    for start in range(0, len(array), step):
        yield np.ascontiguousarray(array[start:start + step]).data


def _write(path: Path, text: str) -> None:
    _atomic(path, [text.encode("utf-8")])


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


def save(directory: str | os.PathLike[str], partition: str, part: Partition, *, head: int, tag: str) -> None:
    """Save ``part`` (approximate: it has codes) as ``partition`` in ``directory`` (created if
    missing), as of journal position ``head``."""
    if part.codes is None:
        raise ValueError("only a partition with binary codes is saved")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    stem, generation = _stem(partition), secrets.token_hex(6)
    size = len(part)
    _atomic(folder / f"{stem}.{generation}.f32", _slices(part.matrix[:size]))
    _atomic(folder / f"{stem}.{generation}.codes", _slices(part.codes[:size]))
    state = {"format": _FORMAT, "partition": partition, "dim": part.dim, "bits": binary_codes.BITS,
             "seed": binary_codes.SEED, "ids": part.ids, "order": part.order[:size].tolist(),
             "next_order": part.next_order}
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


def _mapped(path: Path, dtype: type, shape: tuple[int, int]) -> np.ndarray:
    if path.stat().st_size != shape[0] * shape[1] * np.dtype(dtype).itemsize:
        raise ValueError(f"{path.name}: not the size its ids say")
    if not shape[0]:
        return np.empty(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="c", shape=shape)


def load(directory: str | os.PathLike[str], partition: str, tag: str) -> tuple[Partition, int] | None:
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
        ids, order, dim = state["ids"], state["order"], state["dim"]
        if state["partition"] != partition or state["bits"] != binary_codes.BITS \
                or state["seed"] != binary_codes.SEED or not isinstance(dim, int) or dim < 1 \
                or len(order) != len(ids) or not all(isinstance(key, str) for key in ids) \
                or len(set(ids)) != len(ids):
            raise ValueError("inconsistent")
        matrix = _mapped(folder / f"{stem}.{generation}.f32", np.float32, (len(ids), dim))
        codes = _mapped(folder / f"{stem}.{generation}.codes", np.uint8, (len(ids), binary_codes.BITS // 8))
        ranks = np.asarray(order, dtype=np.int64)
        next_order = int(state["next_order"])
        if len(ranks) and next_order <= int(ranks.max()):
            raise ValueError("inconsistent ranks")
        sample = np.unique(np.linspace(0, len(ids) - 1, num=min(len(ids), 256)).astype(np.int64))
        if not np.array_equal(binary_codes.encode(matrix[sample]), codes[sample]):
            raise ValueError("vectors and codes disagree")  # a damaged file
        return Partition.adopt(ids, matrix, ranks, next_order=next_order, codes=codes), int(manifest["head"])
    except Exception:  # damaged, truncated, another version: rebuilt from the store instead
        _remove(folder, stem)
        return None


def delete(directory: str | os.PathLike[str], partition: str) -> None:
    """Delete a saved partition's files, half-written ones included (none saved: nothing to do)."""
    folder = Path(directory)
    if folder.is_dir():
        _remove(folder, _stem(partition))
