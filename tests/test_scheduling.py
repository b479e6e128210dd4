"""The order tests are handed to xdist workers (tests/scheduling.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduling import LONG, _shares, arrange, load_durations

durations_of = st.dictionaries(st.sampled_from([f"t{i}" for i in range(60)]),
                               st.floats(min_value=0, max_value=300, allow_nan=False), max_size=60)


@settings(max_examples=200)
@given(st.integers(min_value=0, max_value=60), durations_of, st.integers(min_value=1, max_value=6))
def test_every_test_runs_once_and_each_block_leads_with_its_long_tests_balanced(count, durations, workers):
    ids = [f"t{i}" for i in range(count)]
    order = arrange(ids, durations, workers=workers)
    assert sorted(order) == sorted(ids)  # a permutation: nothing dropped, nothing twice
    if workers < 2 or not ids:
        assert order == ids
        return
    sizes = _shares(len(ids), workers)
    assert sum(sizes) == len(ids)
    start, loads, longest = 0, [], 0.0
    for size in sizes:
        block = order[start:start + size]
        start += size
        long_part = [i for i in block if durations.get(i, 0) >= LONG]
        assert block[:len(long_part)] == long_part  # long tests lead their block...
        assert [durations[i] for i in long_part] == sorted((durations[i] for i in long_part), reverse=True)
        short_part = block[len(long_part):]
        assert short_part == sorted(short_part, key=ids.index)  # ...short ones keep their order
        loads.append(sum(durations[i] for i in long_part))
        longest = max([longest, *(durations[i] for i in long_part)])
    long_total = sum(v for k, v in durations.items() if k in ids and v >= LONG)
    if len([i for i in ids if durations.get(i, 0) >= LONG]) <= min(sizes):  # no block ran out of room
        assert max(loads) <= long_total / workers + longest + 1e-6  # the bound of greedy longest-first


def test_the_recorded_durations_name_tests_and_seconds():
    recorded = load_durations()
    assert recorded, "tests/data/durations.json is missing or empty: python -m tests.scheduling REPORT"
    assert all("::" in k and v >= LONG for k, v in recorded.items())


def test_a_missing_or_damaged_file_only_loses_the_order(tmp_path):
    assert load_durations(tmp_path / "none.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    assert load_durations(tmp_path / "bad.json") == {}
    assert arrange(["a", "b"], {}, workers=2) == ["a", "b"]
