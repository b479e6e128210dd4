"""What the console changes, each a POST form with the session's form token: correct a fact (a
new version supersedes it, :meth:`UnifiedMemory.correct`), forget a fact, an entity or a
conversation (after a page showing what else goes), and export the user (a download)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request
from fastapi.responses import Response
from starlette.datastructures import FormData

from unified_memory.console import reads
from unified_memory.console.security import apply_headers, same_token
from unified_memory.console.visits import Denied

if TYPE_CHECKING:
    from unified_memory.console.visits import Console, Visit

__all__ = ["edit_fact", "forget_form", "forget", "export", "KINDS"]

#: What can be forgotten from the console, and the page to go back to afterwards.
KINDS = {"fact": "/facts", "entity": "/graph", "session": "/episodes"}


async def _checked_form(console: Console, request: Request) -> tuple[Visit, FormData]:
    """The visit and its form, when the form carries the session's token (else 403)."""
    visit = await console.visit(request)
    form = await request.form()
    if not same_token(form.get("csrf"), visit.signin.csrf):
        raise Denied(403, "the form's token is missing or stale: reload the page and try again")
    return visit, form


def _text(form: FormData, name: str, limit: int = 100_000) -> str | None:
    value = form.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Denied(400, f"{name}: must be text")
    if len(value) > limit:
        raise Denied(400, f"{name}: at most {limit} characters")
    return value


async def edit_fact(console: Console, request: Request) -> Response:
    """``POST /ui/fact/edit``: correct a fact (a new version; the old one stays in its history)."""
    visit, form = await _checked_form(console, request)
    fact_id, text, category = _text(form, "id", 200) or "", _text(form, "text"), _text(form, "category", 200)
    raw = _text(form, "importance", 40)
    try:
        importance = float(raw) if raw not in (None, "") else None
    except ValueError:
        raise Denied(400, f"importance: must be a number from 0 to 1, got {raw!r}") from None
    memory = visit.need_memory()
    versions = await memory.afact_history(fact_id)
    old = next(f for f in versions if f.id == fact_id)
    new_text = text.strip() if text is not None and text.strip() != old.text else None
    new_importance = importance if importance is not None and importance != old.importance else None
    new_category = category if category is not None and category != (old.category or "") else None
    if new_text is None and new_importance is None and new_category is None:
        return console.redirect(visit.url("/fact", id=fact_id, done="unchanged"))
    new = await memory.acorrect(fact_id, text=new_text, importance=new_importance, category=new_category)
    return console.redirect(visit.url("/fact", id=new, done="corrected"))


def _kind(value: object) -> str:
    if value not in KINDS:
        raise Denied(400, f"kind: must be one of {', '.join(KINDS)}")
    return str(value)


async def forget_form(console: Console, request: Request) -> Response:
    """``GET /ui/forget``: what forgetting a fact, an entity or a conversation would take, and the button."""
    visit = await console.visit(request)
    kind, item = _kind(request.query_params.get("kind")), (request.query_params.get("id") or "")[:200]
    if not item and kind != "session":
        raise Denied(400, "id: what to forget? (missing)")
    preview = await reads.on_lane(visit.need_memory(), reads.forget_preview, kind, item)
    if preview is None:
        raise Denied(404, f"id: no {kind} {item[:80]!r} of this user")
    return console.render("forget.html", visit=visit, nav=KINDS[kind].strip("/"), kind=kind, item=item,
                          preview=preview, csrf=visit.signin.csrf)


async def forget(console: Console, request: Request) -> Response:
    """``POST /ui/forget``: forget the item (and what goes with it, read again now), then back to its listing."""
    visit, form = await _checked_form(console, request)
    kind, item = _kind(form.get("kind")), _text(form, "id", 200) or ""
    memory = visit.need_memory()
    preview = await reads.on_lane(memory, reads.forget_preview, kind, item)  # the ids now, not the page's
    if preview is None:
        raise Denied(404, f"id: no {kind} {item[:80]!r} of this user")
    await memory.aforget(ids=preview.ids)
    return console.redirect(visit.url(KINDS[kind], done="forgot"))


async def export(console: Console, request: Request) -> Response:
    """``GET /ui/export``: the user's rows as a JSON Lines download (the API's export, streamed)."""
    from unified_memory.service.routes import export as export_route

    visit = await console.visit(request)
    response = await export_route(visit.need_memory())
    apply_headers(response.headers)
    return response
