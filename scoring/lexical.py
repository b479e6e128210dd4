"""An incremental Okapi BM25 index over string keys.

    >>> index = LexicalIndex()
    >>> index.add_many([("f1", "I live in Lisbon"), ("f2", "Maria lives in Porto")])
    >>> [m.key for m in index.search("where does Maria live?")]
    ['f2', 'f1']

Scoring, with ``N`` live documents, ``df`` the live documents holding the term,
``dl`` the document's length in terms and ``avgdl`` the mean over live documents::

    idf(t)     = ln(1 + (N - df + 0.5) / (df + 0.5))
    score(d,q) = Σ over distinct query terms t in d of
                 idf(t) · tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl))

A repeated query word counts once. ``relevance`` divides the score by the
query's upper bound ``Σ idf(t)·(k1+1)`` (the limit of the score as tf grows) over
all distinct query terms, where a term that no live document holds counts with
the idf of a term in no document. So relevance lies in [0, 1] and says how much
of the query a document answers: a document matching only a query's common word
(a speaker's name, say) stays low, in every index. A one-term query matched with
tf = 1 in a document of average length gets 1/(k1+1).

Layout: documents get append-only integer *slots* (a re-added key gets a new
one); their postings are kept by :class:`scoring.postings.Postings`, sealed plus
pending, merged on a schedule that keeps writes amortised O(1) per posting.
Removal only clears the slot's ``alive`` flag; document frequencies count live
postings at query time and dead postings are dropped at the next merge (which
also renumbers slots, keeping their order, once most of them are dead). Ties
rank the older slot first.

Not thread-safe: callers serialise access.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from itertools import chain, starmap
from numbers import Integral, Real

import numpy as np

from scoring.errors import invalid, wrong_type
from scoring.lexical_records import LexicalMatch, LexicalState, TokenIds
from scoring.postings import Postings, SortedPostings
from scoring.text import analyze, raw_token_stream, raw_tokens

__all__ = ["LexicalIndex", "LexicalMatch", "LexicalState"]

_MIN_RENUMBER = 1024  # dead slots before a merge renumbers, at the least


def _check_str(field: str, value: object) -> None:
    if not isinstance(value, str):
        raise wrong_type(field, "str", value)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best scores, best first; equal scores keep index order."""
    n = len(scores)
    if k >= n:
        return np.argsort(-scores, kind="stable")
    kth = np.partition(scores, n - k)[n - k]
    sel = np.flatnonzero(scores >= kth)
    return sel[np.argsort(-scores[sel], kind="stable")][:k]


_FEW = 4  # up to this many documents, add_many adds them one by one (8 µs each against 60 µs for one in bulk)


class LexicalIndex:
    """Incremental BM25 over ``key -> text`` documents (see the module docstring).

    >>> index = LexicalIndex(k1=1.2, b=0.75)
    >>> index.add("a", "I'm allergic to peanuts")
    >>> index.search("peanut allergy")[0].key
    'a'
    >>> index.remove("a"), len(index), index.search("peanuts")
    (True, 0, [])
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75,
                 analyzer: Callable[[str], list[str]] = analyze) -> None:
        for name, value in (("k1", k1), ("b", b)):
            if isinstance(value, bool) or not isinstance(value, Real):
                raise wrong_type(name, "float", value)
        if not (math.isfinite(k1) and k1 >= 0):
            raise invalid("k1", f"must be a finite number >= 0, got {k1}")
        if not 0 <= b <= 1:
            raise invalid("b", f"must be between 0 and 1, got {b}")
        if not callable(analyzer):
            raise wrong_type("analyzer", "callable", analyzer)
        self._k1, self._b, self._analyzer = float(k1), float(b), analyzer
        self.clear()

    @property
    def k1(self) -> float:
        """BM25 term-frequency saturation.

        >>> LexicalIndex(k1=1.5).k1
        1.5
        """
        return self._k1

    @property
    def b(self) -> float:
        """BM25 length normalisation (0 = none, 1 = full).

        >>> LexicalIndex(b=0.5).b
        0.5
        """
        return self._b

    def clear(self) -> None:
        """Drop every document and the vocabulary.

        >>> index = LexicalIndex(); index.add("a", "x"); index.clear(); len(index)
        0
        """
        self._key_slot: dict[str, int] = {}
        self._slot_key: list[str | None] = []
        self._doc_len = np.zeros(0, np.float64)
        self._alive = np.zeros(0, np.bool_)
        self._uniq = np.zeros(0, np.int32)  # distinct terms per slot (for dead-posting counts)
        self._total_len = 0
        self._vocab: dict[str, int] = {}
        self._token_ids = TokenIds(self._vocab)
        self._postings = Postings()

    def __len__(self) -> int:
        return len(self._key_slot)

    def __contains__(self, key: object) -> bool:
        return key in self._key_slot

    def add(self, key: str, text: str) -> None:
        """Index ``text`` under ``key``, replacing what the key held.

        >>> index = LexicalIndex(); index.add("a", "cats"); index.add("a", "dogs")
        >>> [m.key for m in index.search("cats")], len(index)
        ([], 1)
        """
        _check_str("key", key)
        _check_str("text", text)
        if self._analyzer is analyze:
            ids = list(chain.from_iterable(map(self._token_ids.__getitem__, raw_tokens(text))))
        else:
            ids = self._term_ids([text])[0].tolist()
        counts = Counter(ids)
        self._grow(1)
        self._drop(key)
        slot = len(self._slot_key)
        self._slot_key.append(key)
        self._key_slot[key] = slot
        self._doc_len[slot], self._alive[slot], self._uniq[slot] = len(ids), True, len(counts)
        self._total_len += len(ids)
        self._postings.add_document(slot, counts)
        self._maybe_merge()

    def add_many(self, items: Iterable[tuple[str, str]]) -> None:
        """Index many ``(key, text)`` pairs at once (the fast bulk path).

        Same result as calling :meth:`add` on each pair in order (a key given
        twice keeps its last text). All pairs are validated before anything changes.

        >>> index = LexicalIndex(); index.add_many([("a", "red fox"), ("b", "blue fox")])
        >>> sorted(m.key for m in index.search("fox"))
        ['a', 'b']
        """
        batch: dict[str, str] = {}
        pop = batch.pop
        for item in items:
            if not isinstance(item, tuple | list) or len(item) != 2:
                raise wrong_type("items", "(key, text) pairs", item)
            key, text = item
            if not isinstance(key, str) or not isinstance(text, str):
                _check_str("key", key)
                _check_str("text", text)
            pop(key, None)
            batch[key] = text
        if not batch:
            return
        if len(batch) <= _FEW:  # a turn's message or fact: the array set-up would cost more than it saves
            for key, text in batch.items():
                self.add(key, text)
            return
        keys, n = list(batch), len(batch)
        ids, lengths = self._term_ids(list(batch.values()))
        pairs, tf = np.unique(ids * n + np.repeat(np.arange(n, dtype=np.int64), lengths),
                              return_counts=True)
        terms, docs = (pairs // n).astype(np.int32), pairs % n
        uniq = np.bincount(docs, minlength=n)
        # Everything above is side-effect free (bar new vocabulary ids); now mutate.
        self._grow(n)
        for key in [k for k in keys if k in self._key_slot]:
            self._drop(key)
        base = len(self._slot_key)
        self._slot_key.extend(keys)
        self._key_slot.update(zip(keys, range(base, base + n), strict=True))
        self._doc_len[base:base + n] = lengths
        self._alive[base:base + n] = True
        self._uniq[base:base + n] = uniq
        self._total_len += int(lengths.sum())
        slots, tf = (docs + base).astype(np.int32), tf.astype(np.int32)
        if self._postings.overflows(len(terms)):
            self._merge((terms, slots, tf))
            return
        self._postings.add_sorted(terms, slots, tf)
        self._maybe_merge()

    def remove(self, key: str) -> bool:
        """Forget ``key``; ``True`` if it was indexed.

        >>> index = LexicalIndex(); index.add("a", "x"); index.remove("a"), index.remove("a")
        (True, False)
        """
        _check_str("key", key)
        removed = self._drop(key)
        if removed:
            self._maybe_merge()
        return removed

    def compact(self) -> None:
        """Merge pending postings into the sealed segment and drop dead ones now.

        Never needed for correctness (writes merge on their own schedule); handy
        after a large batch of removals.

        >>> index = LexicalIndex(); index.add("a", "x"); index.compact(); len(index)
        1
        """
        self._merge(None)

    def search(self, query: str, limit: int | None = 10, *,
               keys_allowed: Callable[[str], bool] | None = None,
               keys: Collection[str] | None = None) -> list[LexicalMatch]:
        """The best ``limit`` documents for ``query`` (all matches when ``None``),
        best first; only keys for which ``keys_allowed(key)`` is true, when given, and only
        the documents named in ``keys``, when given (scored as in the whole index: BM25's
        statistics are the index's; faster than ``keys_allowed`` for a few keys among many
        matches).

        >>> index = LexicalIndex(); index.add_many([("a", "green tea"), ("b", "green apple")])
        >>> [m.key for m in index.search("green", keys_allowed=lambda k: k != "a")]
        ['b']
        >>> [m.key for m in index.search("green", keys=["b", "gone"])]
        ['b']
        >>> index.search("nothing here")
        []
        """
        _check_str("query", query)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, Integral)):
            raise wrong_type("limit", "int or None", limit)
        if limit is not None and limit < 1:
            raise invalid("limit", f"must be at least 1, got {limit}")
        if keys_allowed is not None and not callable(keys_allowed):
            raise wrong_type("keys_allowed", "callable or None", keys_allowed)
        if keys is not None and (isinstance(keys, str) or not isinstance(keys, Collection)):
            raise wrong_type("keys", "collection of str or None", keys)
        n_live = len(self._key_slot)
        if not n_live:
            return []
        only: np.ndarray | None = None
        if keys is not None:  # the named documents' slots, ascending (as candidates are)
            key_slot = self._key_slot
            only = np.unique(np.fromiter((key_slot[k] for k in keys if isinstance(k, str) and k in key_slot),
                                         np.int64))
            if not len(only):
                return []
        k1, b, avgdl = self._k1, self._b, self._total_len / n_live
        some_dead = n_live != len(self._slot_key)  # a removed document's slot holds None (see _drop)
        names: list[str] = []
        slot_parts: list[np.ndarray] = []
        weight_parts: list[np.ndarray] = []
        bound = 0.0
        # A query term no live document holds still counts in the bound, at the idf of a
        # term in no document: matching only the common words of a query is weak evidence.
        absent_bound = math.log(1.0 + (n_live + 0.5) / 0.5) * (k1 + 1.0)
        for term in dict.fromkeys(self._analyzer(query)):
            tid = self._vocab.get(term)
            if tid is None:
                bound += absent_bound
                continue
            slots, tfs = self._postings.of(tid)
            if some_dead:  # else every slot a posting names is live
                alive = self._alive[slots]
                if not alive.all():
                    slots, tfs = slots[alive], tfs[alive]
            df = len(slots)
            if not df:
                bound += absent_bound
                continue
            idf = math.log(1.0 + (n_live - df + 0.5) / (df + 0.5))
            tf = tfs.astype(np.float64)
            # idf (k1 + 1) tf / (tf + k1 (1 - b + b len / avgdl)), in place: the same operations, in the same order
            norm = self._doc_len[slots] * b
            norm /= avgdl
            norm += 1.0 - b
            norm *= k1
            norm += tf
            weight = tf * (idf * (k1 + 1.0))
            weight /= norm
            names.append(term)
            slot_parts.append(slots)
            weight_parts.append(weight)
            bound += idf * (k1 + 1.0)
        if not names:
            return []
        all_slots = np.concatenate(slot_parts)
        n_slots = len(self._slot_key)
        weights = np.concatenate(weight_parts)
        if len(all_slots) * 8 < n_slots:  # few postings: sort them instead of a dense pass
            cand, post_at = np.unique(all_slots, return_inverse=True)  # post_at: posting -> candidate
            scores, space = np.bincount(post_at, weights=weights), None
        else:
            dense = np.bincount(all_slots, weights=weights, minlength=n_slots)
            cand = np.flatnonzero(dense != 0)  # on a bool array: 5x faster than on the floats
            scores, post_at, space = dense[cand], all_slots, cand  # post_at: posting -> slot
        if only is not None:  # the candidates among the named slots (both ascending), in their order
            at = np.searchsorted(cand, only)
            inside = at < len(cand)
            at = at[inside]
            keep = at[cand[at] == only[inside]]
            chosen = keep[self._choose(scores[keep], cand[keep], limit, keys_allowed)]
        else:
            chosen = self._choose(scores, cand, limit, keys_allowed)
        # Which query terms each chosen document matched (postings are in term order).
        where = np.full(len(cand) if space is None else n_slots, -1, np.int64)
        where[chosen if space is None else space[chosen]] = np.arange(len(chosen))
        rank = where[post_at]
        term_of = np.repeat(np.arange(len(names)), [len(p) for p in slot_parts])
        hit = rank >= 0
        matched: list[list[str]] = [[] for _ in chosen]
        for r, t in zip(rank[hit].tolist(), term_of[hit].tolist(), strict=True):
            matched[r].append(names[t])
        slot_key = self._slot_key
        best = scores[chosen]  # relevance: min(1, score / bound), elementwise as Python would divide
        return list(starmap(LexicalMatch, zip(map(slot_key.__getitem__, cand[chosen].tolist()), best.tolist(),
                                              np.minimum(best / bound, 1.0).tolist(), map(tuple, matched),
                                              strict=True)))  # a live slot: its key is a str

    # -- snapshots -------------------------------------------------------------------------

    def state(self) -> LexicalState:
        """Everything the index holds, as plain lists and numpy arrays (pending postings
        merged first), for :meth:`from_state`; only for the default analyzer.

        >>> index = LexicalIndex(); index.add_many([("a", "red fox"), ("b", "blue fox")])
        >>> copy = LexicalIndex.from_state(index.state())
        >>> [m.key for m in copy.search("red fox")] == [m.key for m in index.search("red fox")]
        True
        """
        if self._analyzer is not analyze:
            raise invalid("analyzer", "only an index with the default analyzer has a state to save")
        self._merge(None)
        n = len(self._slot_key)
        vocab = [""] * len(self._vocab)
        for term, tid in self._vocab.items():
            vocab[tid] = term
        sealed = self._postings.arrays()
        arrays = {"doc_len": self._doc_len[:n], "alive": self._alive[:n], "uniq": self._uniq[:n],
                  "indptr": sealed["indptr"], "post_slot": sealed["slots"], "post_tf": sealed["tfs"]}
        return LexicalState(list(self._slot_key), vocab, {k: v.copy() for k, v in arrays.items()},
                            self._total_len, self._k1, self._b)

    @classmethod
    def from_state(cls, state: LexicalState) -> LexicalIndex:
        """An index holding what :meth:`state` captured (checked for consistency:
        a damaged state raises ``MemoryValueError`` naming the part).

        >>> LexicalIndex.from_state(LexicalIndex().state()).search("anything")
        []
        """
        index = cls(k1=state.k1, b=state.b)
        a = state.arrays
        n, n_terms = len(state.keys), len(state.vocab)
        lengths = {"doc_len": n, "alive": n, "uniq": n, "indptr": n_terms + 1}
        for name, size in lengths.items():
            if len(a[name]) != size:
                raise invalid(f"state.{name}", f"holds {len(a[name])} values for {size} expected")
        postings = len(a["post_slot"])
        if len(a["post_tf"]) != postings or a["indptr"][0] != 0 or a["indptr"][-1] != postings \
                or np.any(np.diff(a["indptr"]) < 0) or (postings and not 0 <= a["post_slot"].min() <= a[
                    "post_slot"].max() < max(n, 1)):
            raise invalid("state.postings", "are inconsistent with the documents and the vocabulary")
        index._slot_key = list(state.keys)
        index._key_slot = {key: slot for slot, key in enumerate(state.keys) if key is not None}
        index._vocab = {term: tid for tid, term in enumerate(state.vocab)}
        index._token_ids = TokenIds(index._vocab)
        index._doc_len, index._alive, index._uniq = a["doc_len"], a["alive"], a["uniq"]
        index._postings = Postings.from_arrays(a["indptr"], a["post_slot"], a["post_tf"])
        index._total_len = int(state.total_len)
        return index

    def _choose(self, scores: np.ndarray, cand: np.ndarray, limit: int | None,
                keys_allowed: Callable[[str], bool] | None) -> np.ndarray:
        want = len(scores) if limit is None else int(limit)
        if keys_allowed is None:
            return _top(scores, want)
        chosen: list[int] = []
        done, k = 0, max(4 * want, 64)
        while done < len(scores) and len(chosen) < want:
            ranked = _top(scores, k)[done:].tolist()
            for i in ranked:
                key = self._slot_key[int(cand[i])]
                if key is not None and keys_allowed(key):  # candidates are live slots: never None
                    chosen.append(i)
                    if len(chosen) == want:
                        break
            done, k = done + len(ranked), k * 4
        return np.array(chosen, np.int64)

    def _term_ids(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The texts' term ids, concatenated, and each text's length (new terms join the
        vocabulary; nothing else changes)."""
        if self._analyzer is analyze:  # fused fast path: one regex pass, one cached lookup per token
            stream = chain.from_iterable(map(self._token_ids.__getitem__, raw_token_stream(texts)))
            flat = np.array(list(stream), np.int64)
            breaks = np.flatnonzero(flat < 0)
            return flat[flat >= 0], np.diff(np.r_[-1, breaks, len(flat)]) - 1
        token_lists = [self._analyzer(text) for text in texts]
        terms = list(chain.from_iterable(token_lists))
        vocab = self._vocab
        for term in sorted(set(terms) - vocab.keys()):
            vocab[term] = len(vocab)
        lengths = np.fromiter(map(len, token_lists), np.int64, len(token_lists))
        return np.array(list(map(vocab.__getitem__, terms)), np.int64), lengths

    def _drop(self, key: str) -> bool:
        slot = self._key_slot.pop(key, None)
        if slot is None:
            return False
        self._alive[slot] = False
        self._slot_key[slot] = None
        self._total_len -= int(self._doc_len[slot])
        self._postings.mark_dead(int(self._uniq[slot]))
        return True

    def _grow(self, extra: int) -> None:
        need = len(self._slot_key) + extra
        if need > len(self._doc_len):
            self._resize(max(need, 2 * len(self._doc_len), 1024), slice(None))

    def _resize(self, cap: int, take: slice | np.ndarray) -> None:
        for name in ("_doc_len", "_alive", "_uniq"):
            old = getattr(self, name)[take]
            setattr(self, name, np.zeros(cap, old.dtype))
            getattr(self, name)[: len(old)] = old

    def _maybe_merge(self) -> None:
        if self._postings.needs_merge():
            self._merge(None)

    def _merge(self, extra: SortedPostings | None) -> None:
        """Merge the postings (with ``extra``, term-sorted ones) and, once most slots are
        dead, renumber the live ones and the terms they hold, keeping their order."""
        n_slots, n_live = len(self._slot_key), len(self._key_slot)
        alive = self._alive[:n_slots]
        renumber = n_slots - n_live > max(_MIN_RENUMBER, n_live)  # mostly dead: renumber, shrink vocab
        new_tid = self._postings.merge(alive, len(self._vocab), renumber=renumber, extra=extra)
        if new_tid is not None:
            live = np.flatnonzero(alive)
            keys = [self._slot_key[i] for i in live.tolist()]
            self._slot_key = keys
            self._key_slot = {key: i for i, key in enumerate(keys) if key is not None}  # all live
            self._resize(max(1024, 2 * len(live)), live)
            ids = new_tid.tolist()
            vocab = {term: ids[tid] for term, tid in self._vocab.items() if ids[tid] >= 0}
            self._vocab, self._token_ids = vocab, TokenIds(vocab)
