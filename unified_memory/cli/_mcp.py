"""``unified-memory mcp``: serve one user's memory over MCP on stdin/stdout.

An MCP client (a desktop assistant, an IDE agent) launches it as its memory server::

    unified-memory mcp --db ~/memory.db --user ada

Only MCP messages go to stdout; logs go to stderr. Needs the ``server`` extra
(``pip install 'unified-memory[server]'``); the MCP SDK is imported only when the
command runs, so the other commands stay light.

    >>> from unified_memory.cli._parser import build_parser
    >>> args = build_parser().parse_args(["mcp", "--db", "m.db", "--user", "ada", "--agent", "ide"])
    >>> args.handler.__name__, args.user, args.agent, args.session
    ('cmd_mcp', 'ada', 'ide', None)
"""

from __future__ import annotations

import argparse
import logging
import sys

from unified_memory.cli._common import db_path, settings_of, user_of
from unified_memory.errors import DependencyError

__all__ = ["INSTALL_HINT", "cmd_mcp"]

INSTALL_HINT = "pip install 'unified-memory[server]'"


def cmd_mcp(args: argparse.Namespace) -> int:
    """Run the MCP server over stdio for ``--user`` until the client closes stdin; returns 0."""
    try:
        from unified_memory.service.mcp import run_stdio
    except ImportError as exc:
        if isinstance(exc, DependencyError) or (exc.name or "").split(".")[0] not in ("mcp", "mcp_types",
                                                                                      "starlette", "anyio"):
            raise
        raise DependencyError(f"the MCP server needs the server extra ({exc.name} is missing): "
                              f"{INSTALL_HINT}") from exc
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run_stdio(db_path(args), user_of(args), agent_id=args.agent, session_id=args.session, **settings_of(args))
    return 0
