"""scoring.checks: the int and str-list argument checks shared by scoring and tiers."""

from __future__ import annotations

import pytest

from scoring.checks import check_int, check_str_list
from unified_memory.errors import MemoryTypeError, MemoryValueError


@pytest.mark.parametrize("value, minimum", [(1, 1), (2, 2), (10**12, 1), (0, 0), (-1, -5)])
def test_check_int_returns_the_value(value, minimum):
    assert check_int("n", value, minimum=minimum) == value


@pytest.mark.parametrize("value", [True, False, 2.0, "3", None])
def test_check_int_refuses_non_ints_and_bools(value):
    with pytest.raises(MemoryTypeError, match=r"^n: expected int, got ") as info:
        check_int("n", value, minimum=1)
    assert info.value.field == "n"


def test_check_int_refuses_values_below_the_minimum():
    with pytest.raises(MemoryValueError) as info:
        check_int("dim", 1, minimum=2)
    assert str(info.value) == "dim: must be at least 2, got 1" and info.value.field == "dim"


@pytest.mark.parametrize("value", [["a", "b"], ("a", "b"), iter(["a", "b"]), {"a": 1, "b": 2}])
def test_check_str_list_copies_any_iterable_of_str(value):
    assert check_str_list("ids", value) == ["a", "b"]


def test_check_str_list_returns_a_new_list():
    given = ["a"]
    result = check_str_list("ids", given)
    assert result == given and result is not given
    assert check_str_list("ids", []) == []


@pytest.mark.parametrize("value", ["ab", b"ab"])
def test_check_str_list_refuses_a_lone_string(value):
    with pytest.raises(MemoryTypeError) as info:
        check_str_list("ids", value)
    assert str(info.value) == f"ids: expected a sequence of str, got {type(value).__name__}"


@pytest.mark.parametrize("value, bad", [(["a", 1], "int"), ([None], "NoneType"), (["a", b"b"], "bytes")])
def test_check_str_list_names_a_bad_item(value, bad):
    with pytest.raises(MemoryTypeError) as info:
        check_str_list("texts", value)
    assert str(info.value) == f"texts[]: expected str, got {bad}" and info.value.field == "texts[]"
