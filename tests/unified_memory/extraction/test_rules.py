"""The default rule-based extractor: facts with slots, entities and triples from one message."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import unified_memory.extraction._patterns as patterns_module
import unified_memory.extraction.rules as extraction_module
from unified_memory.errors import MemoryTypeError
from unified_memory.extraction.rules import RuleExtractor
from unified_memory.protocols import Extractor
from unified_memory.types import Extraction, Message

EXTRACTOR = RuleExtractor()


def extract(content: str, *, role: str = "user", name: str | None = None, context=()) -> Extraction:
    return EXTRACTOR.extract(Message(role=role, content=content, name=name), context=context)


def slot(content: str, **kwargs) -> tuple[str | None, str | None, str | None]:
    facts = extract(content, **kwargs).facts
    assert len(facts) == 1, facts
    return facts[0].subject, facts[0].attribute, facts[0].value


def triples(extraction: Extraction) -> set[tuple[str, str, str]]:
    return {(t.subject, t.predicate, t.object) for t in extraction.triples}


def entities(extraction: Extraction) -> dict[str, tuple[str, dict]]:
    return {e.name: (e.type, e.attributes) for e in extraction.entities}


def test_implements_the_extractor_protocol():
    assert isinstance(EXTRACTOR, Extractor)


@pytest.mark.parametrize(("text", "expected"), [
    ("I live in Lisbon", ("user", "residence", "Lisbon")),
    ("I just moved to Berlin", ("user", "residence", "Berlin")),
    ("i live in lisbon", ("user", "residence", "Lisbon")),
    ("I work at Acme", ("user", "employer", "Acme")),
    ("I work as a nurse", ("user", "job_title", "nurse")),
    ("I'm a nurse", ("user", "job_title", "nurse")),
    ("I'm a senior software engineer", ("user", "job_title", "senior software engineer")),
    ("My favorite color is green", ("user", "favorite_color", "green")),
    ("My favourite movies are Alien and Heat", ("user", "favorite_movie", "Alien and Heat")),
    ("My name is Ada", ("user", "name", "Ada")),
    ("I'm Ada", ("user", "name", "Ada")),
    ("Call me Ada", ("user", "name", "Ada")),
    ("I am Ada Lovelace", ("user", "name", "Ada Lovelace")),
    ("I'm 34 years old", ("user", "age", "34")),
    ("My birthday is on May 3", ("user", "birthday", "May 3")),
    ("I'm married", ("user", "relationship_status", "married")),
    ("I'm vegan", ("user", "diet", "vegan")),
    ("I'm originally from Brazil", ("user", "hometown", "Brazil")),
    ("I'm Italian", ("user", "nationality", "Italian")),
    ("I study at the University of Lisbon", ("user", "school", "University of Lisbon")),
    ("My wife's name is Jo", ("wife", "name", "Jo")),
    ("My mom's birthday is June 12", ("mom", "birthday", "June 12")),
    ("My sister Maria lives in Lisbon", ("maria", "residence", "Lisbon")),
    ("My sister is a nurse", ("sister", "job_title", "nurse")),
    ("Maria is a nurse", ("maria", "job_title", "nurse")),
    ("Tom works at Google", ("tom", "employer", "Google")),
    ("Tom is my brother", ("tom", "relation", "brother")),
    ("I moved from Denver to Portland in June", ("user", "residence", "Portland")),
    ("I started working at Google last week", ("user", "employer", "Google")),
    ("I quit the hospital and started as a software tester at Zillow", ("user", "employer", "Zillow")),
    ("I started as a nurse", ("user", "job_title", "nurse")),
])
def test_recognised_statements_get_a_slot(text, expected):
    assert slot(text) == expected


def test_fact_keeps_the_users_wording_category_and_importance():
    [fact] = extract("  I just moved to Berlin!  ").facts
    assert fact.text == "I just moved to Berlin!"
    assert fact.category == "location"
    assert fact.importance is not None and fact.importance >= 0.8
    assert fact.confidence == 1.0


def test_sister_maria_lives_in_lisbon_gives_entities_and_triples():
    out = extract("my sister Maria lives in Lisbon")
    found = entities(out)
    assert found["Maria"][0] == "person" and found["Maria"][1]["relation"] == "sister"
    assert found["Lisbon"][0] == "place"
    assert {("user", "has_sister", "Maria"), ("Maria", "lives_in", "Lisbon")} <= triples(out)


def test_work_sentence_fills_one_slot_and_every_triple():
    out = extract("I work at Acme as an engineer")
    assert [(f.attribute, f.value) for f in out.facts] == [("employer", "Acme")]
    assert triples(out) == {("user", "works_at", "Acme"), ("user", "works_as", "engineer")}
    assert entities(out)["Acme"][0] == "organization"


@pytest.mark.parametrize(("text", "expected"), [
    ("I live in Lisbon", ("user", "lives_in", "Lisbon")),
    ("I'm allergic to peanuts", ("user", "allergic_to", "peanuts")),
    ("I love jazz", ("user", "likes", "jazz")),
    ("I hate cilantro", ("user", "dislikes", "cilantro")),
    ("My name is Ada", ("user", "name", "Ada")),
    ("I can't eat gluten", ("user", "avoids", "gluten")),
    ("I have type 2 diabetes", ("user", "has_condition", "diabetes")),
    ("I have a dog named Rex", ("user", "has_dog", "Rex")),
    ("I grew up in Porto", ("user", "grew_up_in", "Porto")),
])
def test_snake_case_triples(text, expected):
    assert expected in triples(extract(text))


def test_allergies_are_multi_valued_so_they_never_supersede_each_other():
    out = extract("I'm allergic to peanuts, shellfish and eggs")
    [fact] = out.facts
    assert fact.category == "health" and fact.attribute is None and fact.subject == "user"
    assert {t[2] for t in triples(out) if t[1] == "allergic_to"} == {"peanuts", "shellfish", "eggs"}
    assert ("user", "allergic_to", "shellfish") in triples(extract("I have a severe shellfish allergy"))


def test_likes_and_pets_have_no_single_valued_slot():
    assert slot("I love jazz")[1] is None
    out = extract("I have two cats named Luna and Sol")
    # the slot is how many cats there are; each pet is a relation of its own (a dog adds one)
    assert (out.facts[0].attribute, out.facts[0].value) == ("number_of_cats", "two")
    assert extract("I have a dog named Rex").facts[0].attribute != "number_of_cats"
    assert {("user", "has_cat", "Luna"), ("user", "has_cat", "Sol")} <= triples(out)
    assert entities(out)["Luna"] == ("animal", {"species": "cat"})


@pytest.mark.parametrize("text", ["I don't live in Paris anymore", "I'm not allergic to anything",
                                  "I'm not married", "I don't work at Acme"])
def test_negated_statements_are_facts_without_slot_or_triple(text):
    out = extract(text)
    [fact] = out.facts
    assert fact.attribute is None and fact.value is None
    assert out.triples == []


def test_dislike_through_negation_is_a_dislike_not_a_like():
    assert triples(extract("I don't like jazz")) == {("user", "dislikes", "jazz")}


@pytest.mark.parametrize("text", ["hi", "thanks!", "lol ok", "how are you?", "What is my name?", "Where do I live?",
                                  "can you help me write an email?", "I'm going to the store", "I'm tired",
                                  "I like that idea", "I'd like to know the time", "", "   ",
                                  "I started with a salad", "I started at the bottom", "I started for fun"])
def test_chatter_questions_and_requests_yield_nothing(text):
    out = extract(text)
    assert out.facts == [] and out.triples == []


def test_statement_before_a_question_is_kept():
    assert slot("I'm vegan, can you suggest recipes?") == ("user", "diet", "vegan")


def test_wh_word_opening_a_statement_is_not_a_question():
    assert slot("When I moved to Berlin, I got a cat") == ("user", "residence", "Berlin")
    assert ("user", "lived_in", "Paris") in triples(extract("When I was young I lived in Paris"))


def test_speaker_name_is_the_subject_of_the_graph_and_of_the_slot():
    out = extract("I live in Lisbon and my friend Tom works at Google.", name="Caroline")
    assert [(f.subject, f.attribute, f.value) for f in out.facts] == [("caroline", "residence", "Lisbon")]
    assert {("Caroline", "lives_in", "Lisbon"), ("Caroline", "has_friend", "Tom"), ("Tom", "works_at", "Google")} \
        <= triples(out)
    found = entities(out)
    assert found["Caroline"][0] == "person"
    assert found["Tom"] == ("person", {"relation": "friend", "employer": "Google"})


def test_first_person_in_assistant_messages_is_not_the_user():
    out = extract("I live in the cloud. My sister is great. Maria is a nurse.", role="assistant")
    assert [(f.subject, f.attribute, f.value) for f in out.facts] == [("maria", "job_title", "nurse")]
    assert triples(out) == {("Maria", "works_as", "nurse")}
    assert extract("I'm allergic to peanuts", role="tool").facts == []


def test_entities_from_context_words_and_org_suffixes():
    found = entities(extract("I had dinner with Jo at Acme Inc. yesterday"))
    assert found["Jo"][0] == "person" and found["Acme Inc"][0] == "organization"
    assert entities(extract("We're planning a trip to Japan next month"))["Japan"][0] == "place"


def test_dates_and_sentence_initial_words_are_not_entities():
    names = set(entities(extract("Yesterday I moved to Berlin. On Monday my exam starts in May.")))
    assert names == {"Berlin"}
    assert set(entities(extract("The weather is nice. My dog Rex is sick."))) == {"Rex"}


def test_relative_and_pet_entities_carry_their_relation():
    found = entities(extract("My dog Rex loves the beach. My girlfriend, Sara, is a teacher."))
    assert found["Rex"] == ("animal", {"relation": "dog"})
    assert found["Sara"][1] == {"relation": "girlfriend", "job_title": "teacher"}


def test_one_fact_per_informative_sentence():
    out = extract("Hi! I live in Lisbon. I love jazz. What's the weather like?")
    assert [f.text for f in out.facts] == ["I live in Lisbon.", "I love jazz."]


def test_informative_sentence_without_a_pattern_is_still_a_fact():
    [fact] = extract("I'm training for a marathon").facts
    assert fact.category == "goal" and fact.subject == "user" and fact.attribute is None
    [fact] = extract("Remember that my locker code is 4312").facts
    assert fact.importance >= 0.7


def test_hedged_statements_have_lower_confidence():
    [fact] = extract("I think I'm allergic to penicillin").facts
    assert fact.confidence < 1.0


def test_short_answer_to_the_assistants_question_uses_context():
    asked = [Message(role="user", content="hello"), Message(role="assistant", content="Nice! Where do you live?")]
    [fact] = extract("Lisbon", context=asked).facts
    assert (fact.text, fact.subject, fact.attribute, fact.value) == ("I live in Lisbon", "user", "residence", "Lisbon")
    assert fact.confidence < 1.0
    assert slot("in Porto.", context=asked) == ("user", "residence", "Porto")
    favorite = [Message(role="assistant", content="What's your favorite color?")]
    assert slot("green", context=favorite) == ("user", "favorite_color", "green")
    named = [Message(role="assistant", content="What should I call you?")]
    assert slot("Ada", context=named) == ("user", "name", "Ada")


def test_short_answer_needs_a_matching_question():
    assert extract("Lisbon", context=[Message(role="assistant", content="Tell me a city.")]).facts == []
    assert extract("Lisbon", context=[Message(role="user", content="Where do you live?")]).facts == []
    long_answer = "well it depends on the season really"
    assert extract(long_answer, context=[Message(role="assistant", content="Where do you live?")]).facts == []


def test_importance_comes_from_the_given_scorer():
    custom = RuleExtractor(lambda text: 0.42)
    [fact] = custom.extract(Message(role="user", content="I live in Lisbon")).facts
    assert fact.importance == 0.42
    clipped = RuleExtractor(lambda text: 7.0).extract(Message(role="user", content="I live in Lisbon"))
    assert clipped.facts[0].importance == 1.0


def test_bad_arguments_are_type_errors():
    with pytest.raises(MemoryTypeError):
        RuleExtractor("not a scorer")  # type: ignore[arg-type]
    with pytest.raises(MemoryTypeError):
        EXTRACTOR.extract("I live in Lisbon")  # type: ignore[arg-type]


def test_is_deterministic():
    text = "My sister Maria lives in Lisbon. I'm allergic to peanuts and I work at Acme."
    assert extract(text) == extract(text)


def test_empty_and_none_content():
    assert EXTRACTOR.extract(Message(role="assistant", content=None)) == Extraction()


_PIECES = ["I", "my", "sister", "Maria", "lives", "in", "Lisbon", "work", "at", "Acme", "as", "an", "engineer",
           "love", "jazz", "allergic", "to", "name", "is", "not", "'s", ",", ".", "?", "!", "and", "with", "Jo",
           "\n", "İ", "’m", "favorite", "color", "born", "on", "May", "3", "called", "dog", "Inc", "University of"]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.sampled_from(["user", "assistant", "tool", "system"]),
       st.one_of(st.none(), st.text(max_size=10)))
def test_arbitrary_text_never_raises_and_yields_valid_models(text, role, name):
    out = EXTRACTOR.extract(Message(role=role, content=text, name=name))
    assert Extraction.model_validate(out.model_dump()) == out
    for fact in out.facts:
        assert fact.text.strip() and (fact.importance is None or 0.0 <= fact.importance <= 1.0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=25), st.sampled_from(["user", "assistant"]))
def test_word_salad_of_trigger_words_yields_valid_models(parts, role):
    context = [Message(role="assistant", content="Where do you live?")]
    out = EXTRACTOR.extract(Message(role=role, content=" ".join(parts), name="Caroline"), context=context)
    assert Extraction.model_validate(out.model_dump()) == out
    assert all(t.subject and t.predicate and t.object for t in out.triples)
    assert len({e.name.lower() for e in out.entities}) == len(out.entities)


def test_docstring_examples_run():
    assert doctest.testmod(extraction_module).failed == 0
    assert doctest.testmod(patterns_module).failed == 0


def test_a_custom_scorer_can_promote_a_sentence_no_pattern_knows():
    zebra = RuleExtractor(lambda text: 1.0 if "zebra" in text else 0.0)
    [fact] = zebra.extract(Message(role="user", content="I saw a zebra")).facts
    assert (fact.text, fact.importance, fact.attribute) == ("I saw a zebra", 1.0, None)
    assert zebra.extract(Message(role="user", content="I saw a horse")).facts == []


def test_curly_apostrophes_are_understood_and_kept_in_the_fact_text():
    [fact] = extract("I\u2019m allergic to peanuts. I\u2019m Ada").facts[:1]
    assert fact.text == "I\u2019m allergic to peanuts."
    assert slot("I\u2019m Ada") == ("user", "name", "Ada")


# -- clause boundaries, bare reminders, several slots in one sentence (the demo conversation) ------------


def allergens_and_likes(out: Extraction) -> set[tuple[str, str, str]]:
    return {t for t in triples(out) if t[1] in ("allergic_to", "likes", "dislikes", "avoids")}


@pytest.mark.parametrize(("text", "expected"), [
    ("First, something important: I'm allergic to peanuts, so never suggest recipes with them.",
     {("user", "allergic_to", "peanuts")}),
    ("I love jazz, so mostly jazz history shows.", {("user", "likes", "jazz")}),
    ("I love jazz - mostly bebop", {("user", "likes", "jazz")}),
    ("I love jazz \u2014 mostly bebop", {("user", "likes", "jazz")}),
    ("I like hiking; it relaxes me", {("user", "likes", "hiking")}),
    ("I hate cilantro, because it tastes like soap", {("user", "dislikes", "cilantro")}),
    ("I hate cilantro but my wife loves it", {("user", "dislikes", "cilantro")}),
    ("I'm allergic to peanuts, which is annoying", {("user", "allergic_to", "peanuts")}),
    ("I can't eat gluten, and it makes dining out hard", {("user", "avoids", "gluten")}),
    ("I love jazz and I play the piano", {("user", "likes", "jazz")}),
    ("I'm allergic to peanuts, shellfish, and eggs",
     {("user", "allergic_to", "peanuts"), ("user", "allergic_to", "shellfish"), ("user", "allergic_to", "eggs")}),
])
def test_list_objects_stop_at_the_clause_boundary(text, expected):
    assert allergens_and_likes(extract(text)) == expected


@pytest.mark.parametrize("text", ["i work at acme - it's great", "I live in lisbon; it's lovely"])
def test_place_and_employer_values_stop_at_the_clause_boundary(text):
    [fact] = extract(text).facts
    assert fact.value in ("Acme", "Lisbon")


@pytest.mark.parametrize("text", ["Remember my allergy.", "Don't forget my allergy!", "Please remember my allergy",
                                  "remember my birthday", "Keep in mind my allergies, please.", "Remember that.",
                                  "Also, don't forget about my allergy too",
                                  "What should I cook for Maria when she visits? Remember my allergy."])
def test_bare_reminder_of_something_already_said_is_neither_a_fact_nor_a_triple(text):
    out = extract(text)
    assert out.facts == [] and out.triples == []


@pytest.mark.parametrize("text", ["My allergy is acting up", "Remember my allergy", "I told you about my allergies",
                                  "I have a food allergy", "My kid's allergies are bad"])
def test_a_possessive_or_verb_before_allergy_is_not_an_allergen(text):
    assert not {t for t in triples(extract(text)) if t[1] == "allergic_to"}


def test_a_reminder_that_names_the_allergen_or_a_new_fact_is_kept():
    out = extract("Don't forget my peanut allergy")
    assert ("user", "allergic_to", "peanut") in triples(out) and out.facts[0].category == "health"
    assert ("user", "allergic_to", "shellfish") in triples(extract("I have a severe shellfish allergy"))
    [fact] = extract("Yes please. Also remind me that my dentist appointment is on June 20.").facts
    assert fact.category == "schedule" and fact.text == "Also remind me that my dentist appointment is on June 20."
    [fact] = extract("Remember that my locker code is 4312").facts
    assert fact.importance >= 0.7


def facts_of(text: str, **kwargs) -> list[tuple[str, str | None, str | None, str | None]]:
    return [(f.text, f.subject, f.attribute, f.value) for f in extract(text, **kwargs).facts]


def test_a_sentence_with_two_first_person_slots_becomes_two_clause_facts():
    out = extract("I live in Lisbon and I work at Tidewater Labs as a data engineer.")
    assert [(f.text, f.subject, f.attribute, f.value, f.category) for f in out.facts] == [
        ("I live in Lisbon", "user", "residence", "Lisbon", "location"),
        ("I work at Tidewater Labs as a data engineer.", "user", "employer", "Tidewater Labs", "work")]
    assert {("user", "lives_in", "Lisbon"), ("user", "works_at", "Tidewater Labs"),
            ("user", "works_as", "data engineer")} == triples(out)
    assert all(f.importance is not None and f.importance >= 0.8 for f in out.facts)


@pytest.mark.parametrize("text", ["I live in Lisbon; I work at Acme.", "I live in Lisbon, and I work at Acme.",
                                  "i live in Lisbon and i work at Acme.", "I live in Lisbon - I work at Acme.",
                                  "I live in Lisbon, but I work at Acme."])
def test_clause_separators(text):
    assert [(s, a, v) for _, s, a, v in facts_of(text)] == [("user", "residence", "Lisbon"),
                                                             ("user", "employer", "Acme")]
    assert facts_of(text)[1][0].startswith("I work at Acme")


def test_clause_text_is_the_users_own_wording():
    assert [f[0] for f in facts_of("I\u2019m vegan and I\u2019m 34 years old")] == ["I\u2019m vegan",
                                                                                 "I\u2019m 34 years old"]


@pytest.mark.parametrize("text", ["My sister Maria lives in Porto and I visit her every other weekend.",
                                  "I live in Lisbon and I love it", "I moved to Berlin and I'm happy",
                                  "I live in Lisbon and my friend Tom works at Google."])
def test_a_clause_without_information_of_its_own_stays_in_its_sentence(text):
    assert len(extract(text).facts) == 1


def test_third_person_slot_and_a_first_person_clause():
    out = extract("Six people. My friend Tom is vegan, and I'm training for the Lisbon marathon so I want "
                  "something light.")
    assert [(f.text, f.subject, f.attribute, f.value, f.category) for f in out.facts] == [
        ("My friend Tom is vegan", "tom", "diet", "vegan", "health"),
        ("I'm training for the Lisbon marathon so I want something light.", "user", None, None, "goal")]
    assert {("user", "has_friend", "Tom"), ("Tom", "diet", "vegan")} <= triples(out)
    assert entities(out)["Tom"] == ("person", {"relation": "friend", "diet": "vegan"})


@pytest.mark.parametrize(("text", "expected"), [
    ("I now work at Kestrel Robotics.", ("user", "employer", "Kestrel Robotics")),
    ("Great. I now work at Kestrel Robotics.", ("user", "employer", "Kestrel Robotics")),
    ("Big news: I moved to Berlin last week for a new job.", ("user", "residence", "Berlin")),
    ("big news: i moved to berlin last week for a new job", ("user", "residence", "Berlin")),
    ("I used to live in Paris but I moved to Berlin", ("user", "residence", "Berlin")),
])
def test_current_slot_values(text, expected):
    slots = [(s, a, v) for _, s, a, v in facts_of(text) if a]
    assert slots == [expected]


def test_big_news_keeps_its_informative_part():
    [fact] = extract("Big news: I moved to Berlin last week for a new job.").facts
    assert "I moved to Berlin" in fact.text and fact.category == "location"
    assert [f.text for f in extract("Hi! I'm Ada.").facts] == ["I'm Ada."]


def test_no_bogus_entities_or_user_facts_from_the_demo_chatter():
    out = extract("Great. I now work at Kestrel Robotics. Maria says she will visit in July.")
    assert set(entities(out)) == {"Kestrel Robotics"}
    out = extract("Exciting. Shall I look for flights from Porto to Berlin for Maria?", role="assistant")
    assert out.facts == [] and out.triples == []
    assert all(e[0] != "person" for e in entities(out).values())


def test_a_hedge_in_a_later_clause_does_not_lower_the_confidence():
    [fact] = extract("My birthday is on May 3, maybe we can celebrate then too.").facts
    assert (fact.attribute, fact.value, fact.confidence) == ("birthday", "May 3", 1.0)
    assert extract("I live in Lisbon, I think").facts[0].confidence < 1.0
    assert extract("Maybe I'm allergic to cats").facts[0].confidence < 1.0


def test_new_employer_supersedes_the_one_stated_with_the_residence():
    from unified_memory import UnifiedMemory

    with UnifiedMemory() as mem:
        mem.remember("placeholder")  # any write; then promote via messages below
        for text in ("I live in Lisbon and I work at Tidewater Labs as a data engineer.",
                     "Big news: I moved to Berlin last week for a new job.", "I now work at Kestrel Robotics."):
            mem.add_turn(text, "Noted.")
        mem.end_session()
        active = {f.text for f in mem.facts()}
        everything = {f.text: f.status for f in mem.facts(include_inactive=True)}
    assert everything["I live in Lisbon"] == "superseded"
    assert everything["I work at Tidewater Labs as a data engineer."] == "superseded"
    assert {"I now work at Kestrel Robotics.", "Big news: I moved to Berlin last week for a new job."} <= active


@pytest.mark.parametrize(("text", "expected"), [
    ("Hi, I'm Ada.", "I'm Ada."), ("Hey there! I'm Ada", "I'm Ada"), ("ok so, i live in Lisbon", "I live in Lisbon"),
    ("Also, I'm vegan", "I'm vegan"), ("Big news: I moved to Berlin.", "Big news: I moved to Berlin."),
    ("Hi, I'm Ada and I live in Lisbon", "I'm Ada"),
])
def test_greeting_and_filler_prefixes_are_trimmed_from_the_fact_text(text, expected):
    assert extract(text).facts[0].text == expected


def test_a_verb_after_and_shares_the_sentences_i_only():
    assert triples(extract("I quit the hospital and started as a software tester at Zillow")) == {
        ("user", "works_at", "Zillow"), ("user", "works_as", "software tester")}
    assert triples(extract("I met Maria and she started at Acme")) == set()  # "she" is not the user


@pytest.mark.parametrize("text", [
    "Sounds like you and the kids had a blast!",        # "like" after a verb of perception
    "Seems like forever since we caught up!",
    "Wow, Mel! Looks like fun.",
    "I've got some other stuff with sentimental value, like my hand-painted bowl.",  # "such as"
    "They offer a bunch, like yoga, kickboxing, and circuit training.",
    "Unconditional love is so important.",              # a noun, not a verb: a name would say "loves"
    "Family's love really grounds us and gives us strength.",
    "Themes like love and sisterhood were explored.",
    "Love and acceptance really can be found everywhere.",  # an object opening with "and"
    "Everyone we love was there to celebrate us.",           # ... or with a verb
    "I'm truly grateful for all the support I've got from friends.",  # "support" is no team here
    "My own journey and the support I got made a huge difference.",
    "I love how you use it to tell your stories and teach people about trans folks.",  # a clause, no things
    "I love how it's both a creative outlet and a form of therapy.",
    "Love the tattoo, did you just get it?",           # a question after the comma, not a second thing
    "Love having you in my corner, thanks for always being there!",
])
def test_prepositions_nouns_and_clauses_are_no_preference_or_team(text):
    out = extract(text, name="Caroline")
    assert not [t for t in out.triples if t.predicate in ("likes", "dislikes", "team") and t.object not in ("tattoo", "having you in my corner")]


@pytest.mark.parametrize(("text", "expected"), [
    ("I just like helping people.", ("Nate", "likes", "helping people")),
    ("Maria loves hiking.", ("Maria", "likes", "hiking")),
    ("Maria does love hiking.", ("Maria", "likes", "hiking")),
    ("Jon and Gina love dancing.", ("Gina", "likes", "dancing")),
    ("I love camping trips with my fam, 'cause nature brings such peace.", ("Nate", "likes", "camping trips")),
    ("I support Arsenal.", ("Nate", "team", "Arsenal")),
    ("I love all the yellow leaves.", ("Nate", "likes", "yellow leaves")),
    ("I love Will Smith.", ("Nate", "likes", "Will Smith")),  # a name is no auxiliary
])
def test_verbs_of_preference_and_teams_still_found(text, expected):
    found = triples(extract(text, name="Nate"))
    assert expected in found
    assert all(t[1] != "likes" or "cause" not in t[2] for t in found)


@pytest.mark.parametrize("text", ["My family is so important to me.", "My dogs are doing better.",
                                  "Our team bond is awesome.", "My hard work is paying off.",
                                  "These are my lucky basketball shoes."])
def test_how_something_is_fills_no_slot(text):
    """An evaluation is not a value: a later "my family is always there" must not supersede it."""
    out = extract(text, name="John")
    assert not [t for t in out.triples if t.single], out.triples
    assert all(f.attribute is None for f in out.facts)


@pytest.mark.parametrize(("text", "expected"), [
    ("My coach is Petra.", ("John", "coach", "Petra")),
    ("My favorite dairy-free treat is this amazing chocolate tart.",
     ("John", "favorite_dairy_free_treat", "this amazing chocolate tart")),
    ("Our team lead is Sofia.", ("John", "team_lead", "Sofia")),
    ("My car is a Honda Civic.", ("John", "car", "Honda Civic")),
    ("My favorite band is Big Thief.", ("John", "favorite_band", "Big Thief")),  # a name is no evaluation
])
def test_what_something_is_still_fills_its_slot(text, expected):
    out = extract(text, name="John")
    assert expected in triples(out)
    assert [t.single for t in out.triples if (t.subject, t.predicate, t.object) == expected] == [True]  # a slot


@pytest.mark.parametrize("text", ["Look [shares a photo of a laptop on a black surface]",
                                  "Look [shares a photo of a man on a bed using a laptop]",
                                  "I put the vase on a white surface."])
def test_a_thing_is_its_head_word_and_a_word_brand_needs_its_capital(text):
    """"a black surface" is no Microsoft Surface, and "a bed using a laptop" is a bed: neither is a
    computer (a later one would supersede the computer the user named)."""
    assert not [t for t in extract(text, name="John").triples if t.predicate == "computer"]


@pytest.mark.parametrize(("text", "expected"), [
    ("I use a Surface Pro.", ("John", "computer", "Surface Pro")),
    ("I drive a silver 2019 Honda Civic.", ("John", "car", "silver 2019 Honda Civic")),
    ("I got a Galaxy S23.", ("John", "phone", "Galaxy S23")),
])
def test_brands_still_name_their_kind(text, expected):
    out = extract(text, name="John")
    assert expected in triples(out)
    assert all(t.single for t in out.triples if (t.subject, t.predicate, t.object) == expected)
