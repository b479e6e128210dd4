"""The service commands: ``keys create / list / revoke`` (the API keys in the memory file),
``serve`` (the HTTP service, with MCP at ``/mcp`` and the console at ``/ui``) and ``ui`` (the
console alone, on loopback, for a local file). The server extra is imported only here,
only when these commands run.

    >>> import tempfile
    >>> db = tempfile.mkdtemp() + "/m.db"
    >>> main_args = argparse.Namespace(db=db, user="ada", admin=False, label="", json=False)
    >>> cmd_keys_create(main_args)  # doctest: +ELLIPSIS
    created key ... for user 'ada' (shown once: only its hash is stored)
    um_...
    0
"""

from __future__ import annotations

import argparse
import datetime
import sys

from unified_memory.cli._common import CliError, DatabaseURL, db_path, emit, open_memory, say, settings_of
from unified_memory.cli._format import format_table
from unified_memory.errors import DependencyError

__all__ = ["cmd_keys_create", "cmd_keys_list", "cmd_keys_revoke", "cmd_serve", "cmd_ui"]

INSTALL_HINT = "pip install 'unified-memory[server]'"


def _ring(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from tiers.maintenance.keys import KeyRing
    from tiers.storage.backend import Storage

    return KeyRing(Storage(db_path(args)))


def _when(stamp: float | None) -> str:
    return "" if stamp is None else datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%d %H:%M")


def cmd_keys_create(args: argparse.Namespace) -> int:
    """Create a key for ``--user`` (or an admin key with ``--admin``); the key is the last line printed."""
    user = getattr(args, "user", None)
    if args.admin and user:
        raise CliError("keys create: give --user USER or --admin, not both")
    if not args.admin and not user:
        raise CliError("keys create: give --user USER (a key for that user) or --admin (a key for every user)")
    if user is not None:
        from unified_memory.validation import check_scope_id

        check_scope_id("user", user)
    ring = _ring(args)
    try:
        record, key = ring.create(None if args.admin else user, admin=args.admin, label=args.label or "")
    finally:
        ring.storage.close()
    whom = "every user (admin)" if args.admin else f"user {user!r}"
    if getattr(args, "json", False):
        emit(args, {"id": record.id, "user": record.owner, "admin": record.admin, "key": key}, lambda: "")
    else:
        say(f"created key {record.id} for {whom} (shown once: only its hash is stored)")
        say(key)
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    """The keys in the file (never the keys themselves)."""
    ring = _ring(args)
    try:
        records = ring.list()
    finally:
        ring.storage.close()
    data = [{"id": r.id, "user": r.owner, "admin": r.admin, "label": r.label, "created_at": r.created_at,
             "revoked_at": r.revoked_at} for r in records]
    emit(args, {"keys": data}, lambda: format_table(
        ["id", "user", "admin", "label", "created", "revoked"],
        [[r.id, r.owner or "*", "yes" if r.admin else "", r.label, _when(r.created_at), _when(r.revoked_at)]
         for r in records]) if records else "no keys")
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    """Revoke a key by its id (the ``id`` column of ``keys list``)."""
    ring = _ring(args)
    try:
        found = ring.revoke(args.key_id)
    finally:
        ring.storage.close()
    if not found:
        raise CliError(f"keys revoke: no key {args.key_id!r} in {str(db_path(args))!r} (see 'keys list')")
    emit(args, {"revoked": args.key_id}, lambda: f"revoked key {args.key_id}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the HTTP service (and MCP at /mcp) until interrupted, in one process or ``--workers N``."""
    try:
        from pydantic import ValidationError

        from unified_memory.service.app import ServiceSettings, serve, serve_workers
    except ImportError as exc:
        raise DependencyError(f"serve needs the server extra: {INSTALL_HINT} ({exc})") from None
    settings = {"max_body_bytes": args.max_body_bytes, "max_failed_auth": args.max_failed_auth,
                "mcp": not args.no_mcp, "console": not args.no_console, "trusted_proxies": args.trusted_proxies,
                "header_timeout": args.header_timeout, "body_timeout": args.body_timeout,
                "max_connections": args.max_connections}
    try:
        ServiceSettings(**settings)
    except ValidationError as exc:  # a bad --trusted-proxy, a timeout over an hour: said before the file opens
        first = exc.errors()[0]
        name = str(first["loc"][0])
        option = "--trusted-proxy" if name == "trusted_proxies" else "--" + name.replace("_", "-")
        raise CliError(f"serve: {option}: {str(first['msg']).removeprefix('Value error, ')}", code=2) from None
    memory = open_memory(args, must_exist=False)  # a bad file or option fails here, before any worker starts
    workers = f", {args.workers} worker processes" if args.workers > 1 else ""
    target = db_path(args)
    shown = repr(target) if isinstance(target, DatabaseURL) else repr(str(target))  # a URL without its password
    mounted = "API docs at /docs" + ("" if args.no_mcp else ", MCP at /mcp") + ("" if args.no_console else ", console at /ui")
    print(f"unified-memory: serving {shown} on http://{args.host}:{args.port}{workers} ({mounted})",
          file=sys.stderr, flush=True)
    if args.workers == 1:
        serve(memory, host=args.host, port=args.port, settings=settings, log_level=args.log_level)
        return 0
    memory.close()
    serve_workers(str(db_path(args)), workers=args.workers, overrides=settings_of(args), host=args.host,
                  port=args.port, settings=settings, log_level=args.log_level)
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    """Open the web console on loopback over the memory file: a temporary admin key is created
    (printed with the address, revoked when the command stops), then the service runs without
    MCP until interrupted."""
    try:
        from unified_memory.service.app import serve
    except ImportError as exc:
        raise DependencyError(f"ui needs the server extra: {INSTALL_HINT} ({exc})") from None
    memory = open_memory(args, must_exist=True)
    ring = _ring(args)
    try:
        record, key = ring.create(None, admin=True, label="unified-memory ui (revoked when it stops)")
    finally:
        ring.storage.close()
    address = f"http://{args.host}:{args.port}/ui/"
    print(f"unified-memory: console for {str(db_path(args))!r} at {address}\n"
          f"sign in with this key (revoked when this command stops):\n{key}", file=sys.stderr, flush=True)
    try:
        serve(memory, host=args.host, port=args.port, settings={"mcp": False}, log_level=args.log_level)
    finally:
        ring = _ring(args)
        try:
            ring.revoke(record.id)
        finally:
            ring.storage.close()
    return 0
