"""Text analysis for lexical retrieval and fact de-duplication.

Three views of a text, all lowercased (``str.casefold``), Unicode-aware and with
English contractions expanded first ("I'm" → "i am", "won't" → "will not",
possessive "'s" dropped):

* :func:`tokenize_words` — the plain words, nothing removed.
* :func:`analyze` — index/query terms: stopwords (negations included) removed,
  Snowball English stems (PyStemmer). Used by :class:`scoring.lexical.LexicalIndex`.
* :func:`normalize_key` — a de-duplication key: like :func:`analyze` but the
  negations ("not", "no", "never", ...) are kept, so a fact and its denial differ.

    >>> analyze("I'm living in Lisbon since 2023")
    ['live', 'lisbon', 'sinc', '2023']
    >>> normalize_key("I'm allergic to peanuts") == normalize_key("I am allergic to peanuts.")
    True

Words are runs of Unicode letters and digits (underscore and other punctuation
split them; apostrophes join contractions); each CJK ideograph or kana is a word
of its own, since those scripts do not use spaces. Text is NFC-normalised first.
Work per distinct word is cached, so analysing ASCII text costs one
``str.translate`` + ``split`` plus a dict lookup per token.

A non-``str`` text raises :class:`~scoring.errors.MemoryTypeError`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import Stemmer

from scoring.errors import wrong_type

__all__ = ["STOPWORDS", "NEGATIONS", "DOC_BREAK", "analyze", "term_set", "normalize_key", "tokenize_words",
           "without_terms",
           "stem", "raw_tokens", "raw_token_stream", "token_terms"]

#: Words that negate; kept by :func:`normalize_key`, dropped by :func:`analyze`.
NEGATIONS: frozenset[str] = frozenset({"not", "no", "never", "nothing", "none", "neither", "nor"})

#: English stopwords dropped by :func:`analyze` (and, minus :data:`NEGATIONS`, by
#: :func:`normalize_key`). Includes the fragments contraction expansion produces.
STOPWORDS: frozenset[str] = frozenset("""
a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers herself him himself his how i if in
into is it its itself just let me more most must my myself no nor not now of off on
once only or other our ours ourselves out over own same shall she should so some such
than that the their theirs them themselves then there these they this those through
to too under until up very was we were what when where which while who whom why will
with would you your yours yourself yourselves also us might yet ever
neither never nothing none d ll m re s t ve
""".split())

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Text is first cut into *chunks*: maximal runs of letters, digits and apostrophes
# (each CJK character alone). A chunk holds words joined by single apostrophes
# ("don't", "o'clock"); stray apostrophes ("'quoted'") only separate.
_CHUNK_RE = re.compile(rf"(?:[^\W_{_CJK}]|')+|[{_CJK}]")
_CHUNK_OR_BREAK_RE = re.compile(_CHUNK_RE.pattern + "|\x00")
_WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
# ASCII fast path: one translate + split (3-4x faster than a regex scan).
_ASCII_CHUNKS = str.maketrans({i: (chr(i).lower() if chr(i).isalnum() or chr(i) == "'" else
                                   "'" if chr(i) == "`" else " ") for i in range(128)})
_ASCII_CHUNKS_OR_BREAK = str.maketrans({**_ASCII_CHUNKS, 0: "\x00"})  # NUL (DOC_BREAK) kept

_IRREGULAR: dict[str, tuple[str, ...]] = {
    "won't": ("will", "not"), "can't": ("can", "not"), "cannot": ("can", "not"),
    "shan't": ("shall", "not"), "ain't": ("am", "not"), "let's": ("let", "us"),
    "y'all": ("you", "all"), "ma'am": ("madam",),
}
_SUFFIXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("n't", ("not",)), ("'re", ("are",)), ("'ve", ("have",)), ("'ll", ("will",)),
    ("'d", ("would",)), ("'m", ("am",)), ("'s", ()), ("'", ()),
)
_KEY_STOPWORDS = STOPWORDS - NEGATIONS
#: Separates the texts in :func:`raw_token_stream` (never a word token itself).
DOC_BREAK = "\x00"
_STEMMER = Stemmer.Stemmer("english")  # PyStemmer: snowballstemmer's stems, compiled (~40x faster)
_STEMMER.maxCacheSize = 0  # _stem_word caches already


def stem(word: str) -> str:
    """The Snowball English stem of one lowercase word (cached), with one extra rule:
    a stem of six or more letters ending in "i" loses it, so the "-y"/"-ies" nouns
    meet their "-ic" adjectives (allergy/allergies/allergic, economy/economic).

    >>> stem("lives"), stem("living"), stem("peanuts")
    ('live', 'live', 'peanut')
    >>> stem("allergies") == stem("allergy") == stem("allergic")
    True
    """
    if word.isdigit():  # numbers (dates, amounts, ids) have no suffixes; often unique, so kept out of the cache
        return word
    return _stem_word(word)


@lru_cache(maxsize=1 << 16)
def _stem_word(word: str) -> str:
    stemmed: str = _STEMMER.stemWord(word)
    if len(stemmed) >= 6 and stemmed.endswith("i"):
        return stemmed[:-1]
    return stemmed


def _expand_word(token: str) -> tuple[str, ...]:
    """Expand one apostrophe-joined token: "don't" → ("do", "not")."""
    if token in _IRREGULAR:
        return _IRREGULAR[token]
    for suffix, tail in _SUFFIXES:
        if token.endswith(suffix) and len(token) > len(suffix):
            head = token[: -len(suffix)]
            if "'" not in head:
                return (head, *tail)
            break
    return tuple(part for part in token.split("'") if part)  # o'clock → o, clock


@lru_cache(maxsize=1 << 16)
def _expand(chunk: str) -> tuple[str, ...]:
    """The words of one chunk, contractions expanded."""
    if "'" not in chunk:
        return _IRREGULAR.get(chunk, (chunk,))
    return tuple(word for token in _WORD_RE.findall(chunk) for word in _expand_word(token))


@lru_cache(maxsize=1 << 16)
def token_terms(token: str) -> tuple[str, ...]:
    """The index terms of one chunk from :func:`raw_tokens` (cached).

    ``analyze(text)`` is the concatenation of ``token_terms`` over ``raw_tokens(text)``;
    callers that cache per token (the lexical index does) use the two directly.

    >>> token_terms("don't"), token_terms("living")
    ((), ('live',))
    """
    return tuple(stem(w) for w in _expand(token) if w not in STOPWORDS)


@lru_cache(maxsize=1 << 16)
def _key_terms(token: str) -> tuple[str, ...]:
    return tuple(w if w in NEGATIONS else stem(w) for w in _expand(token) if w not in _KEY_STOPWORDS)


def raw_tokens(text: str) -> list[str]:
    """The text's lowercased chunks: runs of letters, digits and apostrophes (each
    CJK character alone), contractions not yet expanded.

    >>> raw_tokens("I’m in São Paulo, 'aren't' you?")
    ["i'm", 'in', 'são', 'paulo', "'aren't'", 'you']
    """
    if not isinstance(text, str):
        raise wrong_type("text", "str", text)
    if text.isascii():
        return text.translate(_ASCII_CHUNKS).split()
    return _CHUNK_RE.findall(unicodedata.normalize("NFC", text).translate(_APOSTROPHES).casefold())


def raw_token_stream(texts: Sequence[str]) -> list[str]:
    """:func:`raw_tokens` of every text in one flat list, :data:`DOC_BREAK` between texts.

    One pass over the whole batch, for bulk indexing.

    >>> raw_token_stream(["I'm here", "", "OK"]) == ["i'm", "here", DOC_BREAK, DOC_BREAK, "ok"]
    True
    """
    if not texts:
        return []
    separator = f" {DOC_BREAK} "
    try:
        joined = separator.join(texts)
    except TypeError:
        raise wrong_type("text", "str", next(t for t in texts if not isinstance(t, str))) from None
    if joined.count(DOC_BREAK) != len(texts) - 1:  # a text holds the separator: blank it out
        joined = separator.join(t.replace(DOC_BREAK, " ") for t in texts)
    if joined.isascii():
        return joined.translate(_ASCII_CHUNKS_OR_BREAK).split()
    joined = unicodedata.normalize("NFC", joined).translate(_APOSTROPHES).casefold()
    return _CHUNK_OR_BREAK_RE.findall(joined)


def tokenize_words(text: str) -> list[str]:
    """Lowercased word tokens with contractions expanded; nothing removed or stemmed.

    >>> tokenize_words("Don't forget: Maria's flight is at 10:30!")
    ['do', 'not', 'forget', 'maria', 'flight', 'is', 'at', '10', '30']
    """
    out: list[str] = []
    for token in raw_tokens(text):
        out += _expand(token)
    return out


def analyze(text: str) -> list[str]:
    """Index/query terms: words minus stopwords (negations too), Snowball-stemmed.

    Repeated words repeat in the output (term frequency matters to BM25).

    >>> analyze("The user's cats are living with their grandparents")
    ['user', 'cat', 'live', 'grandpar']
    >>> analyze("I won't")
    []
    """
    out: list[str] = []
    for token in raw_tokens(text):
        out += token_terms(token)
    return out


@lru_cache(maxsize=1 << 14)
def term_set(text: str) -> frozenset[str]:
    """The distinct terms of ``text`` (remembered: recall compares the same texts often).

    >>> sorted(term_set("cats and more cats"))
    ['cat']
    """
    return frozenset(analyze(text))


def without_terms(text: str, terms: frozenset[str], *, replacement: str = "") -> str:
    """``text`` with the words whose terms are all in ``terms`` replaced (by default:
    removed) — unless nothing searchable would remain, then ``text`` itself. The
    result is lowercased, as the analyzer sees it.

    >>> without_terms("Where does Ada live now?", frozenset({"ada"}), replacement="I")
    'where does i live now?'
    >>> without_terms("who is Ada?", frozenset({"ada"}))
    'who is Ada?'
    """
    tokens = raw_tokens(text)
    kept = [replacement.lower() if (found := set(token_terms(t))) and found <= terms else t for t in tokens]
    if kept == tokens:
        return text
    remaining = " ".join(k for k in kept if k)
    if not analyze(remaining):
        return text
    return remaining + ("?" if text.rstrip().endswith("?") else "")


def normalize_key(text: str) -> str:
    """A de-duplication key: stems of the non-stopwords, negations kept, in order.

    Re-stating a fact gives the same key; negating it does not. A text made only
    of stopwords keys on its plain words instead (so "I am" and "you are" differ);
    a text without words keys as ``""``.

    >>> normalize_key("I'm allergic to peanuts")
    'allerg peanut'
    >>> normalize_key("I am NOT allergic to peanuts.")
    'not allerg peanut'
    >>> normalize_key("Yes, I am!")
    'yes'
    """
    tokens = raw_tokens(text)
    out: list[str] = []
    for token in tokens:
        out += _key_terms(token)
    if not out and tokens:
        return " ".join(tokenize_words(text))
    return " ".join(out)
