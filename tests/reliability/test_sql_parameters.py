"""SQL is parameterised (issue 8): no caller value ever becomes SQL text.

Every SQLite connection the library opens is swapped for one that records the SQL
text it is given (before parameters are bound); on PostgreSQL, every statement a psycopg
cursor is given is recorded too. A workload then passes distinctive
"canary" values through every caller-controlled field — user, agent and session ids,
texts, names, metadata keys and values, entity names, categories, queries, ``where``
filters, import files, conversation-store namespaces and session ids — with SQL
metacharacters in them; not one canary may appear in any recorded statement, and the
values come back intact.
"""

from __future__ import annotations

import io
import json
import sqlite3

import pytest

from unified_memory import MemoryValueError, NotFoundError, SQLiteConversationStore, UnifiedMemory
from unified_memory.conversation.engine import Conversation
from unified_memory.testing import FakeEmbedder

CANARY = "zq9canary"
EVIL = f"{CANARY}'); DROP TABLE facts; --\" OR 1=1"


class RecordingCursor(sqlite3.Cursor):
    def execute(self, sql, *args):
        self.connection.recorded.append(sql)
        return super().execute(sql, *args)

    def executemany(self, sql, *args):
        self.connection.recorded.append(sql)
        return super().executemany(sql, *args)

    def executescript(self, sql):
        self.connection.recorded.append(sql)
        return super().executescript(sql)


class RecordingConnection(sqlite3.Connection):
    recorded: list[str]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.recorded = RECORDED

    def cursor(self, factory=RecordingCursor):
        return super().cursor(factory)

    def execute(self, sql, *args):
        self.recorded.append(sql)
        return super().execute(sql, *args)

    def executemany(self, sql, *args):
        self.recorded.append(sql)
        return super().executemany(sql, *args)

    def executescript(self, sql):
        self.recorded.append(sql)
        return super().executescript(sql)


RECORDED: list[str] = []


@pytest.fixture
def recorded(monkeypatch, storage_backend):
    real_connect = sqlite3.connect
    RECORDED.clear()

    def connect(*args, **kwargs):
        kwargs.setdefault("factory", RecordingConnection)
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    if storage_backend == "postgresql":  # every statement psycopg sends (Connection.execute uses a cursor)
        import psycopg

        for name in ("execute", "executemany", "stream", "copy"):
            monkeypatch.setattr(psycopg.Cursor, name, recording(getattr(psycopg.Cursor, name)))
    yield RECORDED
    RECORDED.clear()


def recording(method):
    def record(self, query, *args, **kwargs):
        RECORDED.append(query if isinstance(query, str) else repr(query))  # a psycopg.sql.Composed: its parts
        return method(self, query, *args, **kwargs)

    return record


def canary(label: str) -> str:
    return f"{CANARY}_{label} {EVIL}"


def test_no_caller_value_reaches_sql_text(recorded, tmp_path, clock, figures, storage_backend):
    ident = f"{CANARY}_user-1"  # ids allow letters, digits, _ - . : @ (validated), not quotes
    with UnifiedMemory(tmp_path / "m.db", user_id=ident, agent_id=f"{CANARY}_agent", session_id=f"{CANARY}_s",
                       clock=clock, embedder=FakeEmbedder(dim=16), retrieval="hybrid", short_term_limit=2) as mem:
        mem.add_message("user", canary("message"), name=f"{CANARY}_name",
                        metadata={f"{CANARY}_key": canary("value"), "n": 1})
        mem.add_turn(canary("turn") + " I live in Lisbon", canary("reply"))
        mem.add_turn("My sister Maria lives in Porto", "ok")
        fact = mem.remember(canary("fact"), category=f"{CANARY}_category", metadata={"topic": canary("topic")})
        mem.remember_many([canary("bulk one"), {"text": canary("bulk two"), "importance": 0.7}])
        mem.add_triple(canary("subject"), f"{CANARY}_likes", canary("object"))
        mem.end_session()
        assert mem.recall(canary("query"), where={f"{CANARY}_key": canary("value")})
        assert mem.recall(canary("query"), where={"topic": canary("topic")}, tiers="long_term")
        mem.recall(canary("query"), days=3, tiers=["long_term", "entity", "episodic", "short_term"])
        assert CANARY in mem.context(canary("query")).text
        mem.facts(category=f"{CANARY}_category")
        mem.triples(canary("subject"))
        mem.entities(type=f"{CANARY}_type")
        mem.episodes(session_id=f"{CANARY}_s")
        out = io.StringIO()
        assert mem.export_jsonl(out) > 0
        other = mem.scoped(user_id=f"{CANARY}_other")
        other.import_jsonl(io.StringIO(out.getvalue()))
        with pytest.raises(NotFoundError):
            other.forget(ids=[f"{CANARY}_no_such_id", fact])
        mem.forget(ids=[fact])
        assert mem.forget(user_id=f"{CANARY}_other")
    with UnifiedMemory(tmp_path / "m.db", user_id=ident, clock=clock) as again:
        assert any(CANARY in f.text and "DROP TABLE" in f.text for f in again.facts())  # stored verbatim
    with pytest.raises(MemoryValueError, match="table"):  # the one identifier a caller may choose is checked
        SQLiteConversationStore(tmp_path / "sessions.db", table='sessions"; DROP TABLE facts; --')
    store = SQLiteConversationStore(tmp_path / "sessions.db")
    conversation = Conversation(session_id=f"{CANARY}_session", user_id=f"{CANARY}_u")
    conversation.add(role="user", content=canary("conversation"))
    conversation.save(store, namespace=f"{CANARY}_ns")
    loaded = Conversation.load(store, f"{CANARY}_session", namespace=f"{CANARY}_ns")
    assert loaded.messages()[-1].content == canary("conversation")
    assert store.list(namespace=f"{CANARY}_ns") == [f"{CANARY}_session"]
    assert store.delete(f"{CANARY}_session", namespace=f"{CANARY}_ns")

    assert recorded, "the recording connection was not used"
    if storage_backend == "postgresql":
        assert any("%s" in sql for sql in recorded), "psycopg's statements were not recorded"
    leaked = [sql for sql in recorded if CANARY in sql]
    assert not leaked, json.dumps(leaked[:3])
    figures("parameterised SQL", statements_recorded=len(recorded), distinct_statements=len(set(recorded)),
            caller_values_in_sql=len(leaked))
