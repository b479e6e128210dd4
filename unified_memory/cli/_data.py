"""The commands that move data in and out: ingest, export, import, forget.

They call the memory's ``ingest``, ``export_jsonl``, ``import_jsonl`` and ``forget``.

    >>> print(counts_text({"messages": 3, "facts": 1}))
    forgot 3 messages, 1 facts
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from tiers.storage.postgres_backend import displayed, is_url
from unified_memory.cli._common import CliError, db_path, emit, open_memory, user_of
from unified_memory.cli._format import format_pairs, progress, to_jsonable

__all__ = ["existing_file", "counts_text", "cmd_ingest", "cmd_export", "cmd_import",
           "cmd_forget"]


def existing_file(name: str) -> Path:
    """``name`` as a path to a readable file, or a :class:`CliError` saying what is wrong.

    >>> existing_file("/no/such/file.json")
    Traceback (most recent call last):
    ...
    unified_memory.cli._common.CliError: /no/such/file.json: no such file
    """
    path = Path(name)
    if not path.exists():
        raise CliError(f"{name}: no such file")
    if path.is_dir():
        raise CliError(f"{name}: is a directory, not a file")
    return path


@contextlib.contextmanager
def _new_file_removed_on_error(path: Path | str) -> Iterator[None]:
    """Remove the memory file a failed ``ingest`` / ``import`` created (a bad input file leaves none)."""
    existed = is_url(str(path)) or os.path.exists(path)
    try:
        yield
    except BaseException:
        if not existed:
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
        raise


def counts_text(counts: Mapping[str, int]) -> str:
    """What ``forget`` deleted, as one line.

    >>> counts_text({})
    'forgot nothing'
    """
    if not counts:
        return "forgot nothing"
    return "forgot " + ", ".join(f"{n} {kind}" for kind, n in counts.items())


def cmd_ingest(args: argparse.Namespace) -> int:
    """``ingest FILE [--format auto|openai|jsonl|locomo] [--no-extract]``: conversations from a file,
    with a progress bar; facts, entities and relations are extracted unless ``--no-extract``."""
    path = existing_file(args.file)
    skip = {} if args.extract else {"extract": False}  # the library's default otherwise
    with _new_file_removed_on_error(db_path(args)), open_memory(args, must_exist=False) as mem, \
            progress() as bar:
        report = mem.ingest(path, format=args.format, user_id=args.user, progress=bar, **skip)
    fields = to_jsonable(report)
    emit(args, report, lambda: format_pairs(fields.items()) if isinstance(fields, dict) else str(fields))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``export [FILE|-] [--all-users]``: memories as JSON lines (to stdout with ``-``)."""
    with open_memory(args, known_user=not args.all_users) as mem:
        export = mem.export_jsonl
        if args.file != "-":
            count = export(str(args.file), all_users=args.all_users)
            emit(args, {"path": str(args.file), "records": count},
                 lambda: f"exported {count} records to {args.file}")
            return 0
        count = export(sys.stdout, all_users=args.all_users)  # the JSON lines are stdout's document
    sys.stdout.flush()
    if not args.json:
        print(f"exported {count} records", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """``import FILE [--as-user U]``: memories from a JSON lines export."""
    path = existing_file(args.file)
    with _new_file_removed_on_error(db_path(args)), open_memory(args, must_exist=False) as mem:
        count = mem.import_jsonl(str(path), user_id=args.as_user)
        emit(args, {"path": str(path), "records": count, "user": args.as_user},
             lambda: f"imported {count} records from {path}" + (f" as user {args.as_user!r}" if args.as_user else ""))
    return 0


def _confirmed(question: str) -> bool:
    """Whether the person at the terminal answers yes; refusing (CliError) when stdin is no terminal."""
    if not sys.stdin.isatty():
        raise CliError("forget: refusing to delete without --yes (stdin is not a terminal)")
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def cmd_forget(args: argparse.Namespace) -> int:
    """``forget [--user U] [--id ID ...] [--yes]``: delete a user's memories (every one, or
    those records), after confirmation. A declined prompt deletes nothing and is no error."""
    if not getattr(args, "user", None) and not args.ids:
        raise CliError("forget: say what to forget: --user U (everything of U) and/or --id ID "
                       "(see 'unified-memory forget --help')", code=2)
    user = user_of(args)
    with open_memory(args, known_user=True) as mem:
        if args.ids:
            what = f"{len(args.ids)} record(s) of user {user!r}"
        else:
            stats = mem.stats()
            what = (f"every memory of user {user!r} ({stats.messages} messages, "
                    f"{stats.facts + stats.superseded_facts + stats.archived_facts} facts, {stats.entities} entities)")
        if not args.yes and not _confirmed(f"Forget {what} in {str(db_path(args))!r}?"):
            emit(args, {"cancelled": True}, lambda: "cancelled; nothing was deleted")
            return 0
        counts = mem.forget(ids=list(args.ids)) if args.ids else mem.forget()
        emit(args, counts, lambda: counts_text(counts))
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """``migrate SRC DST``: copy a whole memory to an empty database (a SQLite file or a
    ``postgresql://`` URL, either way), then check the copy holds the same rows."""
    from unified_memory.io.migrate import migrate_database

    if not is_url(args.source) and not Path(args.source).exists():
        raise CliError(f"migrate: no memory file at {args.source!r}")
    with progress() as bar:
        report = migrate_database(args.source, args.destination, progress=bar)
    names = [displayed(t) for t in (args.source, args.destination)]
    total = sum(report.rows.values())
    emit(args, {"source": names[0], "destination": names[1], "rows": report.rows, "users": report.users,
                "verified": report.verified, "indexed_users": report.indexed_users},
         lambda: f"migrated {total} rows of {len(report.users)} users from {names[0]} to {names[1]} "
                 "(verified: the same rows on both sides)"
                 + (f"; search tables filled for {report.indexed_users} users" if report.indexed_users else ""))
    return 0

