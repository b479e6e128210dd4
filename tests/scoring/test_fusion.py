import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoring.fusion
from scoring.decay import recency
from scoring.fusion import Fuser, dense_relevance, diversify, fuse, hybrid_relevance, lexical_scale


def test_doctests():
    assert doctest.testmod(scoring.fusion).failed == 0


unit = st.floats(0.0, 1.0)
pairs = st.lists(st.tuples(st.floats(0.01, 50.0), st.floats(0.01, 1.0)), min_size=1, max_size=20)


@given(pairs, st.floats(0.01, 1.0))
def test_lexical_scale_makes_every_relevance_at_most_one(matches, floor):
    scale = lexical_scale(matches, floor=floor)
    assert all(score / scale <= 1.0 + 1e-9 for score, _ in matches)
    assert max(score for score, _ in matches) / scale == 1.0 or scale > max(score for score, _ in matches)


@given(pairs, st.floats(0.01, 1.0))
def test_lexical_scale_never_lifts_a_match_above_its_share_over_the_floor(matches, floor):
    scale = lexical_scale(matches, floor=floor)
    for score, relevance in matches:
        assert score / scale <= relevance / floor + 1e-9


def test_lexical_scale_of_nothing_is_zero():
    assert lexical_scale([], floor=0.25) == 0.0


@given(unit, unit, unit, st.floats(0.1, 2.0))
def test_fuse_is_monotone_in_relevance(relevance, importance, recency, tier_weight):
    low = fuse(relevance=relevance * 0.5, importance=importance, recency=recency, tier_weight=tier_weight)
    high = fuse(relevance=relevance, importance=importance, recency=recency, tier_weight=tier_weight)
    assert low.score <= high.score


@given(st.floats(-1.0, 1.0), unit, unit)
def test_dense_and_hybrid_relevance_stay_in_unit_interval(cosine, lexical, weight):
    dense = dense_relevance(cosine, floor=0.1, ceiling=0.7)
    assert 0.0 <= dense <= 1.0
    assert 0.0 <= hybrid_relevance(lexical, dense, lexical_weight=weight) <= 1.0 + 1e-12


def _eager_diversify(scores, terms, *, limit, diversity, overlap=0.5):
    """The plain greedy MMR loop, the reference the lazy implementation must match."""
    remaining = list(range(len(scores)))
    redundancy = [0.0] * len(scores)
    picked = []
    while remaining and len(picked) < limit:
        best = max(remaining, key=lambda i: (scores[i] * (1.0 - diversity * redundancy[i]), -i))
        picked.append((best, scores[best] * (1.0 - diversity * redundancy[best])))
        remaining.remove(best)
        for i in remaining:
            union = len(terms[i] | terms[best])
            if union:
                jaccard = len(terms[i] & terms[best]) / union
                redundancy[i] = max(redundancy[i], max(0.0, jaccard - overlap) / (1.0 - overlap))
    return picked


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.1, 0.3, 0.5, 0.5, 0.8, 1.0]),
                          st.frozensets(st.sampled_from("abcdefgh"), max_size=5)), max_size=40),
       st.integers(1, 40), st.sampled_from([0.0, 0.3, 0.5, 1.0]), st.sampled_from([0.0, 0.3, 0.5, 0.6, 0.9]))
def test_lazy_diversify_picks_exactly_what_the_eager_greedy_picks(items, limit, diversity, overlap):
    scores = [s for s, _ in items]
    terms = [t for _, t in items]
    assert diversify(scores, terms, limit=limit, diversity=diversity, overlap=overlap) == \
        _eager_diversify(scores, terms, limit=limit, diversity=diversity, overlap=overlap)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.frozensets(st.integers(0, 25), max_size=9)), max_size=120),
       st.integers(1, 120), st.sampled_from([0.3, 0.5, 1.0]), st.sampled_from([0.0, 0.25, 0.5, 0.75]))
def test_prefix_filtered_diversify_matches_the_eager_greedy_on_larger_pools(items, limit, diversity, overlap):
    # many items over a small vocabulary: near-duplicates everywhere, prefixes cut at every size
    scores = [s for s, _ in items]
    terms = [t for _, t in items]
    assert diversify(scores, terms, limit=limit, diversity=diversity, overlap=overlap) == \
        _eager_diversify(scores, terms, limit=limit, diversity=diversity, overlap=overlap)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.2, 0.4, 0.4, 0.7, 1.0]), st.frozensets(st.integers(0, 30), max_size=10)),
                min_size=48, max_size=160),
       st.integers(1, 160), st.sampled_from([0.3, 0.5, 1.0]), st.sampled_from([0.0, 0.3, 0.5, 0.75]))
def test_pools_as_large_as_a_context_recall_pick_as_the_eager_greedy(items, limit, diversity, overlap):
    # a context recalls 80 hits of some 120 candidates: many refreshes of stale heap entries
    scores = [s for s, _ in items]
    terms = [t for _, t in items]
    assert diversify(scores, terms, limit=limit, diversity=diversity, overlap=overlap) == \
        _eager_diversify(scores, terms, limit=limit, diversity=diversity, overlap=overlap)


_unit = st.floats(min_value=-0.5, max_value=1.5, allow_nan=False)
_weight = st.floats(min_value=0.0, max_value=2.0, allow_nan=False)


@given(_unit, _unit, _unit, _weight, st.booleans(), st.floats(min_value=0.05, max_value=1.0),
       _weight, _weight, st.floats(min_value=0.0, max_value=1.0))
def test_fuser_gives_exactly_what_fuse_gives(relevance, importance, fresh, tier_weight, superseded, base,
                                             importance_weight, recency_weight, penalty):
    fuser = Fuser(base, importance_weight, recency_weight, penalty, half_life_days=30.0)
    assert fuser(relevance, importance, fresh, tier_weight, superseded) == fuse(
        relevance=relevance, importance=importance, recency=fresh, tier_weight=tier_weight, superseded=superseded,
        base=base, importance_weight=importance_weight, recency_weight=recency_weight, superseded_penalty=penalty)


@given(st.floats(min_value=-1e9, max_value=1e11, allow_nan=False), st.floats(min_value=0.01, max_value=1e4))
def test_fuser_recency_is_exactly_decay_recency(age, half_life):
    assert Fuser(0.6, 0.25, 0.15, 0.5, half_life_days=half_life).recency(age) == recency(
        age_seconds=age, half_life_days=half_life)
