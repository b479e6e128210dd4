import doctest
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

import scoring.text
from scoring.text import (
    DOC_BREAK,
    NEGATIONS,
    STOPWORDS,
    analyze,
    normalize_key,
    raw_token_stream,
    raw_tokens,
    token_terms,
    tokenize_words,
)
from unified_memory.errors import MemoryTypeError


def test_doctests_pass():
    assert doctest.testmod(scoring.text).failed == 0


def test_analyze_lowercases_stems_and_drops_stopwords():
    assert analyze("The Cats are RUNNING to the garden") == ["cat", "run", "garden"]


def test_analyze_keeps_numbers():
    assert analyze("Born in 2023, flight LH1234 at 10:30") == ["born", "2023", "flight", "lh1234", "10", "30"]


def test_analyze_drops_negations():
    assert "not" in STOPWORDS and "no" in STOPWORDS
    assert analyze("I don't like it") == ["like"]
    assert analyze("no, never") == []


def test_analyze_repeats_repeated_words():
    assert analyze("coffee coffee tea") == ["coffe", "coffe", "tea"]


def test_stemming_conflates_inflections():
    assert analyze("lives") == analyze("living") == analyze("live") == ["live"]
    assert analyze("peanuts") == analyze("peanut")


@pytest.mark.parametrize(("text", "words"), [
    ("I'm here", ["i", "am", "here"]),
    ("don't", ["do", "not"]),
    ("can't", ["can", "not"]),
    ("cannot", ["can", "not"]),
    ("won't", ["will", "not"]),
    ("they're", ["they", "are"]),
    ("we've", ["we", "have"]),
    ("you'll", ["you", "will"]),
    ("she'd", ["she", "would"]),
    ("Maria's car", ["maria", "car"]),
    ("I\u2019m", ["i", "am"]),
    ("o'clock", ["o", "clock"]),
])
def test_tokenize_words_expands_contractions(text, words):
    assert tokenize_words(text) == words


def test_tokenize_words_splits_on_punctuation_and_underscore():
    assert tokenize_words("e-mail: snake_case, x2!") == ["e", "mail", "snake", "case", "x2"]


def test_unicode_words_and_forms_match():
    composed = "caf\u00e9"
    decomposed = unicodedata.normalize("NFD", composed)
    assert analyze(composed) == analyze(decomposed) == analyze("CAF\u00c9")
    assert tokenize_words("Ich wohne in M\u00fcnchen") == ["ich", "wohne", "in", "m\u00fcnchen"]


def test_cjk_characters_are_single_tokens():
    assert tokenize_words("\u6211\u559c\u6b22 sushi") == ["\u6211", "\u559c", "\u6b22", "sushi"]


def test_empty_and_punctuation_only_text():
    assert analyze("") == []
    assert analyze("?!...") == []
    assert normalize_key("") == ""
    assert normalize_key("?!") == ""


def test_analyze_equals_token_terms_over_raw_tokens():
    text = "I'm sure Maria's cats won't be living in Lisbon in 2024"
    assert analyze(text) == [t for tok in raw_tokens(text) for t in token_terms(tok)]


def test_restated_fact_gives_same_key():
    key = normalize_key("I'm allergic to peanuts")
    assert key == "allerg peanut"
    assert normalize_key("I am allergic to peanuts.") == key
    assert normalize_key("i\u2019m ALLERGIC to peanuts!!") == key
    assert normalize_key("I am allergic to the peanut") == key


def test_negation_keeps_keys_distinct():
    fact = normalize_key("I'm allergic to peanuts")
    for denial in ["I'm not allergic to peanuts", "I am never allergic to peanuts",
                   "I'm allergic to no peanuts", "I ain't allergic to peanuts"]:
        assert normalize_key(denial) != fact
    assert normalize_key("I don't eat meat") == normalize_key("I do not eat meat") == "not eat meat"
    assert normalize_key("I can't swim") == normalize_key("I cannot swim") == "not swim"


def test_key_keeps_every_negation_word():
    for word in NEGATIONS:
        assert word in normalize_key(f"there is {word} milk").split()


def test_key_preserves_order():
    assert normalize_key("Maria likes Tom") != normalize_key("Tom likes Maria")


def test_stopword_only_text_keys_on_its_words():
    assert normalize_key("I am") == "i am"
    assert normalize_key("I am") != normalize_key("you are")
    assert normalize_key("Yes, I am!") == "yes"


@pytest.mark.parametrize("func", [analyze, normalize_key, tokenize_words, raw_tokens])
def test_rejects_non_str(func):
    with pytest.raises(MemoryTypeError) as info:
        func(b"bytes")
    assert info.value.field == "text"


ascii_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=40)
any_text = st.text(alphabet=st.sampled_from("aZ9 '`_-.\u00e9\u00c9\u2019\u6211 \x00"), max_size=30)


@given(ascii_text)
def test_ascii_fast_path_equals_unicode_path(text):
    assert analyze(text + " \u00e9") == [*analyze(text), "\u00e9"]
    assert tokenize_words(text + " \u00e9") == [*tokenize_words(text), "\u00e9"]


@given(st.lists(st.one_of(ascii_text, any_text), max_size=5))
def test_token_stream_equals_per_text_tokens(texts):
    stream = raw_token_stream(texts)
    per_text, current = [], []
    for token in stream:
        if token == DOC_BREAK:
            per_text.append(current)
            current = []
        else:
            current.append(token)
    if texts:
        per_text.append(current)
    assert per_text == [raw_tokens(t) for t in texts]
