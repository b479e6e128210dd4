"""Who an item belongs to: :class:`Scope` (user, agent, session) and :data:`NO_SCOPE`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Scope", "NO_SCOPE"]

# agent_id / session_id are stored as '' when absent so equality tests work in SQL.
NO_SCOPE = ""


@dataclass(frozen=True, slots=True)
class Scope:
    """Who an item belongs to. ``user_id`` is a hard boundary; ``agent_id`` and
    ``session_id`` are stored as ``''`` when absent (see :data:`NO_SCOPE`).

    >>> Scope("ada").agent_id
    ''
    """

    user_id: str
    agent_id: str = NO_SCOPE
    session_id: str = NO_SCOPE

    def agent_clause(self, column: str = "agent_id") -> tuple[str, list[str]]:
        """SQL (and params) selecting items visible to this scope's agent: its own
        and those shared by all agents; every agent's items when no agent is set."""
        if self.agent_id == NO_SCOPE:
            return "TRUE", []
        return f"({column} = ? OR {column} = '')", [self.agent_id]
