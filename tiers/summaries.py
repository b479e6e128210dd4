"""The running summary of each conversation: what left its short-term window, condensed.

    >>> from tiers.storage.backend import Storage, Scope
    >>> store = ConversationSummaries(Storage(None))
    >>> with store.storage.atomic():
    ...     store.put(Scope("ada", session_id="s1"), "user: I'm allergic to peanuts.", messages=2, now=0.0)
    >>> store.get(Scope("ada", session_id="s1")), store.get(Scope("ada"))
    (("user: I'm allergic to peanuts.", 2), None)
"""

from __future__ import annotations

from tiers.storage.backend import Scope, Storage

__all__ = ["ConversationSummaries"]


class ConversationSummaries:
    """The ``summaries`` table: one running summary per user, agent and session."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def get(self, scope: Scope) -> tuple[str, int] | None:
        """``(text, messages summarised)`` of this conversation, if it has a summary."""
        row = self.storage.execute(
            "SELECT text, messages FROM summaries WHERE user_id = ? AND agent_id = ? AND session_id = ?",
            [scope.user_id, scope.agent_id, scope.session_id]).fetchone()
        return (row[0], int(row[1])) if row else None

    def put(self, scope: Scope, text: str, *, messages: int, now: float) -> None:
        """Replace this conversation's summary (call inside ``storage.atomic()``)."""
        self.storage.execute(
            "INSERT INTO summaries (user_id, agent_id, session_id, text, messages, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, agent_id, session_id) DO UPDATE SET "
            "text = excluded.text, messages = excluded.messages, updated_at = excluded.updated_at", [scope.user_id, scope.agent_id, scope.session_id, text, messages, now])

    def delete_conversation(self, scope: Scope) -> int:
        """Forget the running summary of exactly this conversation (user, agent and session)."""
        return self.storage.execute("DELETE FROM summaries WHERE user_id = ? AND agent_id = ? AND session_id = ?",
                                    [scope.user_id, scope.agent_id, scope.session_id]).rowcount

    def delete_scope(self, scope: Scope) -> int:
        """Forget the user's summaries (only that agent's when the scope has one)."""
        agent_sql, params = ("agent_id = ?", [scope.agent_id]) if scope.agent_id else ("TRUE", [])
        return self.storage.execute(f"DELETE FROM summaries WHERE user_id = ? AND {agent_sql}",
                                    [scope.user_id, *params]).rowcount
