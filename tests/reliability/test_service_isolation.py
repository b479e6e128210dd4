"""Isolation through the HTTP service (issue 17): the state machine of ``test_isolation``, over
one running server with a key per user and an admin key.

Random writes (turns, messages, facts, batches, triples, imports of an export), deletions
(``DELETE /facts/{id}``, forgetting a user) and reads (recall, context with and without a
query, fact pages, entities, triples, episodes, export, stats) for four users (two of them
the others' ids plus ``/x``, sent as ``%2F``: a prefix of a path is another user), with
``agent_id`` / ``session_id`` query parameters. Every written text carries a marker naming
its owner and a unique number (``owner-r3u1-a2-s1-k17z``: user ``r3u1`` — the users are
new in every run, the server and its file stay —, agent ``a2``, session ``s1``). What a read
may show follows the scoping rules documented in ``test_isolation``: nothing of another user
ever; an agent sees its own items and those without an agent; sessions do not partition the
long-term tiers or the log, except recall's ``short_term`` hits (exactly that conversation)
and ``/episodes?session=``; the export holds every agent's rows of its user.

Tenancy: every read and write with user X's key on user Y's path answers 403 with no marker
in its body, and writes or deletes nothing; X's key with Y's fact id on X's own path answers
404 and deletes nothing. The admin key acts for every user. And nothing is lost: each item
written and not forgotten is listed by its owner. Cross-tenant reads (a marker a read may not
show, or a cross-tenant attempt not refused) are counted and must be 0.

Both backends: on ``postgresql`` the service serves a database of its own on the suite's server.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.reliability.conftest import one_per_backend, scaled

pytest.importorskip("fastapi", reason="the service needs the server extra")
httpx = pytest.importorskip("httpx")

from tiers.maintenance.keys import KeyRing  # noqa: E402
from tiers.storage.backend import Storage  # noqa: E402
from unified_memory.service.background import ServiceProcess  # noqa: E402

# the long random loop runs paths other tests run too: not traced by coverage (docs/testing.md, "Coverage")
pytestmark = [pytest.mark.slow, pytest.mark.no_cover]

AGENTS = (None, "a1", "a2")
SESSIONS = (None, "s1", "s2")
MARKER = re.compile(r"owner-(r\d+u\d(?:sx)?)-(a\d|na)-(s\d|ns)-k(\d+)z")  # user r3u1/x is written r3u1sx
BROAD_QUERY = "owner note allergic chatted says target remember list garden noted a1 a2 na s1 s2 ns"
Scope = tuple[str, str | None, str | None]

slots = st.integers(0, 3)  # the run's users, by position
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
    id: str


class ServiceIsolationMachine(RuleBasedStateMachine):
    """Random operations over HTTP for four users of one service, each with its own key."""

    service: ClassVar[ServiceProcess]
    ring: ClassVar[KeyRing]
    admin: ClassVar[str]
    client: ClassVar[Any]
    owners: ClassVar[dict[int, set[Scope]]] = {}  # every marker ever written, across runs
    k: ClassVar[int] = 0
    runs = operations = requests = checks = attempts = cross_tenant_reads = 0

    def __init__(self) -> None:
        super().__init__()
        cls = ServiceIsolationMachine
        cls.runs += 1
        # two users whose ids hold a "/" (sent as %2F), each the other user's id plus "/x"
        self.users = [f"r{cls.runs}u{n}" for n in range(1, 3)] + [f"r{cls.runs}u{n}/x" for n in range(1, 3)]
        self.keys = {user: cls.ring.create(user, label="isolation")[1] for user in self.users}
        self.alive: dict[tuple[str, int], Item] = {}
        self.leaks: list[str] = []
        self.stash: tuple[str, str, list[Item]] | None = None  # (user, its export, its items then)
        self.steps = 0

    # -- talking to the service -------------------------------------------------------------------

    def call(self, method: str, user: str, path: str = "", *, key: str | None = None, agent: str | None = None,
             session: str | None = None, params: dict[str, Any] | None = None, **body: Any) -> Any:
        """One request on ``user``'s path with ``key`` (the user's own by default); never a 5xx."""
        cls = ServiceIsolationMachine
        cls.requests += 1
        query = {k: v for k, v in (("agent_id", agent), ("session_id", session)) if v is not None}
        answer = cls.client.request(method, f"/v1/users/{quote(user, safe='')}{path}",
                                    params={**query, **(params or {})},
                                    headers={"Authorization": f"Bearer {key or self.keys[user]}"}, **body)
        assert answer.status_code < 500, f"{method} {path}: {answer.status_code} {answer.text[:500]}"
        return answer

    def ok(self, *args: Any, **kwargs: Any) -> Any:
        answer = self.call(*args, **kwargs)
        assert answer.status_code in (200, 201), f"{args}: {answer.status_code} {answer.text[:500]}"
        return answer

    def key_of(self, user: str, admin: bool) -> str:
        return ServiceIsolationMachine.admin if admin else self.keys[user]

    # -- the model --------------------------------------------------------------------------------

    def marker(self, user: str, agent: str | None, session: str | None, *, owned: bool = True) -> tuple[int, str]:
        """A new marker; ``owned=False``: one no read may ever show (a refused write's)."""
        cls = ServiceIsolationMachine
        cls.k += 1
        cls.owners[cls.k] = {(user, agent, session)} if owned else set()
        return cls.k, f"owner-{user.replace('/', 's')}-{agent or 'na'}-{session or 'ns'}-k{cls.k}z"

    def written(self, kind: str, user: str, agent: str | None, session: str | None, k: int, item_id: str) -> None:
        self.alive[(user, k)] = Item(kind, user, agent, session, k, item_id)

    def step(self) -> None:
        ServiceIsolationMachine.operations += 1

    def leak(self, what: str, text: str, scope: Scope, match: Any) -> None:
        ServiceIsolationMachine.cross_tenant_reads += 1
        owners = ServiceIsolationMachine.owners.get(int(match.group(4)))
        self.leaks.append(f"{what} in scope {scope}: {match.group(0)} (owners {owners}) in {text[:300]!r}")

    def check_visible(self, what: str, text: str, user: str, agent: str | None) -> None:
        """``text`` (read by ``user`` / ``agent``) names only items that scope may see."""
        ServiceIsolationMachine.checks += 1
        for match in MARKER.finditer(text):
            owners = ServiceIsolationMachine.owners.get(int(match.group(4)), set())
            if not any(u == user and (agent is None or a in (None, agent)) for u, a, _ in owners):
                self.leak(what, text, (user, agent, None), match)

    def check_exact(self, what: str, text: str, scope: Scope, *, by_session: bool = False) -> None:
        """Only that conversation's items (``by_session``: that user's and session's, any agent it sees)."""
        ServiceIsolationMachine.checks += 1
        user, agent, session = scope
        for match in MARKER.finditer(text):
            owners = ServiceIsolationMachine.owners.get(int(match.group(4)), set())
            if by_session:
                allowed = any(u == user and (agent is None or a in (None, agent)) and s == session
                              for u, a, s in owners)
            else:
                allowed = scope in owners
            if not allowed:
                self.leak(what, text, scope, match)

    def check_present(self, what: str, text: str, user: str, agent: str | None, kinds: tuple[str, ...]) -> None:
        ServiceIsolationMachine.checks += 1
        listed = {int(m.group(4)) for m in MARKER.finditer(text)}
        expected = {item.k for item in self.alive.values() if item.user == user and item.kind in kinds
                    and (agent is None or item.agent in (None, agent))}
        assert not expected - listed, f"{what} of {(user, agent)} lost items {sorted(expected - listed)}"

    def refused(self, what: str, answer: Any, status: int = 403) -> None:
        """A cross-tenant attempt: refused, and nothing of any user in the answer."""
        ServiceIsolationMachine.attempts += 1
        if answer.status_code != status or MARKER.search(answer.text):
            ServiceIsolationMachine.cross_tenant_reads += 1
            self.leaks.append(f"{what}: {answer.status_code} {answer.text[:300]!r}")

    # -- writes ---------------------------------------------------------------------------------

    @rule(slot=slots, agent=agents, session=sessions, important=st.booleans(), admin=st.booleans())
    def add_turn(self, slot, agent, session, important, admin):
        self.step()
        user = self.users[slot]
        (k1, said), (k2, reply) = self.marker(user, agent, session), self.marker(user, agent, session)
        text = f"Remember that I am allergic to {said} since 2019" if important else f"I chatted about {said} today"
        ids = self.ok("POST", user, "/turns", key=self.key_of(user, admin), agent=agent, session=session,
                      json={"user": text, "assistant": f"Noted {reply}"}).json()["ids"]
        self.written("message", user, agent, session, k1, ids[0])
        self.written("message", user, agent, session, k2, ids[1])

    @rule(slot=slots, agent=agents, session=sessions, roles=st.lists(st.sampled_from(["user", "assistant"]),
                                                                      min_size=1, max_size=3))
    def add_messages(self, slot, agent, session, roles):
        self.step()
        user = self.users[slot]
        made = [self.marker(user, agent, session) for _ in roles]
        messages = [{"role": role, "content": f"{role} says {m}", "name": f"N{user}"}
                    for role, (_, m) in zip(roles, made, strict=True)]
        ids = self.ok("POST", user, "/messages", agent=agent, session=session,
                      json={"messages": messages}).json()["ids"]
        for (k, _), message_id in zip(made, ids, strict=True):
            self.written("message", user, agent, session, k, message_id)

    @rule(slot=slots, agent=agents, session=sessions, admin=st.booleans())
    def remember(self, slot, agent, session, admin):
        self.step()
        user = self.users[slot]
        k, m = self.marker(user, agent, session)
        fact_id = self.ok("POST", user, "/facts", key=self.key_of(user, admin), agent=agent, session=session,
                          json={"text": f"Note {m} about the garden", "importance": 0.6,
                                "metadata": {"tag": m}}).json()["id"]
        self.written("fact", user, agent, session, k, fact_id)

    @rule(slot=slots, agent=agents, session=sessions, count=st.integers(1, 3))
    def remember_many(self, slot, agent, session, count):
        self.step()
        user = self.users[slot]
        made = [self.marker(user, agent, session) for _ in range(count)]
        facts = [f"Note {m} on the list" if n % 2 else {"text": f"Note {m} on the list", "category": "list"}
                 for n, (_, m) in enumerate(made)]
        ids = self.ok("POST", user, "/facts/batch", agent=agent, session=session, json={"facts": facts}).json()["ids"]
        for (k, _), fact_id in zip(made, ids, strict=True):
            self.written("fact", user, agent, session, k, fact_id)

    @rule(slot=slots, agent=agents, session=sessions)
    def add_triple(self, slot, agent, session):
        self.step()
        user = self.users[slot]
        k, m = self.marker(user, agent, session)
        triple_id = self.ok("POST", user, "/triples", agent=agent, session=session,
                            json={"subject": m, "predicate": "likes", "object": f"target {m}"}).json()["id"]
        self.written("triple", user, agent, session, k, triple_id)

    # -- deletion ---------------------------------------------------------------------------------

    @rule(slot=slots, data=st.data(), admin=st.booleans())
    def forget_fact(self, slot, data, admin):
        """``DELETE /facts/{id}`` of one of the user's facts; another user's fact id on the
        user's own path is not found (404, nothing of it in the answer) and stays."""
        self.step()
        user = self.users[slot]
        facts = sorted((i for i in self.alive.values() if i.kind == "fact"), key=lambda i: i.k)
        if not facts:
            return
        item = data.draw(st.sampled_from(facts))
        agent, session = data.draw(agents), data.draw(sessions)
        answer = self.call("DELETE", user, f"/facts/{item.id}", key=self.key_of(user, admin), agent=agent,
                           session=session)
        if item.user != user:
            self.refused(f"{user} deleting {item.user}'s fact", answer, 404)
            return
        assert answer.status_code == 200, answer.text
        del self.alive[(user, item.k)]

    @rule(slot=slots, admin=st.booleans())
    def forget_user(self, slot, admin):
        self.step()
        user = self.users[slot]
        self.ok("DELETE", user, key=self.key_of(user, admin))
        for key in [key for key in self.alive if key[0] == user]:
            del self.alive[key]

    # -- export and import ---------------------------------------------------------------------

    @rule(slot=slots, agent=agents)
    def stash_export(self, slot, agent):
        self.step()
        user = self.users[slot]
        text = self.ok("GET", user, "/export", agent=agent).text
        self.check_visible("export", text, user, None)
        self.check_present("export", text, user, None, ("fact", "message", "triple"))
        self.stash = (user, text, [i for i in self.alive.values() if i.user == user])

    @precondition(lambda self: self.stash is not None)
    @rule(slot=slots)
    def import_stash(self, slot):
        """Import the stashed export: into its own user with its own key (the items it held come
        back), into another user with the admin key (a copy with fresh ids); or 409 and nothing
        written when rows of those ids differ."""
        self.step()
        source, text, items = self.stash
        target = self.users[slot]
        key = self.keys[target] if target == source else ServiceIsolationMachine.admin
        before = self.ok("GET", target, "/export").text.splitlines()[1:]
        answer = self.call("POST", target, "/import", key=key, content=text.encode())
        if answer.status_code == 409:
            assert self.ok("GET", target, "/export").text.splitlines()[1:] == before, "a refused import wrote"
            return
        assert answer.status_code == 200, answer.text
        for k in {int(m.group(4)) for m in MARKER.finditer(text)}:
            ServiceIsolationMachine.owners[k] |= {(target, a, s) for _, a, s in ServiceIsolationMachine.owners[k]}
        copied = self.ids_by_marker(target)
        for item in items:
            new_id = copied.get((item.kind, item.k))
            assert new_id is not None, f"{item} was not imported for {target}"
            assert target != source or new_id == item.id
            self.alive[(target, item.k)] = Item(item.kind, target, item.agent, item.session, item.k, new_id)

    def ids_by_marker(self, user: str) -> dict[tuple[str, int], str]:
        """``(kind, k) -> id`` of what ``user`` holds, found by the marker in its text."""
        texts = [*(("message", e["id"], e["content"] or "") for e in self.ok("GET", user, "/episodes").json()["episodes"]),
                 *(("fact", f["id"], f["text"]) for f in self.facts(user, None)),
                 *(("triple", t["id"], t["subject"]) for t in self.ok("GET", user, "/triples").json()["triples"])]
        return {(kind, int(m.group(4))): item_id for kind, item_id, text in texts for m in MARKER.finditer(text)}

    # -- cross-tenant attempts --------------------------------------------------------------------

    @rule(attacker=slots, shift=st.integers(1, 3), agent=agents, session=sessions, data=st.data())
    def cross_tenant(self, attacker, shift, agent, session, data):
        """X's key on Y's path: every endpoint answers 403, with nothing of Y, and writes nothing.
        (Y is another user by construction, so every time the rule is drawn it attacks.)"""
        victim = (attacker + shift) % len(self.users)
        self.step()
        x, y = self.users[attacker], self.users[victim]
        _, m = self.marker(x, agent, session, owned=False)  # must never be stored anywhere
        theirs = [i.id for i in self.alive.values() if i.user == y and i.kind == "fact"] or ["fact_0"]
        attempts = {
            "turns": ("POST", "/turns", {"json": {"user": f"I chatted about {m}", "assistant": f"ok {m}"}}),
            "messages": ("POST", "/messages", {"json": {"messages": [{"role": "user", "content": m}]}}),
            "facts": ("POST", "/facts", {"json": {"text": f"Note {m}"}}),
            "batch": ("POST", "/facts/batch", {"json": {"facts": [f"Note {m}"]}}),
            "triples": ("POST", "/triples", {"json": {"subject": m, "predicate": "likes", "object": m}}),
            "import": ("POST", "/import", {"content": (self.stash[1] if self.stash else "{}").encode()}),
            "delete fact": ("DELETE", f"/facts/{data.draw(st.sampled_from(theirs))}", {}),
            "forget": ("DELETE", "", {}),
            "recall": ("POST", "/recall", {"json": {"query": BROAD_QUERY, "limit": 60}}),
            "context": ("POST", "/context", {"json": {"query": BROAD_QUERY}}),
            "facts page": ("GET", "/facts", {}),
            "entities": ("GET", "/entities", {}),
            "triples list": ("GET", "/triples", {}),
            "episodes": ("GET", "/episodes", {}),
            "export": ("GET", "/export", {}),
            "stats": ("GET", "/stats", {}),
        }
        for name in data.draw(st.lists(st.sampled_from(sorted(attempts)), min_size=2, max_size=6, unique=True)):
            method, path, body = attempts[name]
            self.refused(f"{x} {name} on {y}'s path",
                         self.call(method, y, path, key=self.keys[x], agent=agent, session=session, **body))

    # -- reads ------------------------------------------------------------------------------------

    def facts(self, user: str, agent: str | None, *, session: str | None = None, key: str | None = None,
              page: int = 1000) -> list[dict[str, Any]]:
        """Every fact the scope lists (inactive and archived too), a page at a time."""
        found: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            answer = self.ok("GET", user, "/facts", key=key, agent=agent, session=session,
                             params={"limit": page, "offset": offset, "include_inactive": "true",
                                     "include_archived": "true"}).json()
            found += answer["facts"]
            offset = answer["next_offset"]
        return found

    @invariant()
    def reads_hold_only_what_the_scope_may_see(self):
        """Every user, through one agent and session (rotating with the steps), with the user's
        key or (every third step) the admin key: no read shows another user's item or another
        agent's, and nothing is lost."""
        self.steps += 1
        agent, session = AGENTS[self.steps % 3], SESSIONS[(self.steps // 3) % 3]
        key_of = (lambda u: ServiceIsolationMachine.admin) if self.steps % 3 == 2 else (lambda u: self.keys[u])
        for user in self.users:
            key = key_of(user)
            scope = {"key": key, "agent": agent, "session": session}
            hits = self.ok("POST", user, "/recall", json={"query": BROAD_QUERY, "limit": 60}, **scope).json()["hits"]
            self.check_visible("recall", json.dumps(hits), user, agent)
            for hit in hits:
                if hit["tier"] == "short_term":
                    self.check_exact("short_term hit", json.dumps(hit), (user, agent, session))
            for body in ({"query": BROAD_QUERY, "max_tokens": 3000}, {}):
                self.check_visible("context", self.ok("POST", user, "/context", json=body, **scope).text, user, agent)
            facts = self.facts(user, agent, session=session, key=key, page=7)
            episodes = self.ok("GET", user, "/episodes", **scope).text
            triples = self.ok("GET", user, "/triples", **scope).text
            for what, text in (("facts", json.dumps(facts)), ("episodes", episodes), ("triples", triples),
                               ("entities", self.ok("GET", user, "/entities", **scope).text),
                               ("stats", self.ok("GET", user, "/stats", **scope).text)):
                self.check_visible(what, text, user, agent)
            if session is not None:  # one session's log: that session's messages only
                text = self.ok("GET", user, "/episodes", params={"session": session}, **scope).text
                self.check_exact("episodes of a session", text, (user, agent, session), by_session=True)
            self.check_present("facts", "\n".join(f["text"] for f in facts), user, agent, ("fact",))
            self.check_present("episodes", episodes, user, agent, ("message",))
            self.check_present("triples", triples, user, agent, ("triple",))
            if agent is None:  # the export: every agent's rows of the user (any view)
                export = self.ok("GET", user, "/export", **scope).text
                self.check_visible("export", export, user, None)
                self.check_present("export", export, user, None, ("fact", "message", "triple"))
        assert not self.leaks, self.leaks[:5]


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    """One service per backend for the module, started when a test first asks for it."""
    with one_per_backend(tmp_path_factory, "isolation", ServiceProcess) as service_on:
        yield service_on


@pytest.fixture
def service(services, storage_backend, request):
    """The service on a SQLite file, or on a PostgreSQL database of its own (``storage_backend``)."""
    return services(storage_backend, request)


def test_no_request_returns_another_users_item(service, figures):
    """Isolation over HTTP: random operations for four users (a key each), their agents and
    sessions, and cross-tenant attempts; 0 cross-tenant reads, nothing lost."""
    machine = ServiceIsolationMachine
    machine.runs = machine.operations = machine.requests = machine.checks = 0
    machine.attempts = machine.cross_tenant_reads = 0
    machine.service = service
    machine.ring = KeyRing(Storage(service.db))
    machine.admin = service.create_key(admin=True)
    try:
        with httpx.Client(base_url=service.url, timeout=60) as client:
            machine.client = client
            run_state_machine_as_test(machine, settings=settings(
                max_examples=scaled(8), stateful_step_count=20, deadline=None,
                phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each step is requests
                suppress_health_check=list(HealthCheck)))
    finally:
        machine.ring.storage.close()
    figures("service isolation", runs=machine.runs, operations=machine.operations, requests=machine.requests,
            checks=machine.checks, cross_tenant_attempts=machine.attempts,
            cross_tenant_reads=machine.cross_tenant_reads)
    assert machine.cross_tenant_reads == 0
    assert machine.attempts > 0
