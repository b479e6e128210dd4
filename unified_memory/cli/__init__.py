"""The ``unified-memory`` command line (also ``python -m unified_memory``).

Commands: ``demo``, ``recall``, ``context``, ``facts``, ``entities``, ``graph``,
``episodes``, ``stats``, ``reindex``, ``ingest``, ``export``, ``import``, ``forget``,
``mcp`` (MCP over stdio for one user; needs the ``server`` extra).
Global options (before or after the command): ``--db PATH`` (default
``$UNIFIED_MEMORY_DB``, else ``unified_memory.db`` here), ``--user USER``, ``--json``
(one JSON document on stdout), ``--retrieval {auto,lexical,embedding,hybrid}``,
``--debug``. Errors are one line on stderr, exit status 1 (2 for usage errors).

``demo`` writes ``--user`` (default: the sample's ``ada``) and prints the commands to
explore it. The reading commands (recall, context, facts, entities, graph, episodes,
stats, export, forget) refuse a user the file holds nothing of, naming the users it
holds; ``reindex``, ``ingest`` and ``import`` may write a new one. ``ingest`` extracts
facts, entities and relations (``--no-extract``: history only); ``import --as-user U``
copies an export as ``U`` with fresh ids, into the file it came from too; ``forget
--user U [--id ID ...]`` deletes everything of ``U`` or only those records, after a
prompt (declining deletes nothing, exit status 0).

    >>> main(["stats", "--db", "/no/such/dir/m.db"])
    1
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence

from unified_memory.cli._common import CliError
from unified_memory.cli._format import format_table, progress
from unified_memory.cli._parser import PROG, build_parser
from unified_memory.errors import UnifiedMemoryError

__all__ = ["main", "build_parser", "progress", "format_table"]


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (``sys.argv[1:]`` by default); returns the exit status.

    >>> main(["--help"])  # doctest: +ELLIPSIS
    usage: unified-memory [-h] ...
    0
    """
    parser = build_parser()
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(None if argv is None else list(argv))
        debug = args.debug
        return int(args.handler(args) or 0)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else _fail(str(exc.code), 2))
    except CliError as exc:
        return _fail(str(exc), exc.code)
    except BrokenPipeError:  # `unified-memory facts | head`: stop quietly
        try:  # no second BrokenPipeError when the interpreter flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except (UnifiedMemoryError, OSError) as exc:
        if debug:
            traceback.print_exc()
        return _fail(str(exc) or type(exc).__name__, 1)
    except Exception as exc:
        if debug:
            raise
        return _fail(f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)", 1)
