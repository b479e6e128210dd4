import doctest
import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scoring.lexical
import scoring.postings
from scoring.lexical import LexicalIndex, LexicalMatch
from scoring.text import analyze
from unified_memory.errors import MemoryTypeError, MemoryValueError


def bm25_reference(docs, query, k1=1.2, b=0.75, analyzer=analyze):
    """Brute-force BM25 over {key: text}: {key: (score, relevance, matched_terms)}."""
    terms = {key: analyzer(text) for key, text in docs.items()}
    n = len(docs)
    if n == 0:
        return {}
    avgdl = sum(len(t) for t in terms.values()) / n
    out, bound = {}, 0.0
    for term in dict.fromkeys(analyzer(query)):
        df = sum(term in t for t in terms.values())
        if df == 0:
            bound += math.log(1 + (n + 0.5) / 0.5) * (k1 + 1)
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        bound += idf * (k1 + 1)
        for key, doc_terms in terms.items():
            tf = Counter(doc_terms)[term]
            if tf:
                s = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc_terms) / avgdl))
                score, matched = out.get(key, (0.0, ()))
                out[key] = (score + s, (*matched, term))
    return {key: (score, score / bound, matched) for key, (score, matched) in out.items()}


@pytest.fixture
def small_merges(monkeypatch):
    monkeypatch.setattr(scoring.postings, "_MIN_MERGE", 8)
    monkeypatch.setattr(scoring.lexical, "_MIN_RENUMBER", 4)


def test_doctests_pass():
    assert doctest.testmod(scoring.lexical).failed == 0


def test_search_ranks_the_better_match_first():
    index = LexicalIndex()
    index.add_many([("a", "I live in Lisbon"), ("b", "Maria lives in Porto"), ("c", "The sky is blue")])
    hits = index.search("where does Maria live?")
    assert [h.key for h in hits] == ["b", "a"]
    assert isinstance(hits[0], LexicalMatch)
    assert hits[0].matched_terms == ("maria", "live")
    assert hits[1].matched_terms == ("live",)
    assert hits[0].score > hits[1].score > 0


def test_scores_match_reference():
    docs = {"a": "I live in Lisbon", "b": "Maria lives in Porto near Lisbon", "c": "lisbon lisbon lisbon"}
    index = LexicalIndex()
    index.add_many(docs.items())
    expected = bm25_reference(docs, "Lisbon living")
    for hit in index.search("Lisbon living"):
        assert hit.score == pytest.approx(expected[hit.key][0], abs=1e-9)
        assert hit.relevance == pytest.approx(expected[hit.key][1], abs=1e-9)


def test_relevance_is_within_unit_interval():
    index = LexicalIndex()
    index.add_many([(str(i), "tea " * i + "cake") for i in range(1, 30)])
    for hit in index.search("tea cake", limit=None):
        assert 0.0 < hit.relevance <= 1.0


def test_stemming_matches_inflections():
    index = LexicalIndex()
    index.add("a", "She lives in Lisbon")
    index.add("b", "Living near the sea")
    assert {h.key for h in index.search("live")} == {"a", "b"}


def test_empty_query_and_no_match_return_empty():
    index = LexicalIndex()
    assert index.search("anything") == []
    index.add("a", "green tea")
    assert index.search("") == []
    assert index.search("the and of") == []
    assert index.search("coffee") == []


def test_replace_key_replaces_text():
    index = LexicalIndex()
    index.add("a", "cats")
    index.add("a", "dogs")
    assert len(index) == 1
    assert index.search("cats") == []
    assert [h.key for h in index.search("dogs")] == ["a"]


def test_remove_contains_len_clear():
    index = LexicalIndex()
    index.add_many([("a", "red fox"), ("b", "blue fox")])
    assert "a" in index and len(index) == 2
    assert index.remove("a") is True
    assert index.remove("a") is False
    assert "a" not in index and len(index) == 1
    assert [h.key for h in index.search("fox")] == ["b"]
    index.clear()
    assert len(index) == 0 and index.search("fox") == []


def test_ties_rank_older_first_and_readd_makes_newest():
    index = LexicalIndex()
    index.add_many([("a", "same words here"), ("b", "same words here"), ("c", "same words here")])
    assert [h.key for h in index.search("words")] == ["a", "b", "c"]
    index.add("a", "same words here")
    assert [h.key for h in index.search("words")] == ["b", "c", "a"]


def test_limit():
    index = LexicalIndex()
    index.add_many([(f"k{i}", f"apple {'pie ' * i}") for i in range(20)])
    assert len(index.search("apple")) == 10
    assert len(index.search("apple", limit=3)) == 3
    full = index.search("apple pie", limit=None)
    assert len(full) == 20
    assert index.search("apple pie", limit=5) == full[:5]


@pytest.mark.parametrize("limit", [0, -1])
def test_limit_below_one_is_rejected(limit):
    with pytest.raises(MemoryValueError) as info:
        LexicalIndex().search("x", limit=limit)
    assert info.value.field == "limit"


def test_keys_allowed_filters_before_limit():
    index = LexicalIndex()
    index.add_many([(f"k{i:03d}", "common word " + "extra " * (i % 7)) for i in range(300)])
    allowed = {"k007", "k150", "k299"}
    hits = index.search("common extra", limit=10, keys_allowed=allowed.__contains__)
    full = index.search("common extra", limit=None)
    assert [h.key for h in hits] == [h.key for h in full if h.key in allowed]


def test_keys_names_the_documents_to_score():
    """keys=: only the named documents (unknown and removed keys ignored, none left: no hit), ranked
    as in the whole index; the many matches before them are not walked one by one."""
    index = LexicalIndex()
    index.add_many([(f"k{i:03d}", "common word " + "extra " * (i % 7)) for i in range(300)])
    index.remove("k150")
    full = index.search("common extra", limit=None)
    named = {"k007", "k150", "k299", "zzz"}
    hits = index.search("common extra", limit=10, keys=named)
    assert hits == [h for h in full if h.key in named] and {h.key for h in hits} == {"k007", "k299"}
    assert index.search("common extra", keys=set()) == [] and index.search("common extra", keys=["k150"]) == []
    assert index.search("nothing", keys=["k007"]) == []
    for bad in ("k007", 7):
        with pytest.raises(MemoryTypeError) as info:
            index.search("common", keys=bad)  # type: ignore[arg-type]
        assert info.value.field == "keys"


def test_bad_types_are_rejected():
    index = LexicalIndex()
    for call, field in [(lambda: index.add(1, "x"), "key"), (lambda: index.add("k", None), "text"),
                        (lambda: index.search(b"q"), "query"), (lambda: index.search("q", limit="3"), "limit"),
                        (lambda: index.remove(3), "key"), (lambda: index.add_many([("k", 3)]), "text"),
                        (lambda: index.add_many(["kx"]), "items")]:
        with pytest.raises(MemoryTypeError) as info:
            call()
        assert info.value.field == field


def test_bad_parameters_are_rejected():
    with pytest.raises(MemoryValueError):
        LexicalIndex(b=1.5)
    with pytest.raises(MemoryValueError):
        LexicalIndex(k1=-1)
    with pytest.raises(MemoryTypeError):
        LexicalIndex(k1="1.2")


def test_add_many_is_all_or_nothing():
    index = LexicalIndex()
    index.add("a", "old text")
    with pytest.raises(MemoryTypeError):
        index.add_many([("a", "new text"), ("b", "fine"), ("c", 42)])
    assert len(index) == 1
    assert [h.key for h in index.search("old")] == ["a"]
    assert index.search("fine") == []


def test_add_many_duplicate_keys_keep_the_last():
    index = LexicalIndex()
    index.add_many([("a", "apple"), ("b", "pear"), ("a", "plum")])
    assert len(index) == 2
    assert index.search("apple") == []
    assert [h.key for h in index.search("plum pear")] == ["b", "a"]  # as if added one by one


def test_add_many_equals_sequential_adds():
    items = [(f"k{i % 40}", f"word{i % 7} word{i % 11} shared") for i in range(100)]
    bulk, single = LexicalIndex(), LexicalIndex()
    bulk.add_many(items)
    for key, text in items:
        single.add(key, text)
    for query in ["shared", "word3 word5", "word1 shared word10"]:
        assert bulk.search(query, limit=None) == single.search(query, limit=None)


def test_merge_into_sealed_segment_preserves_results():
    index = LexicalIndex()
    index.add_many([(f"bulk{i}", f"topic{i % 13} note{i % 5} shared") for i in range(200)])
    for i in range(100):
        index.add(f"single{i}", f"topic{i % 9} memo shared")
    for i in range(0, 200, 3):
        index.remove(f"bulk{i}")
    assert index._postings.n_pending > 0
    queries = ["shared", "topic3 note2", "memo topic4", "topic12"]
    before = {q: index.search(q, limit=None) for q in queries}
    index.compact()
    assert index._postings.n_pending == 0
    assert {q: index.search(q, limit=None) for q in queries} == before


def test_automatic_merges_and_renumbering(small_merges):
    index = LexicalIndex()
    live = {}
    for i in range(300):
        key, text = f"k{i % 50}", f"alpha{i % 7} beta{i % 3} gamma"
        index.add(key, text)
        live[key] = text
        if i % 4 == 0:
            index.remove(f"k{(i * 7) % 50}")
            live.pop(f"k{(i * 7) % 50}", None)
    assert len(index) == len(live)
    assert len(index._slot_key) < 300  # dead slots were renumbered away
    expected = bm25_reference(live, "alpha3 beta1 gamma")
    hits = index.search("alpha3 beta1 gamma", limit=None)
    assert {h.key for h in hits} == set(expected)
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.key][0], abs=1e-9)


@pytest.mark.parametrize("query", ["rare7", "common", "rare3 common", "rare1 rare2 word4"])
def test_sparse_and_dense_scoring_paths_match_reference(query):
    docs = {f"k{i}": f"common word{i % 9} " + (f"rare{i % 10}" if i % 50 == 0 else "") for i in range(500)}
    index = LexicalIndex()
    index.add_many(docs.items())
    expected = bm25_reference(docs, query)
    hits = index.search(query, limit=None)
    assert {h.key for h in hits} == set(expected)
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.key][0], abs=1e-9)
        assert hit.matched_terms == expected[hit.key][2]


def test_custom_analyzer():
    index = LexicalIndex(analyzer=str.split)
    index.add_many([("a", "The the THE"), ("b", "the")])
    assert [h.key for h in index.search("THE")] == ["a"]
    assert [h.key for h in index.search("the")] == ["b", "a"]


# --------------------------------------------------------------------------- property test

WORDS = ["cat", "cats", "dog", "living", "lives", "lisbon", "porto", "tea", "the", "i'm", "not", "2023"]
KEYS = [f"k{i}" for i in range(8)]
texts = st.lists(st.sampled_from(WORDS), max_size=7).map(" ".join)
ops = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(KEYS), texts),
    st.tuples(st.just("remove"), st.sampled_from(KEYS)),
    st.tuples(st.just("bulk"), st.lists(st.tuples(st.sampled_from(KEYS), texts), max_size=6)),
    st.tuples(st.just("compact")),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(ops, max_size=25), st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
       st.sampled_from([(1.2, 0.75), (0.0, 0.5), (2.0, 1.0), (1.5, 0.0)]))
def test_search_equals_bruteforce_bm25(small_merges, operations, query, params):
    k1, b = params
    index = LexicalIndex(k1=k1, b=b)
    live, order, clock = {}, {}, 0
    for op in operations:
        if op[0] == "add":
            index.add(op[1], op[2])
            live[op[1]], order[op[1]], clock = op[2], clock, clock + 1
        elif op[0] == "remove":
            assert index.remove(op[1]) == (op[1] in live)
            live.pop(op[1], None)
        elif op[0] == "bulk":
            index.add_many(op[1])
            for key, text in op[1]:
                live[key], order[key], clock = text, clock, clock + 1
        else:
            index.compact()
    assert len(index) == len(live)
    assert all(key in index for key in live)

    expected = bm25_reference(live, query, k1=k1, b=b)
    hits = index.search(query, limit=None)
    assert {h.key for h in hits} == set(expected)  # removed keys never appear
    for hit in hits:
        score, relevance, matched = expected[hit.key]
        assert abs(hit.score - score) <= 1e-5
        assert abs(hit.relevance - relevance) <= 1e-5
        assert hit.matched_terms == matched
    for first, second in zip(hits, hits[1:], strict=False):
        assert first.score >= second.score
        if first.score == second.score:
            assert order[first.key] < order[second.key]  # ties: older first
    assert index.search(query, limit=3) == hits[:3]
    allowed = set(KEYS[::2])
    assert index.search(query, limit=2, keys_allowed=allowed.__contains__) == \
        [h for h in hits if h.key in allowed][:2]
    named = [*KEYS[1::3], "never-added"]  # keys=: the same documents, scores and order as filtering
    for limit in (1, 3, None):
        assert index.search(query, limit=limit, keys=named) == [h for h in hits if h.key in named][:limit]
    assert index.search(query, limit=2, keys=named, keys_allowed=allowed.__contains__) == \
        [h for h in hits if h.key in named and h.key in allowed][:2]
