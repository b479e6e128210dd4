"""create_memory(memory_type) builds every facade's memory by its seed name."""

from __future__ import annotations

import asyncio

import pytest

from unified_memory.compat.factory import MEMORY_TYPES, create_memory
from unified_memory.compat.marsys import ConversationMemory, KGMemory, ManagedConversationMemory
from unified_memory.compat.motus import BasicMemory, CompactionMemory
from unified_memory.errors import MemoryTypeError, MemoryValueError


@pytest.mark.parametrize("memory_type, cls, kwargs", [
    ("basic", BasicMemory, {}),
    ("compact", CompactionMemory, {"config": {"token_threshold": 1000}}),
    ("conversation_history", ConversationMemory, {"description": "sys"}),
    ("managed_conversation", ManagedConversationMemory, {"config": {"threshold_tokens": 1000}}),
    ("kg", KGMemory, {}),
])
def test_create_memory_builds_each_type(memory_type, cls, kwargs):
    memory = create_memory(memory_type, **kwargs)
    assert type(memory) is cls
    if memory_type in ("basic", "compact"):
        asyncio.run(memory.add_message(role="user", content="hi"))
        assert asyncio.run(memory.get_context())[-1] == {"role": "user", "content": "hi"}
    else:
        memory.add(role="user", content="hi")
        assert memory.get_messages()[-1] == {"role": "user", "content": "hi"}


def test_memory_types_lists_all_five():
    assert MEMORY_TYPES == ("basic", "compact", "conversation_history", "managed_conversation", "kg")


def test_unknown_memory_type_names_the_choices():
    with pytest.raises(MemoryValueError) as info:
        create_memory("background")
    assert info.value.field == "memory_type"
    assert all(name in str(info.value) for name in MEMORY_TYPES)
    with pytest.raises(MemoryTypeError):
        create_memory(None)
