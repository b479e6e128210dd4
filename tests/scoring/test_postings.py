import doctest

import numpy as np

import scoring.postings
from scoring.postings import Postings


def test_doctests_pass():
    assert doctest.testmod(scoring.postings).failed == 0


def lists(postings, tid):
    return [part.tolist() for part in postings.of(tid)]


def test_merge_joins_sealed_pending_and_extra_postings_in_slot_order():
    postings = Postings()
    postings.add_document(0, {1: 2, 4: 1})
    postings.merge(np.ones(1, bool), 5)
    postings.add_document(1, {4: 3})
    extra = (np.array([1, 4], np.int32), np.array([2, 2], np.int32), np.array([5, 6], np.int32))
    assert postings.merge(np.ones(3, bool), 5, extra=extra) is None
    assert lists(postings, 1) == [[0, 2], [2.0, 5.0]]
    assert lists(postings, 4) == [[0, 1, 2], [1.0, 3.0, 6.0]]
    assert postings.n_pending == 0 and len(postings.arrays()["indptr"]) == 6


def test_merge_drops_dead_slots_and_renumbers_slots_and_terms():
    postings = Postings()
    for slot, counts in enumerate([{0: 1, 2: 1}, {2: 2}, {3: 1}]):
        postings.add_document(slot, counts)
    postings.mark_dead(2)
    new_tid = postings.merge(np.array([False, True, True]), 4, renumber=True)
    assert new_tid.tolist() == [-1, -1, 0, 1]
    assert lists(postings, 0) == [[0], [2.0]]
    assert lists(postings, 1) == [[1], [1.0]]


def test_merge_schedule(monkeypatch):
    monkeypatch.setattr(scoring.postings, "_MIN_MERGE", 2)
    postings = Postings()
    postings.add_document(0, {0: 1, 1: 1})
    assert not postings.needs_merge() and postings.overflows(1)
    postings.mark_dead(3)
    assert postings.needs_merge()
