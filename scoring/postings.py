"""The postings of :class:`scoring.lexical.LexicalIndex`: for each term id, the document
slots that hold the term and its frequency there, kept cheap to write and to merge.

Postings live in a *sealed* segment (per-term slices of slot and tf arrays, CSC
style: term ``t`` owns ``indptr[t]:indptr[t + 1]``) plus a small *pending* segment
(per-term ``array('i')`` lists) that takes single writes. Pending is merged into
sealed when it outgrows ``max(20_000, sealed/4)`` postings, so a write never
triggers a full refit and merges cost amortised O(1) per posting. A removed
document's postings stay until the next merge drops them (the owner counts them
with :meth:`Postings.mark_dead`, and says at the merge which slots are alive); a
merge can also renumber slots and term ids, keeping their order.

    >>> postings = Postings()
    >>> postings.add_document(0, {7: 2, 3: 1})
    >>> postings.add_document(1, {3: 4})
    >>> [part.tolist() for part in postings.of(3)]
    [[0, 1], [1.0, 4.0]]
    >>> postings.merge(np.array([False, True]), 8, renumber=True).tolist()  # slot 0 removed
    [-1, -1, -1, 0, -1, -1, -1, -1]
    >>> [part.tolist() for part in postings.of(0)], postings.n_pending
    ([[0], [4.0]], 0)
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping

import numpy as np

__all__ = ["Postings"]

_MIN_MERGE = 20_000  # pending (or dead) postings before a merge, at the least

SortedPostings = tuple[np.ndarray, np.ndarray, np.ndarray]  # term ids, slots, tfs; sorted by term


class Postings:
    """Term id -> (slots, term frequencies), sealed + pending (see the module docstring).

    >>> postings = Postings()
    >>> postings.add_sorted(np.array([2, 2, 5], np.int32), np.array([0, 1, 1], np.int32),
    ...                     np.array([1, 3, 1], np.int32))
    >>> [part.tolist() for part in postings.of(2)], postings.of(4)[0].tolist()
    ([[0, 1], [1.0, 3.0]], [])
    """

    def __init__(self) -> None:
        self._indptr = np.zeros(1, np.int64)
        self._slots = np.zeros(0, np.int32)
        self._tfs = np.zeros(0, np.float32)
        self._pending: dict[int, tuple[array[int], array[int]]] = {}
        self._n_pending = 0
        self._n_dead = 0  # postings of removed slots not yet merged away

    @classmethod
    def from_arrays(cls, indptr: np.ndarray, slots: np.ndarray, tfs: np.ndarray) -> Postings:
        """A store whose sealed segment is these arrays (as :meth:`arrays` gives them;
        the caller checks that they are consistent).

        >>> Postings.from_arrays(**Postings().arrays()).of(0)[0].tolist()
        []
        """
        postings = cls()
        postings._indptr, postings._slots, postings._tfs = indptr, slots, tfs
        return postings

    def arrays(self) -> dict[str, np.ndarray]:
        """The sealed segment (not copied): ``indptr``, ``slots`` and ``tfs``; pending
        postings are not in it (:meth:`merge` first).

        >>> sorted(Postings().arrays())
        ['indptr', 'slots', 'tfs']
        """
        return {"indptr": self._indptr, "slots": self._slots, "tfs": self._tfs}

    @property
    def n_pending(self) -> int:
        """Postings in the pending segment.

        >>> postings = Postings(); postings.add_document(0, {1: 1, 2: 1}); postings.n_pending
        2
        """
        return self._n_pending

    def of(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """The slots holding term ``tid`` (int32, sealed ones first, each segment in
        slot order) and the term's frequency in each (float32); dead slots included."""
        if tid + 1 < len(self._indptr):
            lo, hi = self._indptr[tid], self._indptr[tid + 1]
            slots, tfs = self._slots[lo:hi], self._tfs[lo:hi]
        else:
            slots, tfs = self._slots[:0], self._tfs[:0]
        lists = self._pending.get(tid)
        if lists is not None:
            slots = np.concatenate((slots, np.array(lists[0], np.int32)))
            tfs = np.concatenate((tfs, np.array(lists[1], np.float32)))
        return slots, tfs

    def add_document(self, slot: int, counts: Mapping[int, int]) -> None:
        """Add a document's postings (term id -> tf) to the pending segment."""
        pending = self._pending
        for tid, tf in counts.items():
            lists = pending.get(tid)
            if lists is None:
                pending[tid] = (array("i", (slot,)), array("i", (tf,)))
            else:
                lists[0].append(slot)
                lists[1].append(tf)
        self._n_pending += len(counts)

    def add_sorted(self, terms: np.ndarray, slots: np.ndarray, tfs: np.ndarray) -> None:
        """Add postings given as int32 arrays sorted by term to the pending segment."""
        starts = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]]).tolist() if len(terms) else []
        ends = [*starts[1:], len(terms)][: len(starts)]
        for tid, lo, hi in zip(terms[starts].tolist(), starts, ends, strict=True):
            lists = self._pending.setdefault(tid, (array("i"), array("i")))
            lists[0].frombytes(slots[lo:hi].tobytes())
            lists[1].frombytes(tfs[lo:hi].tobytes())
        self._n_pending += len(terms)

    def mark_dead(self, count: int) -> None:
        """Count ``count`` postings whose document was removed (a merge drops them)."""
        self._n_dead += count

    def overflows(self, extra: int) -> bool:
        """Whether ``extra`` more pending postings would call for a merge.

        >>> Postings().overflows(20_000), Postings().overflows(20_001)
        (False, True)
        """
        return self._n_pending + extra > self._merge_limit()

    def needs_merge(self) -> bool:
        """Whether pending or dead postings have outgrown the merge limit."""
        return self._n_pending > self._merge_limit() or self._n_dead > self._merge_limit()

    def merge(self, alive: np.ndarray, n_terms: int, *, renumber: bool = False,
              extra: SortedPostings | None = None) -> np.ndarray | None:
        """Rebuild the sealed segment from sealed + pending (+ ``extra``: term ids, slots
        and tfs, sorted by term) postings, keeping those of the slots ``alive`` flags
        (one per slot) and ``n_terms`` term ids.

        With ``renumber``, the live slots become 0, 1, ... in their order, and so do
        the term ids that keep a posting; the answer is then each old term id's new
        one (-1 for a term left without postings), else ``None``.
        """
        counts = np.diff(self._indptr)
        parts_t: list[np.ndarray] = [np.repeat(np.arange(len(counts), dtype=np.int32), counts)]
        parts_s: list[np.ndarray] = [self._slots]
        parts_f: list[np.ndarray] = [self._tfs]
        pending = self._pending
        if pending:
            tids = sorted(pending)
            flat_s, flat_f = array("i"), array("i")
            for tid in tids:
                flat_s.extend(pending[tid][0])
                flat_f.extend(pending[tid][1])
            parts_t.append(np.repeat(np.array(tids, np.int32), [len(pending[t][0]) for t in tids]))
            parts_s.append(np.array(flat_s, np.int32))
            parts_f.append(np.array(flat_f, np.float32))
        if extra is not None:
            for part, value in zip((parts_t, parts_s, parts_f), extra, strict=True):
                part.append(value)
        terms, slots = np.concatenate(parts_t), np.concatenate(parts_s)
        tfs = np.concatenate(parts_f, dtype=np.float32, casting="unsafe")
        keep = alive[slots]
        if not keep.all():
            terms, slots, tfs = terms[keep], slots[keep], tfs[keep]
        order = np.argsort(terms, kind="stable")  # concatenated sorted runs: near-linear timsort
        terms, slots, tfs = terms[order], slots[order], tfs[order]
        new_tid = None
        if renumber:
            slots = (np.cumsum(alive) - 1)[slots]
            held = np.bincount(terms, minlength=n_terms) > 0
            new_tid = np.where(held, np.cumsum(held) - 1, -1)
            terms, n_terms = new_tid[terms], int(held.sum())
        indptr = np.zeros(n_terms + 1, np.int64)
        np.cumsum(np.bincount(terms, minlength=n_terms), out=indptr[1:])
        self._indptr, self._slots, self._tfs = indptr, slots.astype(np.int32), tfs
        self._pending, self._n_pending, self._n_dead = {}, 0, 0
        return new_tid

    def _merge_limit(self) -> int:
        return max(_MIN_MERGE, len(self._slots) // 4)
