"""Isolation (issue 8): a hypothesis state machine runs random operations for several
users, agents and sessions; recall, context, listing, export, the search tool and the
``@remember`` decorator never return another user's item.

Every written text carries a marker naming its owner and a unique item number
(``owner-u1-a2-s1-k17z``: user ``u1``, agent ``a2``, session ``s1``; ``na`` / ``ns`` when
none). The model records which scopes own each item number — an import with
``user_id=`` gives another user a copy — and which items must still be listable.

What each read may show, as documented (README "Scoping"; ``tiers.storage.backend.Scope``):

* the user is a hard boundary: nothing of another user, ever (every read);
* an agent sees its own items and those stored without an agent; a view without an
  agent sees every agent's items of its user (recall, context, facts, entities,
  triples, episodes, the recall tool, the decorator's injected block);
* sessions do not partition the long-term tiers or the episodic log (those are the
  user's, across sessions: a session view lists every session's items); the short-term
  window and its running summary are one conversation's: exactly that user, agent and
  session (``window()``, ``summary()``, recall's ``short_term`` hits), and
  ``episodes(session_id=...)`` holds that session's messages only;
* ``export_jsonl`` holds exactly the user's rows (every agent and session).

And nothing is lost: every item written and not forgotten is still listed by its
owner (``facts``, ``episodes``, ``triples`` and the export), also by each agent view
that may see it.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from itertools import product
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.reliability.conftest import scaled
from unified_memory import MemoryValueError, NotFoundError, UnifiedMemory, remember
from unified_memory.agents.tools import recall_tool, remember_tool

USERS = ("u1", "u2", "u3", "u4")
AGENTS = (None, "a1", "a2")
SESSIONS = (None, "s1", "s2")
MARKER = re.compile(r"owner-(u\d)-(a\d|na)-(s\d|ns)-k(\d+)z")
BROAD_QUERY = ("owner u1 u2 u3 u4 a1 a2 na s1 s2 ns note allergic chatted ingested tool target says "
               "remember like sure noted")

users = st.sampled_from(USERS)
agents = st.sampled_from(AGENTS)
sessions = st.sampled_from(SESSIONS)


@dataclass(frozen=True)
class Item:
    """A write the model expects its owner to list until it is forgotten."""

    kind: str  # "message", "fact" or "triple"
    user: str
    agent: str | None
    session: str | None
    k: int
    id: str | None  # None when the API did not return it (ingest, decorator, tool)


class IsolationMachine(RuleBasedStateMachine):
    """Random writes, deletions, imports and reads on one memory, for four users."""

    backend = "file"
    runs: ClassVar[int] = 0
    operations: ClassVar[int] = 0
    checks: ClassVar[int] = 0
    leaks: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="isolation-")
        if self.backend == "file":
            self.mem = UnifiedMemory(os.path.join(self.tmp, "memory.db"), retrieval="lexical", short_term_limit=3,
                                     long_term_limit=None)
        else:
            from unified_memory.testing import FakeEmbedder

            self.mem = UnifiedMemory(None, embedder=FakeEmbedder(dim=32), retrieval="hybrid", short_term_limit=3,
                                     long_term_limit=None)
        self.k = 0
        self.steps = 0
        self.owners: dict[int, set[tuple[str, str | None, str | None]]] = {}
        self.alive: dict[tuple[str, int], Item] = {}
        self.leaks: list[str] = []
        self.stash: tuple[str, str, list[Item]] | None = None  # (source user, its export, its items then)
        IsolationMachine.runs += 1

    def teardown(self) -> None:
        self.mem.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the model ----------------------------------------------------------------------------

    def marker(self, user: str, agent: str | None, session: str | None) -> tuple[int, str]:
        self.k += 1
        self.owners[self.k] = {(user, agent, session)}
        return self.k, f"owner-{user}-{agent or 'na'}-{session or 'ns'}-k{self.k}z"

    def written(self, kind: str, user: str, agent: str | None, session: str | None, k: int,
                item_id: str | None) -> None:
        self.alive[(user, k)] = Item(kind, user, agent, session, k, item_id)

    def view(self, user: str, agent: str | None = None, session: str | None = None) -> UnifiedMemory:
        return self.mem.scoped(user_id=user, agent_id=agent, session_id=session)

    def step(self) -> None:
        IsolationMachine.operations += 1

    # -- checks ---------------------------------------------------------------------------------

    def leak(self, what: str, text: str, scope: tuple[str, str | None, str | None], match: Any) -> None:
        IsolationMachine.leaks += 1
        self.leaks.append(f"{what} in scope {scope}: {match.group(0)} (owners {self.owners.get(int(match.group(4)))})"
                                f" in {text[:300]!r}")

    def check_visible(self, what: str, text: str, user: str, agent: str | None) -> None:
        """``text`` (read by ``user`` / ``agent``) names only items that scope may see."""
        IsolationMachine.checks += 1
        for match in MARKER.finditer(text):
            owners = self.owners.get(int(match.group(4)), set())
            if not any(u == user and (agent is None or a in (None, agent)) for u, a, _ in owners):
                self.leak(what, text, (user, agent, None), match)

    def check_exact(self, what: str, text: str, scope: tuple[str, str | None, str | None]) -> None:
        """``text`` (one conversation's window or summary) names only that conversation's items."""
        IsolationMachine.checks += 1
        for match in MARKER.finditer(text):
            if scope not in self.owners.get(int(match.group(4)), set()):
                self.leak(what, text, scope, match)

    def expected(self, user: str, agent: str | None, kind: str) -> set[int]:
        return {item.k for item in self.alive.values() if item.user == user and item.kind == kind
                and (agent is None or item.agent in (None, agent))}

    def check_present(self, what: str, text: str, user: str, agent: str | None, kinds: tuple[str, ...]) -> None:
        IsolationMachine.checks += 1
        listed = {int(m.group(4)) for m in MARKER.finditer(text)}
        missing = set().union(*(self.expected(user, agent, kind) for kind in kinds)) - listed
        assert not missing, f"{what} of {(user, agent)} lost items {sorted(missing)}"

    # -- writes ---------------------------------------------------------------------------------

    @rule(user=users, agent=agents, session=sessions, important=st.booleans())
    def add_turn(self, user, agent, session, important):
        self.step()
        (k1, said), (k2, reply) = self.marker(user, agent, session), self.marker(user, agent, session)
        text = f"Remember that I am allergic to {said} since 2019" if important else f"I chatted about {said} today"
        ids = self.view(user, agent, session).add_turn(text, f"Noted {reply}")
        self.written("message", user, agent, session, k1, ids[0])
        self.written("message", user, agent, session, k2, ids[1])

    @rule(user=users, agent=agents, session=sessions, role=st.sampled_from(["user", "assistant"]))
    def add_message(self, user, agent, session, role):
        self.step()
        k, m = self.marker(user, agent, session)
        message_id = self.view(user, agent, session).add_message(role, f"{role} says {m}", name=f"N{user}")
        self.written("message", user, agent, session, k, message_id)

    @rule(user=users, agent=agents, session=sessions)
    def remember(self, user, agent, session):
        self.step()
        k, m = self.marker(user, agent, session)
        fact_id = self.view(user, agent, session).remember(f"Note {m} about the garden", importance=0.6)
        self.written("fact", user, agent, session, k, fact_id)

    @rule(user=users, agent=agents, session=sessions, count=st.integers(1, 3))
    def remember_many(self, user, agent, session, count):
        self.step()
        made = [self.marker(user, agent, session) for _ in range(count)]
        ids = self.view(user, agent, session).remember_many([f"Note {m} on the list" for _, m in made])
        for (k, _), fact_id in zip(made, ids, strict=True):
            self.written("fact", user, agent, session, k, fact_id)

    @rule(user=users, agent=agents, session=sessions)
    def add_triple(self, user, agent, session):
        self.step()
        k, m = self.marker(user, agent, session)
        triple_id = self.view(user, agent, session).add_triple(m, "likes", f"target {m}")
        self.written("triple", user, agent, session, k, triple_id)

    @rule(user=users, agent=agents, session=sessions, explicit_user=st.booleans())
    def ingest(self, user, agent, session, explicit_user):
        self.step()
        (k1, said), (k2, reply) = self.marker(user, agent, session), self.marker(user, agent, session)
        path = os.path.join(self.tmp, f"chat-{k1}.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump([{"role": "user", "content": f"ingested {said}"},
                       {"role": "assistant", "content": f"ok {reply}"}], handle)
        if explicit_user:  # ingested for a user named here, through a view of another user
            other = USERS[(USERS.index(user) + 1) % len(USERS)]
            report = self.view(other, agent, session).ingest(path, user_id=user)
        else:
            report = self.view(user, agent, session).ingest(path)
        assert (report.messages_added, report.users) == (2, [user])
        self.written("message", user, agent, session, k1, None)
        self.written("message", user, agent, session, k2, None)

    @rule(user=users, agent=agents, session=sessions, self_user=st.booleans())
    def decorated_agent(self, user, agent, session, self_user):
        """``@remember`` on a class bound to a view with this agent and session: the call
        of ``user`` injects that user's memories and records the turn for that user."""
        self.step()
        (k1, said), (k2, reply) = self.marker(user, agent, session), self.marker(user, agent, session)
        prompts = []

        @remember(self.mem.scoped(agent_id=agent, session_id=session), top_k=20, raise_errors=True)
        class Assistant:
            system_prompt = "You are terse."

            def run(self, message: str, *, user_id: str | None = None) -> str:
                prompts.append(self.system_prompt)
                return f"Sure {reply}"

        bot = Assistant()
        if self_user:
            bot.user_id = user
            bot.run(f"Please remember I like {said} {BROAD_QUERY}")
        else:
            bot.run(f"Please remember I like {said} {BROAD_QUERY}", user_id=user)
        self.check_visible("decorator prompt", prompts[0] + "\n" + bot.memory_context, user, agent)
        assert bot.system_prompt == "You are terse."
        self.written("message", user, agent, session, k1, None)
        self.written("message", user, agent, session, k2, None)

    @rule(user=users, agent=agents, session=sessions)
    def tools(self, user, agent, session):
        self.step()
        k, m = self.marker(user, agent, session)
        view = self.view(user, agent, session)
        remember_tool(view)(text=f"Tool note {m}")
        self.written("fact", user, agent, session, k, None)
        self.check_visible("recall tool", recall_tool(view, limit=20)(query=BROAD_QUERY, limit=20), user, agent)

    @rule(user=users, agent=agents, session=sessions)
    def end_session(self, user, agent, session):
        self.step()
        self.view(user, agent, session).end_session()

    @rule(user=users, agent=agents, session=sessions)
    def consolidate(self, user, agent, session):
        self.step()
        self.view(user, agent, session).consolidate()

    # -- deletion ---------------------------------------------------------------------------------

    @rule(user=users, data=st.data())
    def forget_ids(self, user, data):
        """Forget some of the user's items; ids of another user (with or without own ones)
        raise NotFoundError and delete nothing at all."""
        self.step()
        mine = sorted((i for i in self.alive.values() if i.user == user and i.id), key=lambda i: i.k)
        theirs = sorted((i for i in self.alive.values() if i.user != user and i.id), key=lambda i: i.k)
        own = data.draw(st.lists(st.sampled_from(mine), max_size=3, unique=True)) if mine else []
        foreign = data.draw(st.lists(st.sampled_from(theirs), max_size=2, unique=True)) if theirs else []
        if not own and not foreign:
            return
        view = self.view(user, data.draw(agents), data.draw(sessions))
        if foreign:
            before = io.StringIO()
            self.mem.export_jsonl(before, all_users=True)
            with pytest.raises(NotFoundError):
                view.forget(ids=[i.id for i in own + foreign])
            after = io.StringIO()
            self.mem.export_jsonl(after, all_users=True)
            IsolationMachine.checks += 1
            assert after.getvalue().splitlines()[1:] == before.getvalue().splitlines()[1:]
            return
        view.forget(ids=[i.id for i in own])
        for item in own:
            del self.alive[(user, item.k)]

    @rule(user=users, by=users)
    def forget_user(self, user, by):
        """``forget(user_id=...)``, also through another user's view."""
        self.step()
        self.view(by).forget(user_id=user)
        for key in [key for key in self.alive if key[0] == user]:
            del self.alive[key]

    # -- export and import ---------------------------------------------------------------------

    @rule(user=users)
    def stash_export(self, user):
        self.step()
        buffer = io.StringIO()
        self.view(user).export_jsonl(buffer)
        self.check_visible("export", buffer.getvalue(), user, None)
        self.stash = (user, buffer.getvalue(), [i for i in self.alive.values() if i.user == user])

    @precondition(lambda self: self.stash is not None)
    @rule(target_user=users)
    def import_stash(self, target_user):
        """Import an export of one user with ``user_id=`` another: refused (nothing written)
        while rows of those ids exist; else the target gets a copy of every item."""
        self.step()
        source, text, items = self.stash
        before = io.StringIO()
        self.mem.export_jsonl(before, all_users=True)
        try:
            self.mem.import_jsonl(io.StringIO(text), user_id=target_user)
        except MemoryValueError:
            after = io.StringIO()
            self.mem.export_jsonl(after, all_users=True)
            IsolationMachine.checks += 1
            assert after.getvalue().splitlines()[1:] == before.getvalue().splitlines()[1:]
            return
        for k in {int(m.group(4)) for m in MARKER.finditer(text)}:
            self.owners[k] |= {(target_user, a, s) for _, a, s in self.owners[k]}
        copied = self.ids_by_marker(target_user)  # a copy into the file its source is in has fresh ids
        for item in items:
            new_id = copied.get((item.kind, item.k)) if item.id else None
            assert new_id is not None or not item.id, f"{item} was not imported for {target_user}"
            self.alive[(target_user, item.k)] = Item(item.kind, target_user, item.agent, item.session, item.k,
                                                     new_id)

    def ids_by_marker(self, user: str) -> dict[tuple[str, int], str]:
        """``(kind, k) -> id`` of what ``user`` holds, found by the marker in its text."""
        view = self.mem.scoped(user_id=user)
        texts = [*(("message", e.id, e.content or "") for e in view.episodes()),
                 *(("fact", f.id, f.text) for f in view.facts(include_inactive=True)),
                 *(("triple", t.id, t.as_text()) for t in view.triples())]
        return {(kind, int(m.group(4))): item_id for kind, item_id, text in texts for m in MARKER.finditer(text)}

    # -- invariants -----------------------------------------------------------------------------

    def injected(self, user: str, agent: str | None, session: str | None) -> str:
        """The prompt ``@remember(extract=False)`` gives an agent bound to a view with this
        agent and session, called for ``user``."""
        seen = []

        @remember(self.mem.scoped(agent_id=agent, session_id=session), extract=False, top_k=20, raise_errors=True)
        class Reader:
            system_prompt = ""

            def run(self, message: str, *, user_id: str | None = None) -> str:
                seen.append(self.system_prompt)
                return "ok"

        Reader().run(BROAD_QUERY, user_id=user)
        return seen[0]

    @invariant()
    def conversations_hold_only_their_own(self):
        """Every window and running summary holds exactly its conversation's items."""
        for scope in product(USERS, AGENTS, SESSIONS):
            view = self.view(*scope)
            self.check_exact("window", "\n".join(m.content or "" for m in view.window()), scope)
            self.check_exact("summary", view.summary(), scope)

    @invariant()
    def reads_hold_only_what_the_scope_may_see(self):
        """For every user, through one agent and session (rotating with the steps): no
        read shows another user's item or another agent's, and nothing is lost."""
        self.steps += 1
        agent, session = AGENTS[self.steps % 3], SESSIONS[(self.steps // 3) % 3]
        for user in USERS:
            view = self.view(user, agent, session)
            hits = view.recall(BROAD_QUERY, limit=60)
            self.check_visible("recall", "\n".join(h.text for h in hits), user, agent)
            for hit in hits:
                if hit.tier == "short_term":
                    self.check_exact("short_term hit", hit.text, (user, agent, session))
            self.check_visible("context", view.context(BROAD_QUERY, max_tokens=3000).text, user, agent)
            self.check_visible("context without query", view.context(None, max_tokens=3000).text, user, agent)
            facts = "\n".join(f.text for f in view.facts(include_inactive=True))
            episodes = "\n".join(e.content or "" for e in view.episodes())
            triples = "\n".join(t.as_text() for t in view.triples())
            entities = "\n".join(f"{e.name} {json.dumps(e.attributes)}" for e in view.entities())
            for what, text in (("facts", facts), ("episodes", episodes), ("triples", triples),
                               ("entities", entities)):
                self.check_visible(what, text, user, agent)
            if session is not None:  # one session's log: that session's messages only
                text = "\n".join(e.content or "" for e in view.episodes(session_id=session))
                IsolationMachine.checks += 1
                for match in MARKER.finditer(text):
                    if not any(u == user and (agent is None or a in (None, agent)) and s == session
                               for u, a, s in self.owners.get(int(match.group(4)), set())):
                        self.leak("episodes of a session", text, (user, agent, session), match)
            self.check_present("facts", facts, user, agent, ("fact",))
            self.check_present("episodes", episodes, user, agent, ("message",))
            self.check_present("triples", triples, user, agent, ("triple",))
            self.check_visible("recall tool", recall_tool(view, limit=20)(query=BROAD_QUERY, limit=20), user, agent)
            self.check_visible("decorator prompt", self.injected(user, agent, session), user, agent)
            if agent is None:
                export = io.StringIO()
                view.export_jsonl(export)
                self.check_visible("export", export.getvalue(), user, None)
                self.check_present("export", export.getvalue(), user, None, ("fact", "message", "triple"))
        assert not self.leaks, self.leaks[:5]


def make_machine(backend: str):
    class Machine(IsolationMachine):
        pass

    Machine.backend = backend
    Machine.__name__ = f"IsolationMachine[{backend}]"
    return Machine


@pytest.mark.slow
# the long random loop runs paths other tests run too: not traced by coverage (docs/testing.md, "Coverage")
@pytest.mark.no_cover
@pytest.mark.parametrize("backend", ["file", "memory-hybrid"])
def test_no_read_returns_another_users_item(backend, figures):
    """Isolation: random operations for several users, agents and sessions; recall, context,
    listing, export, the recall tool and the decorator never return another user's item."""
    machine = make_machine("file" if backend == "file" else "memory")
    IsolationMachine.runs = IsolationMachine.operations = IsolationMachine.checks = 0
    IsolationMachine.leaks = 0
    run_state_machine_as_test(machine, settings=settings(
        max_examples=scaled(12), stateful_step_count=25, deadline=None,
        suppress_health_check=list(HealthCheck)))
    figures("isolation", backend=backend, runs=IsolationMachine.runs, operations=IsolationMachine.operations,
            checks=IsolationMachine.checks, leaks=IsolationMachine.leaks)
    assert IsolationMachine.leaks == 0
