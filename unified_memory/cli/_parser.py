"""The argument parser of ``unified-memory``: global options and one subcommand per job.

Global options are accepted before the command and after it (``unified-memory recall
peanuts --json``); a parse error is one line on stderr and exit status 2.

    >>> args = build_parser().parse_args(["--db", "m.db", "recall", "peanuts", "--limit", "3", "--json"])
    >>> args.command, args.query, args.limit, args.json, args.db
    ('recall', 'peanuts', 3, True, 'm.db')
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any, NoReturn

from unified_memory.cli import _commands, _data, _demo, _mcp, _service
from unified_memory.cli._common import PROG, CliError
from unified_memory.types import TIERS

__all__ = ["PROG", "build_parser"]

FORGET_EXAMPLES = f"""examples:
  {PROG} forget --user bob                   everything about bob (asks first)
  {PROG} forget --user bob --id fact_1a2b    only this record of bob (--id repeats)
  {PROG} forget --id fact_1a2b --yes         a record of the default user, without asking
Record ids are the "id" fields of the --json output of facts, entities, graph, episodes and recall."""
RETRIEVALS = ("auto", "lexical", "embedding", "hybrid")
FORMATS = ("auto", "openai", "jsonl", "locomo")


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage dump), raised as :class:`CliError`."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')", code=2)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    """A TCP port: 1 to 65535 (a larger number would wrap in the socket call and listen elsewhere)."""
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 1 to 65535, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _moment(text: str) -> str:
    """An ISO 8601 date or date and time (``2024-03-01``, ``2024-03-01T12:00``; no zone: UTC)."""
    try:
        datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO date or date and time, got {text!r}") from None
    return text


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool, user: bool = True) -> None:
    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("global options")
    group.add_argument("--db", metavar="PATH", default=default(None),
                       help="memory file (default: $UNIFIED_MEMORY_DB, else unified_memory.db here)")
    if user:
        group.add_argument("--user", metavar="USER", default=default(None), help="user to act for (default: default)")
    group.add_argument("--json", action="store_true", default=default(False),
                       help="print one JSON document on stdout instead of tables")
    group.add_argument("--retrieval", choices=RETRIEVALS, default=default(None),
                       help="retrieval method (default auto: hybrid with the embeddings extra, else lexical)")
    group.add_argument("--redact-secrets", action="store_true", default=default(False),
                       help="scrub API keys, e-mails, phone numbers and card numbers before storing (SecretRedactor)")
    group.add_argument("--debug", action="store_true", default=default(False),
                       help="show a traceback on unexpected errors")


def build_parser() -> argparse.ArgumentParser:
    """The ``unified-memory`` parser (each subcommand's handler is ``args.handler``).

    >>> build_parser().parse_args(["stats"]).handler.__name__
    'cmd_stats'
    """
    parser = _Parser(prog=PROG, description="Explore and manage a unified-memory file: tiered long-term memory "
                     "for LLM agents (facts, entities, episodes) in one SQLite file.")
    _global_options(parser, suppress=False)
    common = _Parser(add_help=False)
    _global_options(common, suppress=True)
    common_no_user = _Parser(add_help=False)
    _global_options(common_no_user, suppress=True, user=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, handler: object, help: str, *, parent: _Parser = common,
                **options: Any) -> _Parser:
        sub = commands.add_parser(name, help=help, description=help, parents=[parent], **options)
        sub.set_defaults(handler=handler)
        return sub

    sub = command("demo", _demo.cmd_demo, "(re)create a demo memory from a sample conversation and show "
                  "what it remembers")
    sub.add_argument("path", nargs="?", metavar="PATH",
                     help="memory file to (re)create (default: --db, else unified_memory_demo.db)")

    sub = command("migrate", _data.cmd_migrate, "copy a whole memory to an empty database (a SQLite file or a "
                  "postgresql:// URL), then check the copy", parent=common_no_user)
    sub.add_argument("source", metavar="SRC", help="the memory to copy: a file, or postgresql://user@host/db")
    sub.add_argument("destination", metavar="DST", help="an empty database: a file, or postgresql://user@host/db")

    sub = command("recall", _commands.cmd_recall, "federated recall over the tiers, best first, with score "
                  "components")
    sub.add_argument("query", metavar="QUERY")
    sub.add_argument("--limit", type=_positive_int, default=10, metavar="N", help="at most N hits (default 10)")
    sub.add_argument("--tiers", nargs="+", choices=TIERS, metavar="TIER",
                     help=f"only these tiers ({', '.join(TIERS)})")
    sub.add_argument("--days", type=_positive_float, metavar="N", help="only items from the last N days")
    sub.add_argument("--as-of", type=_moment, metavar="DATE",
                     help="what was true then (ISO date or date and time, UTC unless it says)")

    sub = command("context", _commands.cmd_context, "assemble a token-budgeted memory block for a query")
    sub.add_argument("query", nargs="?", metavar="QUERY", help="what the next LLM call is about (optional)")
    sub.add_argument("--max-tokens", type=_positive_int, metavar="N", help="token budget (default: configured)")
    sub.add_argument("--as-of", type=_moment, metavar="DATE",
                     help="from what was true then (ISO date or date and time, UTC unless it says)")

    sub = command("facts", _commands.cmd_facts, "list long-term facts, most important first")
    sub.add_argument("--category", metavar="C", help="only this category")
    sub.add_argument("--archived", action="store_true",
                     help="include archived facts (pushed out of the active ones by long_term_limit)")
    sub.add_argument("--history", action="store_true",
                     help="include superseded facts, with when each was true (valid from / to)")
    sub.add_argument("--all", action="store_true", help="include superseded, archived and expired facts")
    sub.add_argument("--limit", type=_positive_int, metavar="N", help="at most N facts")

    sub = command("entities", _commands.cmd_entities, "list entities, most mentioned first")
    sub.add_argument("--type", metavar="T", help="only this type (person, place, organization, ...)")
    sub.add_argument("--limit", type=_positive_int, metavar="N", help="at most N entities")

    sub = command("graph", _commands.cmd_graph, "relations around an entity in the knowledge graph")
    sub.add_argument("entity", metavar="ENTITY", help="an entity name ('user' is the user)")
    sub.add_argument("--depth", type=_positive_int, default=1, metavar="N", help="hops to follow (default 1)")

    sub = command("episodes", _commands.cmd_episodes, "the episodic log of messages, oldest first")
    sub.add_argument("--days", type=_positive_float, metavar="N", help="only the last N days")
    sub.add_argument("--session", metavar="S", help="only this session")
    sub.add_argument("--limit", type=_positive_int, metavar="N", help="only the last N messages")

    sub = command("profile", _commands.cmd_profile, "the user's key facts, safety first (what every context shows)")
    sub.add_argument("--as-of", type=_moment, metavar="DATE",
                     help="as it was then (ISO date or date and time, UTC unless it says)")

    command("stats", _commands.cmd_stats, "counts of what the user's memory holds")

    sub = command("reindex", _commands.cmd_reindex, "rebuild the derived search indexes from the file")
    sub.add_argument("--all-users", action="store_true", help="every user in the file, not only --user")

    sub = command("ingest", _data.cmd_ingest, "ingest conversations from a file (OpenAI messages, JSONL, LoCoMo) "
                  "and extract facts, entities and relations from the user's messages")
    sub.add_argument("file", metavar="FILE")
    sub.add_argument("--format", choices=FORMATS, default="auto", help="file format (default: detect)")
    sub.add_argument("--no-extract", dest="extract", action="store_false",
                     help="store the messages as history only: no facts, entities or relations extracted")

    sub = command("export", _data.cmd_export, "export memories as JSON lines")
    sub.add_argument("file", nargs="?", default="-", metavar="FILE", help="output file, '-' for stdout (default)")
    sub.add_argument("--all-users", action="store_true", help="every user in the file, not only --user")

    sub = command("import", _data.cmd_import, "import memories from a JSON lines export")
    sub.add_argument("file", metavar="FILE")
    sub.add_argument("--as-user", metavar="U", help="import everything as user U")

    sub = command("mcp", _mcp.cmd_mcp, "serve --user's memory to an MCP client over stdin/stdout (tools: "
                  "remember, recall, context, log_turn, forget); needs the server extra")
    sub.add_argument("--agent", metavar="A", help="the agent's own scope within the user's memory (optional)")
    sub.add_argument("--session", metavar="S", help="the conversation's session id (optional)")

    sub = command("forget", _data.cmd_forget, "delete a user's memories, or some records by id",
                  parent=common_no_user, epilog=FORGET_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                  usage=f"{PROG} forget [--user U] [--id ID [--id ID ...]] [--yes] [global options]")
    sub.add_argument("--user", metavar="U", default=argparse.SUPPRESS,
                     help="whose memories: everything of U, or with --id only those records of U "
                          "(default: the global --user, else the user 'default')")
    sub.add_argument("--id", dest="ids", action="append", metavar="ID",
                     help="forget only this record and what derives from it (repeatable)")
    sub.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")

    sub = command("keys", None, "manage the service's API keys (create, list, revoke)", parent=common_no_user)
    keys = sub.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = keys.add_parser("create", parents=[common_no_user], help="create a key (printed once, on the last line)",
                             description="create an API key for one user, or an admin key for every user; "
                                         "the key is printed once, on the last line (only its hash is stored)")
    create.set_defaults(handler=_service.cmd_keys_create)
    create.add_argument("--user", metavar="USER", help="the user the key acts for")
    create.add_argument("--admin", action="store_true", help="a key for every user (and the admin routes)")
    create.add_argument("--label", metavar="TEXT", default="", help="a note shown by 'keys list'")
    listing = keys.add_parser("list", parents=[common_no_user], help="list the keys (ids, users; never the keys)")
    listing.set_defaults(handler=_service.cmd_keys_list)
    revoke = keys.add_parser("revoke", parents=[common_no_user], help="revoke a key by its id")
    revoke.set_defaults(handler=_service.cmd_keys_revoke)
    revoke.add_argument("key_id", metavar="KEY_ID", help="the id column of 'keys list'")

    sub = command("serve", _service.cmd_serve, "run the HTTP service (JSON API, MCP at /mcp) over the memory file",
                  parent=common_no_user)
    sub.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sub.add_argument("--port", type=_port, default=8080, help="port, 1 to 65535 (default 8080)")
    sub.add_argument("--max-body-bytes", type=_positive_int, default=2 * 1024 * 1024, metavar="N",
                     help="refuse request bodies over N bytes with 413 (default 2 MiB; imports: 256 MiB)")
    sub.add_argument("--max-failed-auth", type=_positive_int, default=20, metavar="N",
                     help="answer 429 to a client address after N failed authentications in a minute (default 20; "
                          "a valid key is still admitted)")
    sub.add_argument("--trusted-proxy", dest="trusted_proxies", action="append", default=[], metavar="ADDR",
                     help="a proxy (address, network or '*') whose X-Forwarded-For names the client (repeatable; "
                          "default: none, the client is the TCP peer)")
    sub.add_argument("--header-timeout", type=_positive_float, default=10.0, metavar="S",
                     help="close a connection whose request head is not complete within S seconds (default 10)")
    sub.add_argument("--body-timeout", type=_positive_float, default=30.0, metavar="S",
                     help="answer 408 to a request whose body pauses for S seconds (default 30)")
    sub.add_argument("--max-connections", type=_positive_int, default=1000, metavar="N",
                     help="answer 503 on connections beyond N open ones, per process (default 1000)")
    sub.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                     help="N service processes on the one port and file, to use more cores (default 1)")
    sub.add_argument("--pool-size", type=_positive_int, metavar="N",
                     help="PostgreSQL: connections per process for the memory and for the keys (default 4: "
                          "one for writes, up to N - 1 more for reads beside them); a SQLite file ignores it")
    sub.add_argument("--no-mcp", action="store_true", help="do not mount the MCP server at /mcp")
    sub.add_argument("--no-console", action="store_true", help="do not serve the web console at /ui")
    sub.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info",
                     help="log level (the access log is one JSON line per request at info)")

    sub = command("ui", _service.cmd_ui, "open the web console for the memory file on loopback (prints the "
                  "address and a temporary admin key); needs the server extra", parent=common_no_user)
    sub.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sub.add_argument("--port", type=_port, default=8765, help="port, 1 to 65535 (default 8765)")
    sub.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="warning",
                     help="log level (default warning)")
    return parser
