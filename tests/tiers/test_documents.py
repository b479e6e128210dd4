"""A tier's document search (tiers.indexes.documents): the rows the caller's filter drops never cost a candidate."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tiers.candidates import CandidateQuery
from tiers.facts.long_term import FactInput, LongTermFacts
from tiers.storage.backend import Scope, Storage

ADA = Scope("ada")


@settings(max_examples=40, deadline=None)
@given(kept=st.lists(st.booleans(), min_size=1, max_size=60), want=st.integers(1, 25), words=st.integers(1, 4))
def test_the_best_want_that_pass_the_filter_whichever_the_filter_drops(kept: list[bool], want: int,
                                                                       words: int) -> None:
    """The candidates are the ``want`` best matches whose rows pass the filter, in the index's order:
    the same whether the filter drops none of the first ``want``, some (the slack is read), or
    more than the slack (the search widens)."""
    facts = LongTermFacts(Storage(None))
    with facts.storage.atomic():
        added = facts.add(ADA, [FactInput(f"apple {'pie ' * (i % words)}note {i}", 0.5,
                                          metadata={"keep": flag}) for i, flag in enumerate(kept)], now=0.0)
    keep = {fact.id for fact, flag in zip(added, kept, strict=True) if flag}
    ranked = [m.key for m in facts.index.lexical.search(ADA.user_id, "apple pie", None)]
    found = facts.recall_candidates(CandidateQuery(scope=ADA, text="apple pie", want=want, now=1.0,
                                                   where={"keep": True}))
    assert [c.id for c in found] == [key for key in ranked if key in keep][:want]
