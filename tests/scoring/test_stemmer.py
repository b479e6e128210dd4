"""PyStemmer (the compiled Snowball stemmer recall uses) gives snowballstemmer's stems.

snowballstemmer, the same algorithm in pure Python, was the stemmer before: every index
and de-duplication key built with it must keep matching, so the stems must be identical.
"""

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoring.text
from scoring.text import raw_tokens, stem, tokenize_words

english_stemmer = pytest.importorskip("snowballstemmer.english_stemmer")
ROOT = Path(__file__).resolve().parents[2]
# The pure-Python stemmer itself: snowballstemmer.stemmer("english") hands out PyStemmer when it is installed.
_REFERENCE = english_stemmer.EnglishStemmer()


def _reference(word: str) -> str:
    """:func:`scoring.text.stem` computed with snowballstemmer."""
    if word.isdigit():
        return word
    stemmed = _REFERENCE.stemWord(word)
    return stemmed[:-1] if len(stemmed) >= 6 and stemmed.endswith("i") else stemmed


def _corpus_words() -> list[str]:
    """Every distinct word of the project's docs, sources and benchmark vocabulary (tens of thousands)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import _synthetic
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    vocabulary = [w for name in dir(_synthetic) if name.isupper() and isinstance(getattr(_synthetic, name), list)
                  for entry in getattr(_synthetic, name) if isinstance(entry, str) for w in tokenize_words(entry)]
    words = set(vocabulary)
    for path in [*ROOT.glob("docs/**/*.md"), *ROOT.glob("*.md"), *ROOT.glob("**/*.py")]:
        if ".venv" not in path.parts:
            words.update(tokenize_words(path.read_text(encoding="utf-8", errors="replace")))
    return sorted(words)


def test_the_stemmer_in_use_is_pystemmer_and_the_reference_is_not():
    assert type(scoring.text._STEMMER).__module__ == "Stemmer"
    assert type(_REFERENCE).__module__ == "snowballstemmer.english_stemmer"


@pytest.mark.slow
def test_same_stems_as_snowballstemmer_on_a_large_vocabulary():
    words = _corpus_words()
    assert len(words) > 5000
    assert "bicycles" in words and "photographs" in words  # the benchmark vocabulary is in
    differing = [(w, stem(w), _reference(w)) for w in words if stem(w) != _reference(w)]
    assert differing == []


def test_same_stems_on_inflections():
    words = [w + suffix for w in ("connect", "generous", "happy", "allergy", "run", "agree", "sky", "nation")
             for suffix in ("", "s", "es", "ed", "ing", "ly", "ness", "ies", "ation", "ational", "fulness", "ic")]
    assert [stem(w) for w in words] == [_reference(w) for w in words]


_word = st.text(st.characters(categories=("Ll", "Lo", "Nd")), min_size=1, max_size=20)
_english = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz'"), min_size=1, max_size=18)


@pytest.mark.slow
@settings(max_examples=2000)
@given(st.one_of(_word, _english))
def test_same_stems_as_snowballstemmer_on_any_word(text):
    for word in (w for token in raw_tokens(text) for w in re.split("'", token) if w):
        assert stem(word) == _reference(word)
