"""Saved lexical indexes, so that reopening a large memory does not re-analyse every text.

Building a user's BM25 index from the store means tokenising and stemming every
document: about 1.3 s per 100,000 facts. A process that closes a large partition
(at least :data:`SNAPSHOT_MIN_DOCS` documents) it has built or changed saves it in
``index_snapshots`` (JSON for the keys and terms, one BLOB of little-endian numpy
arrays — no pickle), tagged with the journal position it reflects (:mod:`tiers.storage.journal`).
The next process loads it and replays the journal entries written since, instead
of rebuilding. A snapshot is not used (and the index is built from the store as
before) when its format or analyzer differ, when a reset of its user was journalled
since, when the journal was pruned past it, or when it is damaged.

Like every index it is derived: deleted with its user, never exported, and erased
when the user's journal is reset (a forget), so no removed text survives in it.

    >>> from scoring.lexical import LexicalIndex
    >>> index = LexicalIndex(); index.add_many([("f1", "I live in Lisbon")])
    >>> restored = decode(*encode(index.state()))
    >>> [m.key for m in LexicalIndex.from_state(restored).search("Lisbon")]
    ['f1']
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np

from scoring.lexical import LexicalState
from scoring.text import analyze
from tiers.storage.backend import Storage

__all__ = ["SNAPSHOT_MIN_DOCS", "encode", "decode", "save", "load", "delete"]

#: Partitions smaller than this rebuild fast enough (about 0.25 s) to need no snapshot.
SNAPSHOT_MIN_DOCS = 20_000
_FORMAT = 1
_DTYPES = {"doc_len": "<f8", "alive": "|b1", "uniq": "<i4", "indptr": "<i8", "post_slot": "<i4", "post_tf": "<f4"}
# A change to tokenising or stemming changes these terms, and so invalidates every snapshot.
_PROBE = ("The user's cats aren't living with their grandparents; allergies to 2 peanuts, "
          "O'Brien's café in São Paulo, running ran runs, economic economy, don't won't I'm")
ANALYZER_TAG = hashlib.blake2b(" ".join(analyze(_PROBE)).encode(), digest_size=8).hexdigest()


def encode(state: LexicalState) -> tuple[str, bytes]:
    """A state as ``(JSON header, BLOB)``: keys, terms and array layout in the header.

    >>> from scoring.lexical import LexicalIndex
    >>> header, blob = encode(LexicalIndex().state()); json.loads(header)["format"], len(blob)
    (1, 8)
    """
    parts, layout = [], []
    for name, dtype in _DTYPES.items():
        data = np.ascontiguousarray(state.arrays[name], dtype=dtype).tobytes()
        layout.append([name, len(data)])
        parts.append(data)
    header = {"format": _FORMAT, "analyzer": ANALYZER_TAG, "k1": state.k1, "b": state.b,
              "total_len": int(state.total_len), "keys": state.keys, "vocab": state.vocab, "layout": layout}
    return json.dumps(header, separators=(",", ":")), b"".join(parts)


def decode(header: str, blob: bytes) -> LexicalState:
    """The state :func:`encode` wrote; ``ValueError`` when it is not one of ours (or damaged).

    >>> decode('{"format": 99}', b"")
    Traceback (most recent call last):
    ValueError: index snapshot: format or analyzer differ (format 99)
    >>> decode('[' * 100_000, b"")
    Traceback (most recent call last):
    ValueError: index snapshot: the header is not JSON
    """
    try:
        meta = json.loads(header)
    except (TypeError, ValueError, RecursionError):  # not text, not JSON, nested too deeply
        raise ValueError("index snapshot: the header is not JSON") from None
    if not isinstance(meta, dict) or not isinstance(blob, bytes):
        raise ValueError("index snapshot: the header is not an object, or the arrays not bytes")
    if meta.get("format") != _FORMAT or meta.get("analyzer") != ANALYZER_TAG:
        raise ValueError(f"index snapshot: format or analyzer differ (format {meta.get('format')!r:.40})")
    layout = meta.get("layout")
    if not isinstance(layout, list) or not all(
            isinstance(part, list) and len(part) == 2 and part[0] in _DTYPES and _count(part[1]) is not None
            and part[1] % np.dtype(_DTYPES[part[0]]).itemsize == 0 for part in layout) \
            or sorted(part[0] for part in layout) != sorted(_DTYPES):
        raise ValueError("index snapshot: the array layout is damaged")
    arrays, offset = {}, 0
    for name, size in layout:
        if offset + size > len(blob):
            raise ValueError(f"index snapshot: array {name!r} does not fit the stored bytes")
        arrays[name] = np.frombuffer(blob, dtype=_DTYPES[name], count=size // np.dtype(_DTYPES[name]).itemsize,
                                     offset=offset).copy()  # writable, native-owned
        offset += size
    if offset != len(blob):
        raise ValueError("index snapshot: arrays and stored bytes differ")
    keys, vocab = meta.get("keys"), meta.get("vocab")
    if not isinstance(keys, list) or not isinstance(vocab, list) \
            or not all(k is None or isinstance(k, str) for k in keys) or not all(isinstance(t, str) for t in vocab):
        raise ValueError("index snapshot: keys and terms must be strings")
    total_len, k1, b = _count(meta.get("total_len")), _number(meta.get("k1")), _number(meta.get("b"))
    if total_len is None or k1 is None or b is None:
        raise ValueError("index snapshot: total_len, k1 and b must be finite numbers")
    return LexicalState(keys, vocab, arrays, total_len, k1, b)


def _count(value: Any) -> int | None:
    """``value`` if it is an int >= 0 (not a bool)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _number(value: Any) -> float | None:
    """``value`` as a finite float, if it is a number (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None


def save(storage: Storage, user_id: str, kind: str, state: LexicalState, *, head: int) -> None:
    """Store the user's partition as of journal position ``head`` (call inside a write).

    >>> from scoring.lexical import LexicalIndex
    >>> store = Storage(None)
    >>> with store.atomic():
    ...     save(store, "ada", "facts", LexicalIndex().state(), head=0)
    >>> load(store, "ada", "facts")[1]
    0
    """
    header, blob = encode(state)
    storage.execute("INSERT INTO index_snapshots (user_id, kind, head, header, arrays) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (user_id, kind) DO UPDATE SET head = excluded.head, header = excluded.header, "
                    "arrays = excluded.arrays", [user_id, kind, head, header, blob])


def load(storage: Storage, user_id: str, kind: str) -> tuple[LexicalState, int] | None:
    """The user's saved partition and its journal position; ``None`` when there is
    none or it cannot be used (see :func:`decode`)."""
    row = storage.execute("SELECT header, arrays, head FROM index_snapshots WHERE user_id = ? AND kind = ?",
                          [user_id, kind]).fetchone()
    if row is None:
        return None
    try:
        return decode(row[0], row[1]), int(row[2])
    except (ValueError, KeyError, TypeError):
        return None


def delete(storage: Storage, user_id: str, kind: str) -> None:
    """Drop the user's saved partition of this kind (call inside a write)."""
    storage.execute("DELETE FROM index_snapshots WHERE user_id = ? AND kind = ?", [user_id, kind])
