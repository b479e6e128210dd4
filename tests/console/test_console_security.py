"""The console's defences (issue 41): sign-in only with a valid key (and a form of this site),
sessions in the file (any host knows them; signing out or revoking the key ends them), form
tokens on every change, a user key confined to its user (nothing of another user is shown,
changed or forgotten, whatever id a request carries), every stored text escaped, strict headers,
no open redirect."""

from __future__ import annotations

import re
import uuid

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import escape

from tests.console.conftest import XSS, Site, form_value, sign_in
from tiers.maintenance.keys import KeyRing
from tiers.storage.backend import Storage
from unified_memory import UnifiedMemory
from unified_memory.console.security import CSP
from unified_memory.service.app import create_app

PAGES = ["/ui/overview", "/ui/facts?category=test", "/ui/graph", "/ui/episodes",
         "/ui/recall?q=script+img+svg+alert&limit=20"]


def test_pages_need_a_session_and_say_where_to_come_back(site: Site):
    for path in [*PAGES, "/ui/users", "/ui/fact?id=x", "/ui/export"]:
        answer = site.client.get(path, follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"].startswith("/ui/login?next=%2Fui%2F"), path
    answer = site.client.post("/ui/forget", data={"kind": "fact", "id": "x"}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"].startswith("/ui/login")


def test_a_session_cookie_is_http_only_same_site_strict_and_scoped_to_the_console(site: Site):
    page = site.client.get("/ui/login")
    answer = site.client.post("/ui/login", data={"key": site.ada, "nonce": form_value(page.text, "nonce")},
                              follow_redirects=False)
    cookie = next(v for k, v in answer.headers.multi_items() if k == "set-cookie" and v.startswith("um_console="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert site.ada not in answer.text and site.ada not in str(answer.headers)  # the key is never sent back
    storage = Storage(site.path)
    stored = storage.execute("SELECT digest FROM console_sessions").fetchall()
    storage.close()
    token = cookie.split(";")[0].split("=", 1)[1]
    assert stored and all(token not in row[0] for row in stored)  # only a digest


def test_every_console_answer_has_the_strict_headers(site: Site):
    client = site.sign_in(site.ada)
    for path in [*PAGES, "/ui/login", "/ui/static/console.css", "/ui/fact?id=fact_nope"]:
        answer = client.get(path)
        assert answer.headers["content-security-policy"] == CSP, path
        assert "script-src" not in CSP and "'unsafe-inline'" not in CSP and "default-src 'none'" in CSP
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert "<script" not in client.get("/ui/overview").text and " style=" not in client.get("/ui/overview").text


def test_a_wrong_key_is_refused_and_guessing_is_throttled(site: Site):
    for _ in range(5):
        page = site.client.get("/ui/login")
        answer = site.client.post("/ui/login", data={"key": "um_000000000000_" + "x" * 43,
                                                     "nonce": form_value(page.text, "nonce")}, follow_redirects=False)
        assert answer.status_code == 401 and "not valid" in answer.text
        assert "um_console=" not in answer.headers.get("set-cookie", "")
    page = site.client.get("/ui/login")
    answer = site.client.post("/ui/login", data={"key": "nope", "nonce": form_value(page.text, "nonce")})
    assert answer.status_code == 429


def test_a_sign_in_form_posted_from_elsewhere_is_refused_even_with_a_good_key(site: Site):
    answer = site.client.post("/ui/login", data={"key": site.ada, "nonce": "forged"}, follow_redirects=False)
    assert answer.status_code == 400 and "um_console=" not in answer.headers.get("set-cookie", "")


def test_no_open_redirect_after_signing_in(site: Site):
    for target in ["https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"]:
        site.client.cookies.clear()
        page = site.client.get("/ui/login")
        answer = site.client.post("/ui/login", data={"key": site.ada, "nonce": form_value(page.text, "nonce"),
                                                     "next": target}, follow_redirects=False)
        assert answer.headers["location"] == "/ui/overview", target


def test_changes_need_the_sessions_form_token(site: Site):
    client = site.sign_in(site.ada)
    fact = re.search(r"id=(fact_[0-9a-f]+)", client.get("/ui/facts?q=peanuts").text).group(1)
    for token in [None, "", "forged", "x" * 500]:
        data = {"id": fact, "text": "changed", "kind": "fact"} | ({"csrf": token} if token is not None else {})
        assert client.post("/ui/fact/edit", data=data).status_code == 403
        assert client.post("/ui/forget", data=data).status_code == 403
    with UnifiedMemory(site.path, user_id="ada", retrieval="lexical") as mem:
        assert [f.status for f in mem.fact_history(fact)] == ["active"]


def test_a_user_key_sees_and_changes_nothing_of_another_user(site: Site):
    with UnifiedMemory(site.path, user_id="bob", retrieval="lexical") as mem:
        bobs_fact = mem.facts()[0].id
        bobs_entity = next(e.id for e in mem.entities() if e.name == "Oslo")
    client = site.sign_in(site.ada)
    csrf = form_value(client.get(f"/ui/fact?id={re.search(r'id=(fact_[0-9a-f]+)', client.get('/ui/facts').text).group(1)}").text, "csrf")
    for path in ["/ui/overview?u=bob", "/ui/facts?u=bob", "/ui/export?u=bob", "/ui/graph?u=bob&entity=Oslo"]:
        answer = client.get(path)
        assert answer.status_code == 403 and "Oslo" not in answer.text and "PIN is" not in answer.text, path
    assert client.get("/ui/users", follow_redirects=False).headers["location"] == "/ui/overview"
    # ids of bob's items, through ada's pages: not found, nothing shown or changed
    for path in [f"/ui/fact?id={bobs_fact}", f"/ui/forget?kind=fact&id={bobs_fact}",
                 f"/ui/forget?kind=entity&id={bobs_entity}"]:
        answer = client.get(path)
        assert answer.status_code == 404 and "PIN is" not in answer.text and "Oslo" not in answer.text, path
    assert client.post("/ui/fact/edit", data={"csrf": csrf, "id": bobs_fact, "text": "hacked"}).status_code == 404
    assert client.post("/ui/forget", data={"csrf": csrf, "kind": "fact", "id": bobs_fact}).status_code == 404
    assert client.post("/ui/forget", data={"csrf": csrf, "kind": "entity", "id": bobs_entity}).status_code == 404
    assert client.post("/ui/forget", data={"csrf": csrf, "kind": "fact", "id": bobs_fact, "u": "bob"}).status_code == 403
    assert "No entity matches" in client.get("/ui/graph?entity=Oslo").text  # bob's entity is not ada's
    assert "PIN is 4711" not in client.get("/ui/recall?q=what+is+my+PIN+and+where+do+I+live").text
    with UnifiedMemory(site.path, user_id="bob", retrieval="lexical") as mem:
        assert [f.status for f in mem.fact_history(bobs_fact)] == ["active"]
        assert any(e.id == bobs_entity for e in mem.entities())


@pytest.mark.parametrize("path", PAGES)
def test_stored_markup_renders_as_text(site: Site, path: str):
    page = site.sign_in(site.ada).get(path).text
    for payload in XSS[:3]:
        assert payload not in page  # never raw
    if path.startswith("/ui/facts"):
        for payload in XSS:
            assert str(escape(payload)) in page
        assert "{{ 7*7 }}" in page  # data is not a template


def test_markup_in_messages_user_ids_and_queries_renders_as_text(site: Site):
    with UnifiedMemory(site.path, user_id="<b>eve</b>", retrieval="lexical") as mem:
        mem.add_turn(XSS[0] + " my cat is called " + XSS[1], "ok")
    client = site.sign_in(site.admin)
    users = client.get("/ui/users").text
    assert "<b>eve</b>" not in users and str(escape("<b>eve</b>")) in users
    episodes = client.get("/ui/episodes", params={"u": "<b>eve</b>"}).text
    assert XSS[0] not in episodes and XSS[1] not in episodes and str(escape(XSS[0])) in episodes
    recall = client.get("/ui/recall", params={"u": "ada", "q": XSS[1]}).text
    assert XSS[1] not in recall


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.sampled_from(list("<>&\"'`=/ abcxyz(){}!;:")), min_size=3, max_size=40)
       .filter(lambda t: t.strip() and any(c in t for c in "<>&\"'")))
def test_any_stored_text_is_escaped_on_the_facts_page(site: Site, text: str):
    client = site.sign_in(site.ada) if "um_console" not in site.client.cookies else site.client
    stored = f"note {uuid.uuid4().hex} {text.strip()}"  # a new fact each time (not a restatement)
    with UnifiedMemory(site.path, user_id="ada", retrieval="lexical") as mem:
        fact = mem.remember(stored, importance=0.5, category="prop")
    body = client.get(f"/ui/fact?id={fact}").text.split("<main", 1)[1]
    if "<" in stored:  # raw markup never reaches the page (an escaped text holds no "<")
        assert stored not in body
    assert str(escape(stored)) in body


def test_signing_out_or_revoking_the_key_ends_the_session(site: Site):
    client = site.sign_in(site.ada)
    page = client.get("/ui/overview").text
    cookie = client.cookies.get("um_console")
    client.post("/ui/logout", data={"csrf": form_value(page, "csrf")})
    client.cookies.set("um_console", cookie, path="/ui")  # a copy of the old cookie is worth nothing now
    assert client.get("/ui/overview", follow_redirects=False).status_code == 303
    client.cookies.clear()
    sign_in(client, site.bob)
    assert client.get("/ui/overview").status_code == 200
    ring = KeyRing(Storage(site.path))
    bob_key = next(r for r in ring.list() if r.owner == "bob")
    ring.revoke(bob_key.id)
    ring.storage.close()
    assert client.get("/ui/overview", follow_redirects=False).status_code == 303


def test_a_session_opened_on_one_host_works_on_another(site: Site):
    """Hosts keep no per-user state: the session is a row of the file."""
    client = site.sign_in(site.ada)
    cookie = client.cookies.get("um_console")
    with TestClient(create_app(UnifiedMemory(site.path, retrieval="lexical"))) as other:
        other.cookies.set("um_console", cookie, path="/ui")
        assert "allergic to peanuts" in other.get("/ui/overview").text
