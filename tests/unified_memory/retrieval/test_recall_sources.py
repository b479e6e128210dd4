"""federated_recall fuses the typed candidates of any RecallSource; it knows no storage column."""

import ast
from pathlib import Path

import pytest

from scoring.lexical import LexicalMatch
from tiers.candidates import CandidateQuery, FactDetail, MessageDetail, RecallCandidate
from tiers.storage.backend import Scope
from unified_memory.config import RankingConfig
from unified_memory.retrieval import federation, hit_scoring
from unified_memory.retrieval.federation import RecallRequest, federated_recall
from unified_memory.types import RecallHit

NOW = 1_700_000_000.0
DAY = 86400.0


class StubSource:
    """A tier that is not one of ours: whatever it returns is fused like the others."""

    def __init__(self, tiers, candidates):
        self.recall_tiers = frozenset(tiers)
        self.candidates = candidates
        self.asked: list[CandidateQuery] = []

    def recall_candidates(self, query):
        self.asked.append(query)
        return list(self.candidates)


def fact(item_id, text, score, *, source=None, status="active"):
    return RecallCandidate(id=item_id, tier="long_term", text=text,
                           lexical=LexicalMatch(item_id, score, score / 4, tuple(text.lower().split()[:1])),
                           dense=None, importance=0.5, created_at=NOW - DAY, source=source or item_id,
                           superseded=status == "superseded", metadata_json='{"k":1}',
                           detail=FactDetail(status=status, category=None, confidence=1.0, valid_to=None))


def message(item_id, text, score, *, tier="episodic"):
    return RecallCandidate(id=item_id, tier=tier, text=text,
                           lexical=LexicalMatch(item_id, score, score / 4, ("bee",)) if score else None,
                           dense=None, importance=0.5, created_at=NOW - 2 * DAY, source=item_id, superseded=False,
                           detail=MessageDetail(role="user", speaker=None, session_id=None, own_text=text))


def test_a_source_s_candidates_are_fused_into_recall_hits():
    facts = StubSource({"long_term"}, [fact("f1", "bees make honey", 2.0), fact("f2", "bees sting", 1.0)])
    request = RecallRequest(query="bees", scope=Scope("ada"), limit=5, now=NOW)
    hits = federated_recall(request, [facts], ranking=RankingConfig())
    assert [h.id for h in hits] == ["f1", "f2"] and all(isinstance(h, RecallHit) for h in hits)
    assert hits[0].components["relevance"] == 1.0 and hits[0].components["status"] == "active"
    assert hits[0].metadata == {"k": 1} and hits[0].created_at.timestamp() == NOW - DAY
    [query] = facts.asked
    assert query == CandidateQuery(scope=Scope("ada"), text="bees", want=15, now=NOW)


def test_a_source_is_asked_only_for_the_tiers_wanted_and_scored_as_one_search():
    facts = StubSource({"long_term"}, [fact("f1", "bees make honey", 2.0)])
    messages = StubSource({"short_term", "episodic"},
                          [message("m1", "I keep bees", 4.0, tier="short_term"), message("m2", "bees!", 2.0)])
    request = RecallRequest(query="bees", scope=Scope("ada"), limit=5, now=NOW, tiers=("episodic",))
    [hit] = federated_recall(request, [facts, messages], ranking=RankingConfig())
    assert facts.asked == [] and len(messages.asked) == 1
    # m1 (short_term, not wanted) still sets the scale of the search it came from
    assert hit.id == "m2" and hit.components["relevance"] == 0.5


def test_a_message_of_a_superseded_fact_s_turn_ranks_like_the_fact():
    facts = StubSource({"long_term"}, [fact("f1", "bees in Lisbon", 2.0, source="m1", status="superseded")])
    messages = StubSource({"episodic"}, [message("m1", "I keep bees in Lisbon", 2.0),
                                         message("m2", "I keep bees in Porto", 2.0)])
    request = RecallRequest(query="bees", scope=Scope("ada"), limit=5, now=NOW, tiers=("episodic",))
    hits = {h.id: h for h in federated_recall(request, [messages, facts], ranking=RankingConfig())}
    assert set(hits) == {"m1", "m2"} and hits["m1"].score == hits["m2"].score  # the fact was not asked for
    request = RecallRequest(query="bees", scope=Scope("ada"), limit=5, now=NOW)
    hits = {h.id: h for h in federated_recall(request, [messages, facts], ranking=RankingConfig())}
    assert "m1" not in hits or hits["m1"].score < hits["m2"].score  # one hit per turn: the fact or its message


@pytest.mark.parametrize("module", [federation, hit_scoring], ids=["federation", "hit_scoring"])
def test_recall_names_no_storage_column(module):
    """Nothing above tiers/ indexes a stored row: federation and the scoring of its hits read
    typed candidates only."""
    source = Path(module.__file__).read_text(encoding="utf-8")
    tree = ast.parse(source)
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"tiers.storage.backend", "tiers.storage.rows", "tiers.indexes.documents"}
    subscripts = [ast.unparse(node) for node in ast.walk(tree)
                  if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                  and isinstance(node.slice.value, str)]
    assert all(s.split("[")[0].endswith(".notes") for s in subscripts), subscripts  # a hit's own notes only
    assert subscripts or module is hit_scoring  # federation does read them (the walk finds subscripts)
    assert ".row" not in source
