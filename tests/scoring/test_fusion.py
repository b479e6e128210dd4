import doctest

from hypothesis import given
from hypothesis import strategies as st

import scoring.fusion
from scoring.fusion import dense_relevance, fuse, hybrid_relevance, lexical_scale


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
