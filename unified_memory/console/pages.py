"""The console's pages (GET, read-only): home, users (admin keys), overview, facts, a fact,
the graph, episodes and the recall playground. Query parameters are checked here; a bad one is
a 400 page naming it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import Response

from tiers.browse.facts import SORTS, STATUSES, FactQuery
from tiers.records.types import TIERS
from unified_memory.console import drawing, reads
from unified_memory.console.visits import Denied

if TYPE_CHECKING:
    from unified_memory.console.visits import Console

__all__ = ["home", "users", "overview", "facts", "fact", "graph", "episodes", "recall", "PAGE"]

#: Facts (and users, messages) per page.
PAGE = 50


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Denied(400, f"{name}: must be a whole number, got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise Denied(400, f"{name}: must be from {low} to {high}, got {value}")
    return value


def _float(request: Request, name: str, low: float, high: float) -> float | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise Denied(400, f"{name}: must be a number, got {raw[:40]!r}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise Denied(400, f"{name}: must be from {low} to {high}, got {raw[:40]!r}")
    return value


def _date(request: Request, name: str) -> float | None:
    """A date (``YYYY-MM-DD``, or a date and time) as epoch seconds (UTC)."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise Denied(400, f"{name}: must be a date like 2024-06-10, got {raw[:40]!r}") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _pages(total: int, offset: int, size: int) -> dict[str, Any]:
    return {"offset": offset, "size": size, "total": total, "first": offset + 1 if total else 0,
            "last": min(offset + size, total), "previous": max(offset - size, 0) if offset else None,
            "next": offset + size if offset + size < total else None}


async def home(console: Console, request: Request) -> Response:
    """``GET /ui/``: the users page for an admin key, the overview for a user's key."""
    visit = await console.visit(request, user_page=False)
    return console.redirect("/ui/users" if visit.admin else "/ui/overview")


async def users(console: Console, request: Request) -> Response:
    """``GET /ui/users``: the users (admin keys), those whose id holds ``q``, a page at a time."""
    visit = await console.visit(request, user_page=False)
    if not visit.admin:
        return console.redirect("/ui/overview")
    contains = request.query_params.get("q", "")[:200]
    offset = _int(request, "offset", 0, 0, 10**9)
    shown, total = await reads.on_lane(console.memory, reads.users_page, contains, offset, PAGE)
    return console.render("users.html", visit=visit, nav="users", users=shown, q=contains,
                          pages=_pages(total, offset, PAGE))


async def overview(console: Console, request: Request) -> Response:
    """``GET /ui/overview``: counts per tier, the profile, the top entities, facts over time."""
    visit = await console.visit(request)
    data = await reads.on_lane(visit.need_memory(), reads.overview)
    bars = drawing.timeline_bars([b.count for b in data.timeline])
    return console.render("overview.html", visit=visit, nav="overview", data=data, bars=list(zip(bars, data.timeline,
                          strict=True)))


async def facts(console: Console, request: Request) -> Response:
    """``GET /ui/facts``: the facts, filtered (``q``, ``status``, ``category``, ``min`` / ``max``,
    ``since`` / ``until``), sorted (``sort``) and paged (``offset``)."""
    visit = await console.visit(request)
    params = request.query_params
    statuses = tuple(s for s in params.getlist("status") if s in STATUSES) or ("active",)
    sort = params.get("sort") or "newest"
    if sort not in SORTS:
        raise Denied(400, f"sort: must be one of {', '.join(SORTS)}, got {sort[:40]!r}")
    offset = _int(request, "offset", 0, 0, 10**9)
    query = FactQuery(statuses=statuses, category=params.get("category") or None,
                      min_importance=_float(request, "min", 0.0, 1.0), max_importance=_float(request, "max", 0.0, 1.0),
                      since=_date(request, "since"), until=_date(request, "until"),
                      contains=(params.get("q") or "")[:200] or None, sort=sort,  # type: ignore[arg-type]
                      limit=PAGE, offset=offset)
    page, categories = await reads.on_lane(visit.need_memory(), reads.facts_page, query)
    filters = {"q": params.get("q", ""), "status": list(statuses), "category": params.get("category", ""),
               "min": params.get("min", ""), "max": params.get("max", ""), "since": params.get("since", ""),
               "until": params.get("until", ""), "sort": sort}
    return console.render("facts.html", visit=visit, nav="facts", page=page, categories=categories, filters=filters,
                          statuses=STATUSES, sorts=SORTS, pages=_pages(page.total, offset, PAGE),
                          done=params.get("done"))


async def fact(console: Console, request: Request) -> Response:
    """``GET /ui/fact?id=``: a fact, its history, the messages it came from, its entities, the correction form."""
    visit = await console.visit(request)
    fact_id = request.query_params.get("id") or ""
    if not fact_id:
        raise Denied(400, "id: which fact? (missing)")
    detail = await reads.on_lane(visit.need_memory(), reads.fact_detail, fact_id[:200])
    return console.render("fact.html", visit=visit, nav="facts", detail=detail, csrf=visit.signin.csrf,
                          done=request.query_params.get("done"))


async def graph(console: Console, request: Request) -> Response:
    """``GET /ui/graph``: an entity's card and its neighbourhood (``hops`` 1 or 2), drawn and listed."""
    visit = await console.visit(request)
    name = (request.query_params.get("entity") or "")[:200]
    hops = _int(request, "hops", 1, 1, 2)
    view = await reads.on_lane(visit.need_memory(), reads.graph_view, name or None, hops)
    picture = None
    if view.card is not None:
        edges = [drawing.Edge(t.subject, t.predicate, t.object, t.valid_to is not None,
                              t.valid_to.strftime("%Y-%m-%d") if t.valid_to else "") for t in view.triples]
        picture = drawing.neighbourhood(view.card.name, edges)
    return console.render("graph.html", visit=visit, nav="graph", view=view, picture=picture, hops=hops, name=name,
                          csrf=visit.signin.csrf)


async def episodes(console: Console, request: Request) -> Response:
    """``GET /ui/episodes``: the conversations, and a page of one (``session``) with the facts of each turn."""
    visit = await console.visit(request)
    session = request.query_params.get("session")
    offset = _int(request, "offset", 0, 0, 10**9)
    view = await reads.on_lane(visit.need_memory(), reads.episodes_view, None if session is None else session[:200],
                               offset, PAGE)
    pages = _pages(view.page.total, offset, PAGE) if view.page is not None else None
    return console.render("episodes.html", visit=visit, nav="episodes", view=view, pages=pages, csrf=visit.signin.csrf)


async def recall(console: Console, request: Request) -> Response:
    """``GET /ui/recall``: the recall playground: hits with their score parts, and the context block at
    ``budget`` tokens with its sections."""
    visit = await console.visit(request)
    params = request.query_params
    query = (params.get("q") or "")[:2000]
    chosen = [t for t in params.getlist("tier") if t in TIERS]
    limit = _int(request, "limit", 10, 1, 50)
    budget = _int(request, "budget", 500, 20, 8000)
    as_of = params.get("as_of") or None
    hits, block = [], None
    if query.strip():
        memory = visit.need_memory()
        moment = None if as_of is None else _date(request, "as_of")
        hits = await memory.arecall(query, limit=limit, tiers=chosen or None, as_of=moment)
        block = await memory.acontext(query, max_tokens=budget, as_of=moment)
    parts = ("relevance", "importance", "recency", "tier_weight")
    return console.render("recall.html", visit=visit, nav="recall", q=query, tiers=TIERS, chosen=chosen,
                          limit=limit, budget=budget, as_of=as_of or "", hits=hits, block=block, parts=parts)
