import pytest

from tiers.maintenance.ingested import IngestedKeys
from tiers.storage.backend import SCHEMA_VERSION, IntegrityError, Storage


def test_table_is_created_on_first_use_only(db_path):
    store = Storage(db_path)
    assert "ingested" not in store.table_infos()
    keys = IngestedKeys(store)
    assert keys.count() == 0
    info = store.table_infos()["ingested"]
    assert {c.name: c.affinity for c in info.columns} == {"user_id": "TEXT", "source_key": "TEXT", "ingested_at": "REAL"}
    assert [c.name for c in sorted(info.columns, key=lambda c: c.pk) if c.pk] == ["user_id", "source_key"]
    store.close()


def test_keys_persist_across_reopen_and_the_schema_version_is_unchanged(db_path):
    store = Storage(db_path)
    keys = IngestedKeys(store)
    with store.atomic():
        keys.record("ada", ["k1", "k2"], now=5.0)
    store.close()
    store = Storage(db_path)
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert IngestedKeys(store).existing("ada", ["k1", "k2", "k3"]) == {"k1", "k2"}
    assert store.execute("SELECT ingested_at FROM ingested WHERE source_key = 'k1'").fetchone()[0] == 5.0
    store.close()


def test_keys_are_per_user():
    keys = IngestedKeys(Storage(None))
    with keys.storage.atomic():
        keys.record("ada", ["k"], now=0.0)
        keys.record("bob", ["k"], now=0.0)
    assert keys.count("ada") == keys.count("bob") == 1
    assert keys.count() == 2
    with keys.storage.atomic():
        assert keys.forget("ada") == 1
    assert keys.existing("ada", ["k"]) == set() and keys.existing("bob", ["k"]) == {"k"}


def test_recording_a_known_key_fails_and_rolls_back_the_transaction():
    keys = IngestedKeys(Storage(None))
    with keys.storage.atomic():
        keys.record("ada", ["k1"], now=0.0)
    with pytest.raises(IntegrityError), keys.storage.atomic():
        keys.record("ada", ["k2"], now=0.0)
        keys.record("ada", ["k1"], now=0.0)
    assert keys.existing("ada", ["k1", "k2"]) == {"k1"}


def test_existing_handles_more_keys_than_one_query_takes():
    keys = IngestedKeys(Storage(None))
    many = [f"k{i}" for i in range(1234)]
    with keys.storage.atomic():
        keys.record("ada", many[::2], now=0.0)
    assert keys.existing("ada", many) == set(many[::2])
