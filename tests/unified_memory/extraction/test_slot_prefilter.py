"""The word prefilter of :func:`slot_hits` (a frame runs only when the sentence holds the
words it cannot match without) must not change what is found."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import unified_memory.extraction._slots as slots

pytestmark = pytest.mark.sqlite_only  # a pure function: no storage

# The frames' own words, a few values and names, punctuation and case variants.
VOCAB = sorted({w for needs in slots._FRAME_NEEDS for group in needs for w in group} | {
    "I", "I'm", "I've", "we're", "it's", "my", "our", "Honda", "Civic", "Pixel", "8", "iPhone", "Lisbon", "Mei",
    "Acme", "three", "cats", "swim", "coach", "Petra", "the", "a", "to", "from", "anymore", "now", "at", "7", "pm",
    "every", "Saturday", "Arsenal", "vegan", "diet", "Rust", "guitar", "flat", "in", "Dr.", "Lopes", "fan", "not",
    ",", ".", ";", " - ", "and", "plant-based", "e-mail", "me", "on", "WhatsApp", "+34", "600", "Kofi", "trainers"})


def _reference(sentence: str) -> list:
    saved = slots._GATED_FRAMES
    slots._GATED_FRAMES = tuple((0, kind, rx) for _, kind, rx in saved)  # every frame runs
    try:
        return slots.slot_hits(sentence)
    finally:
        slots._GATED_FRAMES = saved


@settings(max_examples=400, deadline=None)
@given(words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=14), case=st.sampled_from(["", "lower", "upper"]))
def test_prefilter_finds_what_every_frame_finds(words, case):
    sentence = " ".join(words)
    sentence = getattr(sentence, case)() if case else sentence
    assert slots.slot_hits(sentence) == _reference(sentence)


@pytest.mark.parametrize("sentence", [
    "My swim coach is Petra.", "I switched to a Pixel 8 last month.", "We adopted another cat, so now we have three.",
    "Edmonton is where I lived", "I eat plant-based now", "reach me on WhatsApp at +34 600", "I've got a Honda Civic",
    "We have three cats now", "I'm a Leeds United fan", "switched trainers to Kofi", "I report to Yvonne",
])
def test_prefilter_keeps_known_slots(sentence):
    assert slots.slot_hits(sentence) == _reference(sentence) != []
