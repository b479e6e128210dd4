"""The default importance scorer: labelled accuracy against a keyword baseline, and specific behaviour."""

from __future__ import annotations

import doctest
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoring.importance as importance_module
from scoring.importance import (
    CATEGORIES,
    HeuristicImportanceScorer,
    ImportanceAssessment,
    assess_importance,
    score_importance,
    split_sentences,
)
from unified_memory.errors import MemoryTypeError, MemoryValueError
from unified_memory.protocols import ImportanceScorer

THRESHOLD = 0.7  # the default promotion threshold

# Worth remembering (should score >= 0.7): facts about the user and the people around them.
POSITIVE = [
    "My name is Ada", "I'm Ada, nice to meet you", "Call me Ada", "I am Ada Lovelace",
    "I'm allergic to peanuts", "I have a severe shellfish allergy", "I was diagnosed with type 2 diabetes last year",
    "I'm pregnant with our second child", "I take insulin twice a day", "I'm vegan", "I can't eat gluten",
    "I have asthma, so I carry an inhaler", "My sister Maria lives in Lisbon", "My wife's name is Jo",
    "I'm married with two kids", "I live in Lisbon", "I just moved to Berlin", "I grew up in a small town near Porto",
    "I'm originally from Brazil", "I work at Acme as an engineer", "I'm a nurse at the city hospital",
    "I've been working as a data scientist for five years", "I love jazz", "My favorite color is green",
    "I hate cilantro", "I'm a huge fan of the Beatles", "My birthday is on May 3", "Remind me to call mom on Friday",
    "My exam is next Tuesday", "I have a dentist appointment tomorrow at 10am", "I'm training for a marathon",
    "I want to learn Spanish before my trip", "My goal is to run a half marathon this year",
    "I have two cats named Luna and Sol", "I just got promoted to senior engineer", "My dad passed away last spring",
    "I'm 34 years old", "I don't live in Paris anymore", "I'm not allergic to anything",
    "Please remember that my locker code is 4312", "My son is allergic to penicillin",
    "We're moving to Canada next month", "I don't eat pork for religious reasons", "My boyfriend Tom works at Google",
    "I'd love to become a pilot someday", "Just so you know, I'm lactose intolerant",
    "I'm a software developer at a fintech startup", "My husband and I live in Toronto",
    "I have a golden retriever called Max", "I've been vegetarian for ten years", "I'm deathly afraid of flying",
    "I prefer tea over coffee", "We're expecting a baby in March", "I study computer science at MIT",
    "I drive a red Toyota Corolla", "My daughter Emma just started kindergarten", "I was born in 1990",
    "I speak Portuguese and English", "I usually wake up at 6am to go running", "I'm a big Lakers fan",
    "I'm colorblind", "My partner and I are saving up for a house", "Tom is my brother",
]
# Not worth a long-term fact (should score < 0.7): small talk, requests, questions, generic or vague text.
NEGATIVE = [
    "hi", "thanks!", "lol ok", "how are you?", "good morning!", "ok cool, sounds good", "haha that's funny",
    "can you help me write an email?", "what's the weather?", "What is my name?",
    "Can you explain how photosynthesis works?", "Write me a poem about the sea", "Translate this to French please",
    "Do you know a good pasta recipe?", "I'm tired", "I'm going to the store", "I'm not sure",
    "my name is not important", "I'm so happy right now", "I'm looking for a word that means happy",
    "I'd like to know more about black holes", "I like that idea", "Thanks, I love it!", "I hate when that happens",
    "I love you, you're the best", "Peanut allergies are common in children", "Paris is the capital of France",
    "The weather in Berlin is nice", "Most people like pizza", "Maria is a nurse", "Tom works at Google",
    "Where do you live?", "What's your favorite movie?", "Do you like jazz?", "I think so", "Maybe later",
    "Let me think about it", "That's a great question", "The meeting is at 3pm", "Sure, I'll do that",
    "Tell me about the history of Lisbon", "I love this song!", "How do I move files in Linux?",
    "Can you remind me what we discussed?", "Is it better to work from home?", "What time is it in Tokyo?",
    "Could you summarize this article for me?", "That makes sense, thanks", "I see what you mean", "I'm back",
    "Nice, I like it", "Give me three ideas for dinner", "Is it going to rain tomorrow?", "I agree with you",
    "What do you think about remote work?", "I always forget my keys",
]

_KEYWORDS = re.compile(
    r"\b(?:name|allerg\w*|live[sd]?|work\w*|job|love[sd]?|like[sd]?|hate[sd]?|prefer\w*|favou?rite|birthday|"
    r"wife|husband|sister|brother|mom|dad|remind|remember|diabet\w*|vegan|vegetarian|moved?|from|born)\b", re.I)


def keyword_baseline(text: str) -> float:
    """The naive scorer we must beat: any memory-ish keyword means important."""
    return 0.8 if _KEYWORDS.search(text) else 0.2


def accuracy(scorer) -> float:
    right = sum(scorer(t) >= THRESHOLD for t in POSITIVE) + sum(scorer(t) < THRESHOLD for t in NEGATIVE)
    return right / (len(POSITIVE) + len(NEGATIVE))


def test_labelled_set_is_balanced_and_large_enough():
    assert len(POSITIVE) + len(NEGATIVE) >= 80
    assert 0.4 <= len(POSITIVE) / (len(POSITIVE) + len(NEGATIVE)) <= 0.6


def test_beats_keyword_baseline_by_a_clear_margin():
    ours, baseline = accuracy(score_importance), accuracy(keyword_baseline)
    assert ours >= 0.95
    assert ours - baseline >= 0.25, (ours, baseline)


@pytest.mark.parametrize("text", POSITIVE)
def test_informative_statements_clear_the_threshold(text):
    assert score_importance(text) >= THRESHOLD


@pytest.mark.parametrize("text", NEGATIVE)
def test_chatter_and_requests_stay_below_the_threshold(text):
    assert score_importance(text) < THRESHOLD


@pytest.mark.parametrize("text", ["My name is Ada", "I'm Ada", "Call me Ada", "I am Ada Lovelace"])
def test_name_statements_are_identity(text):
    result = assess_importance(text)
    assert result.score >= 0.85 and result.category == "identity"


@pytest.mark.parametrize("text", ["I'm tired", "I'm going to the store", "I'm not sure", "my name is not important",
                                  "What is my name?"])
def test_im_plus_adjective_or_verb_negated_name_and_questions_are_low(text):
    assert score_importance(text) < 0.5


@pytest.mark.parametrize("text", ["I'm allergic to peanuts", "I have a severe shellfish allergy", "I have diabetes",
                                  "I have asthma", "I'm pregnant", "I was diagnosed with celiac disease",
                                  "I take metformin daily", "I'm vegan", "I can't eat gluten"])
def test_health_facts_are_high(text):
    result = assess_importance(text)
    assert result.score >= 0.8 and result.category == "health"


def test_negated_allergy_is_still_informative_but_lower():
    negated = assess_importance("I'm not allergic to anything")
    assert 0.6 <= negated.score <= 0.8 and negated.category == "health"
    assert negated.score < score_importance("I'm allergic to peanuts")
    assert any("negated" in r for r in negated.reasons)


@pytest.mark.parametrize(("text", "category"), [
    ("my sister Maria lives in Lisbon", "relationship"), ("my wife's name is Jo", "relationship"),
    ("I live in Lisbon", "location"), ("I moved to Berlin", "location"), ("I work at Acme as an engineer", "work"),
    ("I love jazz", "preference"), ("my favorite color is green", "preference"), ("I hate cilantro", "preference"),
    ("my birthday is on May 3", "schedule"), ("remind me to call mom on Friday", "schedule"),
    ("my exam is next Tuesday", "schedule"), ("I'm training for a marathon", "goal"),
])
def test_personal_facts_score_high_with_their_category(text, category):
    result = assess_importance(text)
    assert 0.7 <= result.score <= 0.95
    assert result.category == category


@pytest.mark.parametrize("text", ["hi", "thanks!", "lol ok", "how are you?", "can you help me write an email?",
                                  "what's the weather?", "ok", "", "   ", "?!"])
def test_small_talk_and_requests_are_low(text):
    assert score_importance(text) < 0.3


def test_third_person_facts_about_named_people_are_medium():
    assert 0.4 <= score_importance("Maria is a nurse") < THRESHOLD
    assert score_importance("Maria is a nurse") > score_importance("Paris is the capital of France")
    assert score_importance("I'm a nurse") > score_importance("Maria is a nurse")


def test_generic_statements_without_a_person_are_low():
    assert score_importance("Peanut allergies are common in children") < 0.5
    assert score_importance("Python is a programming language") < 0.3


def test_negation_scope_changes_the_score_by_category():
    moved_out = assess_importance("I don't live in Paris anymore")
    assert 0.65 <= moved_out.score < score_importance("I live in Paris")
    assert moved_out.category == "location"
    assert score_importance("my name is not important") < 0.3
    # a negation in another clause does not touch the cue
    assert score_importance("It's not far, I live in Lisbon") == pytest.approx(score_importance("I live in Lisbon"))


def test_hedging_lowers_a_little():
    plain, hedged = score_importance("I live in Lisbon"), score_importance("I think I live in Lisbon")
    assert plain * 0.8 < hedged < plain
    assert "hedged" in assess_importance("maybe I'm allergic to cats").reasons


def test_statement_before_a_question_keeps_its_weight():
    assert score_importance("I'm vegan, can you suggest recipes?") >= 0.85
    assert score_importance("Can you remember that I am allergic to cats?") >= 0.85
    assert score_importance("Do you know where I live?") < 0.5


@pytest.mark.parametrize("text", ["When I was young I lived in Paris", "When I moved to Berlin, I got a cat",
                                  "What I love most is jazz"])
def test_wh_word_opening_a_statement_is_not_a_question(text):
    assert score_importance(text) >= THRESHOLD


def test_multi_sentence_text_takes_the_max_plus_a_small_bonus():
    one = score_importance("I live in Lisbon.")
    two = score_importance("Hi there! I live in Lisbon. Also, I'm allergic to peanuts.")
    assert two > score_importance("I'm allergic to peanuts")
    assert two <= score_importance("I'm allergic to peanuts") + 0.1
    assert score_importance("Hi there! I live in Lisbon.") == pytest.approx(one)
    assert "+1 informative" in assess_importance("I live in Lisbon. I love jazz.").reasons


def test_assessment_is_a_frozen_record():
    result = assess_importance("I love jazz")
    assert isinstance(result, ImportanceAssessment)
    assert result.category in CATEGORIES and isinstance(result.reasons, tuple)
    with pytest.raises(AttributeError):
        result.score = 0.0  # type: ignore[misc]


def test_scorer_satisfies_the_protocol_and_weights_are_configurable():
    scorer = HeuristicImportanceScorer({"preference": 0.5})
    assert isinstance(scorer, ImportanceScorer)
    assert scorer("I love jazz") < THRESHOLD <= HeuristicImportanceScorer()("I love jazz")
    assert scorer("I live in Lisbon") == score_importance("I live in Lisbon")
    assert HeuristicImportanceScorer({"general": 0.6})("I had pasta for lunch") == pytest.approx(0.6)
    assert scorer.assess("I hate cilantro").category == "preference"


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"category_weights": {"nonsense": 0.5}}, "category_weights"),
    ({"category_weights": {"health": 1.5}}, "category_weights"),
    ({"category_weights": {"health": True}}, "category_weights"),
    ({"multi_sentence_bonus": -0.1}, "multi_sentence_bonus"),
])
def test_invalid_configuration_names_the_field(kwargs, field):
    with pytest.raises(MemoryValueError) as info:
        HeuristicImportanceScorer(**kwargs)
    assert info.value.field == field


def test_non_text_is_a_type_error():
    with pytest.raises(MemoryTypeError):
        score_importance(42)  # type: ignore[arg-type]


def test_curly_apostrophes_and_all_caps():
    assert score_importance("I\u2019m Ada") >= 0.85
    assert score_importance("I'M TIRED") < 0.5


def test_split_sentences_keeps_abbreviations_together():
    assert split_sentences("Dr. Smith is my doctor. I live in Lisbon!\nOk") == [
        "Dr. Smith is my doctor.", "I live in Lisbon!", "Ok"]
    assert split_sentences("") == []


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_scores_a_float_in_unit_interval(text):
    value = score_importance(text)
    assert isinstance(value, float) and not math.isnan(value)
    assert 0.0 <= value <= 1.0
    assert assess_importance(text).category in (*CATEGORIES, None)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(POSITIVE + NEGATIVE + ["I", "my", "not", "?", ",", "Maria", "İ", "\n"]),
                max_size=12))
def test_any_mix_of_real_phrases_scores_in_unit_interval(parts):
    value = score_importance(" ".join(parts))
    assert 0.0 <= value <= 1.0


def test_docstring_examples_run():
    assert doctest.testmod(importance_module).failed == 0


@pytest.mark.parametrize("text", ["Remember my allergy.", "Don't forget my allergy!", "Please remember my allergy",
                                  "please keep in mind my allergies", "Remember that.", "Remember my birthday, ok?",
                                  "Also, don't forget about my allergy too"])
def test_a_bare_reminder_of_something_already_said_carries_no_new_information(text):
    result = assess_importance(text)
    assert result.score < 0.5 and result.category in (None, "general")
    assert "reminder without new information" in result.reasons


def test_a_question_plus_a_bare_reminder_stays_below_the_threshold():
    assert score_importance("What should I cook for Maria when she visits? Remember my allergy.") < THRESHOLD


@pytest.mark.parametrize("text", ["Don't forget my peanut allergy", "Remember that my locker code is 4312",
                                  "Also remind me that my dentist appointment is on June 20.",
                                  "Remember: I'm allergic to peanuts", "remember that I'm vegan"])
def test_a_reminder_that_says_something_new_stays_high(text):
    assert score_importance(text) >= THRESHOLD


def test_a_hedge_in_a_later_long_clause_does_not_touch_the_cue():
    assert score_importance("My birthday is on May 3, maybe we can celebrate then too.") == pytest.approx(
        score_importance("My birthday is on May 3"))
    assert "hedged" in assess_importance("I live in Lisbon, I think").reasons
    assert "hedged" in assess_importance("I live in Lisbon, but I'm not sure").reasons
    assert "hedged" in assess_importance("Hi, maybe I'm allergic to cats").reasons
