"""The console's pages over HTTP in this process (issue 41): what each page shows, the filters and
paging of the facts, a fact's history and sources, the graph, the episodes, the recall
playground, correcting and forgetting (with what the JSON API then answers), export, and the
answers to bad parameters. The same flows in a real browser: test_console_browser.py."""

from __future__ import annotations

import html
import json
import re

import pytest

from tests.console.conftest import Site, form_value, signed_in
from unified_memory import UnifiedMemory


def fact_ids(page: str) -> list[str]:
    return re.findall(r'/ui/fact\?id=(fact_[0-9a-f]+)', page)


def test_every_page_answers_for_a_signed_in_user(site: Site):
    client = site.sign_in(site.ada)
    for path in ["/ui/overview", "/ui/facts", "/ui/graph", "/ui/graph?entity=Maria&hops=2", "/ui/episodes",
                 "/ui/recall", "/ui/recall?q=where+do+I+live&budget=300"]:
        page = client.get(path)
        assert page.status_code == 200, path
        assert page.headers["content-type"].startswith("text/html")
        assert "Sign out" in page.text


def test_the_overview_shows_counts_profile_entities_and_a_chart(site: Site):
    page = site.sign_in(site.ada).get("/ui/overview").text
    assert "allergic to peanuts" in page  # the profile: safety first
    assert re.search(r"<dt>Facts</dt><dd><a [^>]*>\d+</a>", page)
    assert "Maria" in page and "<svg class=\"chart\"" in page and "<rect" in page


def test_facts_filter_by_status_text_category_importance_and_time(site: Site):
    client = site.sign_in(site.ada)
    active = client.get("/ui/facts").text
    assert "I live in Lisbon" not in active  # superseded by Berlin
    history = client.get("/ui/facts?status=superseded").text
    assert "Lisbon" in history and "Berlin" not in history
    assert "peanuts" in client.get("/ui/facts?q=PEANUT").text
    assert "peanuts" not in client.get("/ui/facts?q=zzz").text
    only_test = client.get("/ui/facts?category=test").text
    assert len(fact_ids(only_test)) == 5 and "peanuts" not in only_test
    assert "peanuts" not in client.get("/ui/facts?min=0.95").text
    assert "Berlin" in client.get("/ui/facts?since=2024-06-01").text
    assert "Berlin" not in client.get("/ui/facts?until=2024-06-01").text


def test_facts_are_paged_and_sorted(tmp_path):
    path = str(tmp_path / "m.db")
    with UnifiedMemory(path, user_id="ada", retrieval="lexical") as mem:
        mem.remember_many([{"text": f"Note number {i:03d}", "importance": (i % 10) / 10} for i in range(120)])
    with signed_in(path, "ada") as client:
        first = client.get("/ui/facts?sort=oldest").text
        assert "1–50 of 120" in first and "Note number 000" in first and "Note number 050" not in first
        nxt = re.search(r'href="([^"]*offset=50[^"]*)" rel="next"', first)
        assert nxt
        second = client.get(html.unescape(nxt.group(1))).text
        assert "Note number 050" in second and "sort=oldest" in html.unescape(nxt.group(1))
        newest = client.get("/ui/facts").text
        assert newest.index("Note number 119") < newest.index("Note number 118")
        ranked = client.get("/ui/facts?sort=importance").text
        assert "Note number 119" in ranked and "Note number 110" not in ranked  # 0.9 on the first page, 0.0 not


def test_a_fact_page_shows_its_history_messages_and_entities(site: Site):
    client = site.sign_in(site.ada)
    berlin = fact_ids(client.get("/ui/facts?q=Berlin").text)[0]
    page = client.get(f"/ui/fact?id={berlin}").text
    assert "I live in Lisbon" in page and "superseded" in page  # what it replaced
    assert "Big news: I moved to Berlin last week." in page  # the message it came from
    assert "Congratulations" not in page  # the assistant's reply was not its source
    assert "Berlin" in re.search(r'id="entities".*', page, re.S).group(0)


def test_correcting_a_fact_keeps_the_old_version_in_its_history(site: Site):
    client = site.sign_in(site.ada)
    fact = fact_ids(client.get("/ui/facts?q=peanuts").text)[0]
    page = client.get(f"/ui/fact?id={fact}").text
    answer = client.post("/ui/fact/edit", data={"csrf": form_value(page, "csrf"), "id": fact,
                                                "text": "I'm allergic to peanuts and cashews.", "importance": "0.95",
                                                "category": "health"}, follow_redirects=False)
    assert answer.status_code == 303
    new = re.search(r"id=(fact_[0-9a-f]+)", answer.headers["location"]).group(1)
    assert new != fact
    shown = client.get(answer.headers["location"]).text
    assert "Corrected" in shown and "peanuts and cashews" in shown and "allergic to peanuts." in shown
    with UnifiedMemory(site.path, user_id="ada", retrieval="lexical") as mem:
        versions = mem.fact_history(new)
        assert [v.status for v in versions][-2:] == ["superseded", "active"]
        assert (versions[-1].importance, versions[-1].category) == (0.95, "health")


def test_forgetting_a_fact_shows_what_goes_then_removes_it_everywhere(site: Site):
    client = site.sign_in(site.ada)
    fact = fact_ids(client.get("/ui/facts?q=Berlin").text)[0]
    preview = client.get(f"/ui/forget?kind=fact&id={fact}").text
    assert "Lisbon" in preview and "Berlin" in preview  # every version goes
    done = client.post("/ui/forget", data={"csrf": form_value(preview, "csrf"), "kind": "fact", "id": fact},
                       follow_redirects=False)
    assert done.status_code == 303
    assert "Forgotten" in client.get(done.headers["location"]).text
    everything = client.get("/ui/facts?status=active&status=superseded&status=archived&q=Berlin").text
    assert fact_ids(everything) == []
    assert client.get(f"/ui/fact?id={fact}").status_code == 404
    api = client.get("/v1/users/ada/facts?include_history=true", headers={"Authorization": f"Bearer {site.ada}"})
    assert "Berlin" not in api.text and "Lisbon" not in api.text


def test_forgetting_an_entity_and_a_conversation(site: Site):
    client = site.sign_in(site.ada)
    graph = client.get("/ui/graph?entity=Maria").text
    entity = re.search(r"kind=entity&amp;id=(ent_[0-9a-f]+)", graph).group(1)
    preview = client.get(f"/ui/forget?kind=entity&id={entity}").text
    assert "Maria" in preview and "relation" in preview
    client.post("/ui/forget", data={"csrf": form_value(preview, "csrf"), "kind": "entity", "id": entity})
    assert "No entity matches" in client.get("/ui/graph?entity=Maria").text
    episodes = client.get("/ui/episodes").text
    session = html.unescape(re.search(r"kind=session&amp;id=([^\"&]*)", episodes).group(1))
    preview = client.get(f"/ui/forget?kind=session&id={session}").text
    assert "message" in preview
    client.post("/ui/forget", data={"csrf": form_value(preview, "csrf"), "kind": "session", "id": session})
    with UnifiedMemory(site.path, user_id="ada", retrieval="lexical") as mem:
        assert [e for e in mem.episodes() if (e.session_id or "") == session] == []


def test_the_graph_draws_the_neighbourhood_with_links_to_click_through(site: Site):
    page = site.sign_in(site.ada).get("/ui/graph?entity=Maria&hops=2").text
    svg = re.search(r"<svg class=\"graph\".*?</svg>", page, re.S).group(0)
    assert "Porto" in svg and "lives_in" in svg
    assert "/ui/graph?entity=Porto&amp;hops=2" in svg
    table = site.client.get("/ui/graph?entity=Porto").text
    assert "Maria" in table  # clicked through: Porto's own neighbourhood


def test_an_ended_relation_is_drawn_dashed_with_its_end(site: Site):
    page = site.sign_in(site.ada).get("/ui/graph?entity=Lisbon").text
    assert 'class="edge ended"' in page and "until 2024-06-10" in page


def test_episodes_show_each_turn_with_the_facts_it_produced(site: Site):
    page = site.sign_in(site.ada).get("/ui/episodes").text
    turns = re.findall(r'<li class="turn (user|assistant)">(.*?)</li>\n(?=<li class="turn|</ol>)', page, re.S)
    assert turns
    produced = [body for role, body in turns if "Facts from this turn" in body]
    assert produced and all(role == "user" for role, body in turns if "Facts from this turn" in body)


def test_the_recall_playground_draws_score_parts_and_the_context_sections(site: Site):
    page = site.sign_in(site.ada).get("/ui/recall?q=what+am+I+allergic+to&budget=200&tier=long_term").text
    assert "allergic to peanuts" in page
    assert re.search(r"<dt>relevance</dt><dd><meter min=\"0\" max=\"[0-9.]+\" value=\"[0-9.]+\"", page)
    assert "Context block:" in page and "profile" in page
    tokens = int(re.search(r"Context block: (\d+) of 200 tokens", page).group(1))
    assert tokens <= 200


def test_export_downloads_the_users_rows(site: Site):
    answer = site.sign_in(site.ada).get("/ui/export")
    assert answer.status_code == 200 and "attachment" in answer.headers["content-disposition"]
    rows = [json.loads(line) for line in answer.text.splitlines()]
    assert rows[0]["kind"] == "header"
    assert "Oslo" not in answer.text  # bob's


def test_an_admin_lists_users_and_picks_one(site: Site):
    client = site.sign_in(site.admin)
    users = client.get("/ui/users").text
    assert "/ui/overview?u=ada" in users and "/ui/overview?u=bob" in users
    assert "Oslo" in client.get("/ui/facts?u=bob").text
    assert "u=bob" in client.get("/ui/facts?u=bob").text  # links keep the user
    assert client.get("/ui/overview", follow_redirects=False).headers["location"] == "/ui/users"


@pytest.mark.parametrize("path, field", [("/ui/facts?min=2", "min"), ("/ui/facts?offset=-1", "offset"),
                                         ("/ui/facts?since=yesterday", "since"), ("/ui/facts?sort=random", "sort"),
                                         ("/ui/graph?hops=5", "hops"), ("/ui/recall?q=x&limit=0", "limit"),
                                         ("/ui/recall?q=x&as_of=soon", "as_of"), ("/ui/fact", "id"),
                                         ("/ui/forget?kind=user&id=x", "kind"), ("/ui/fact?id=fact_nope", "fact_id")])
def test_bad_parameters_are_4xx_pages_naming_them(site: Site, path: str, field: str):
    answer = site.sign_in(site.ada).get(path)
    assert 400 <= answer.status_code < 500
    assert field in answer.text and "Traceback" not in answer.text


def test_a_failure_and_an_unknown_address_are_pages_never_json(site: Site, monkeypatch, caplog):
    client = site.sign_in(site.ada)
    for path in ["/ui/nowhere", "/ui/facts/extra", "/ui/static/missing.css"]:
        answer = client.get(path)
        assert answer.status_code == 404 and answer.headers["content-type"].startswith("text/html"), path
        assert "Not found" in answer.text and "default-src 'none'" in answer.headers["content-security-policy"]

    def broken(*_args, **_kwargs):
        raise RuntimeError("the disk caught fire")

    monkeypatch.setattr(UnifiedMemory, "profile", broken)
    with caplog.at_level("ERROR", logger="unified_memory.console"):
        answer = client.get("/ui/overview")
    assert answer.status_code == 500 and answer.headers["content-type"].startswith("text/html")
    assert "Something went wrong" in answer.text and "disk caught fire" not in answer.text  # the log says it
    assert "disk caught fire" in caplog.text
    assert "default-src 'none'" in answer.headers["content-security-policy"]


def test_the_overview_says_who_said_each_key_fact_of_a_group_conversation(tmp_path):
    path = str(tmp_path / "club.db")
    with UnifiedMemory(path, user_id="club", retrieval="lexical") as mem:
        mem.add_message("user", "I'm allergic to peanuts, so no satay for me.", name="Caroline")
        mem.add_message("user", "I love playing the clarinet.", name="<b>Melanie</b>")
    with signed_in(path, "club") as client:
        page = client.get("/ui/overview").text
    assert "<li>Caroline: <a " in page and "&lt;b&gt;Melanie&lt;/b&gt;: <a " in page  # escaped like any stored text
