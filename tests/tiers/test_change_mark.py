"""Storage.change_mark: what a reader keeps until anything is written (by this connection or another)."""

from tiers.storage.backend import Storage


def test_the_mark_changes_with_every_write_of_this_connection_or_another(tmp_path, storage_backend):
    one, two = Storage(tmp_path / "m.db"), Storage(tmp_path / "m.db")
    try:
        if storage_backend == "postgresql":  # another host's writes are not all heard of: nothing is kept
            assert one.change_mark() is None
            return
        first = one.change_mark()
        assert one.change_mark() == first  # reading changes nothing
        one.get_meta("anything")
        assert one.change_mark() == first
        with one.atomic():
            one.set_meta("k", "1")
        second = one.change_mark()
        assert second != first  # this connection wrote
        with two.atomic():
            two.set_meta("k", "2")
        assert one.change_mark() != second  # another one did
        third = one.change_mark()
        try:
            with one.atomic():
                one.set_meta("k", "3")
                raise RuntimeError("undo")
        except RuntimeError:
            pass
        assert one.change_mark() != third  # rolled back: told anyway (keeping less is safe)
    finally:
        one.close()
        two.close()
