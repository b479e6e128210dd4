"""Records built from checked values (``types.trusted_record``) are the records pydantic builds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unified_memory.types import Message, RecallHit, trusted_record

_TEXT = st.text(max_size=20)
_WHEN = st.one_of(st.none(), st.datetimes(timezones=st.just(UTC)))
_META = st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), _TEXT, st.booleans()), max_size=3)


@settings(max_examples=100, deadline=None)
@given(role=st.sampled_from(["user", "assistant", "system", "tool"]), content=st.one_of(st.none(), _TEXT),
       metadata=_META, created_at=_WHEN, session_id=st.one_of(st.none(), _TEXT))
def test_a_trusted_message_is_the_constructed_one(role, content, metadata, created_at, session_id):
    values = dict(role=role, content=content, name=None, tool_calls=None, tool_call_id=None, metadata=metadata,
                  images=None, reasoning_details=None, id="msg_1", created_at=created_at, user_id="u",
                  agent_id=None, session_id=session_id)
    built, trusted = Message.model_construct(**values), trusted_record(Message, **values)
    assert trusted == built and repr(trusted) == repr(built)
    assert trusted.model_dump_json() == built.model_dump_json()
    assert trusted.model_fields_set == built.model_fields_set


@settings(max_examples=100, deadline=None)
@given(score=st.floats(0, 1), components=_META, created_at=_WHEN)
def test_a_trusted_hit_is_the_validated_one(score, components, created_at):
    hit = trusted_record(RecallHit, id="f1", tier="long_term", text="hi", score=score, components=components,
                         metadata={}, created_at=created_at)
    assert hit == RecallHit(id="f1", tier="long_term", text="hi", score=score, components=components,
                            created_at=created_at)
    hit.score = 0.25  # still a pydantic record: assignment is validated
    with pytest.raises(ValueError):
        hit.score = "high"  # type: ignore[assignment]


def test_every_field_must_be_given_and_no_other():
    with pytest.raises(KeyError):
        trusted_record(RecallHit, id="f1", tier="long_term", text="hi", score=0.5)
    with pytest.raises(TypeError, match="unknown fields"):
        trusted_record(RecallHit, id="f1", tier="long_term", text="hi", score=0.5, components={}, metadata={},
                       created_at=datetime.now(UTC), colour="red")
