"""Signing in and out of the console with an API key.

The sign-in form carries a random value that is also in a cookie of its own (a form posted
from another site has neither), and the key is checked by the service's :class:`Gate`: the
same digests, and the same limit on failed attempts per address. A good key opens a session
(:class:`~tiers.maintenance.sign_ins.SignIns`) whose token goes to an HttpOnly, SameSite=Strict
cookie; the key itself is never stored or sent back.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING

from fastapi import Request
from fastapi.responses import Response

from unified_memory.console.security import (
    LOGIN_COOKIE,
    SESSION_COOKIE,
    cookie_options,
    safe_next,
    same_token,
)
from unified_memory.service.auth import Refusal

if TYPE_CHECKING:
    from unified_memory.console.visits import Console

__all__ = ["login_form", "login", "logout"]


def _form(console: Console, request: Request, *, status: int = 200, error: str | None = None) -> Response:
    nonce = secrets.token_urlsafe(24)
    response = console.render("login.html", status, visit=None, nonce=nonce, error=error,
                              next=safe_next(request.query_params.get("next")))
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=3600, **cookie_options(request.url.scheme == "https"))
    return response


async def login_form(console: Console, request: Request) -> Response:
    """``GET /ui/login``: the sign-in form (a signed-in visitor goes on to ``next``)."""
    if await console.signed_in(request) is not None:
        return console.redirect(safe_next(request.query_params.get("next")))
    return _form(console, request)


async def login(console: Console, request: Request) -> Response:
    """``POST /ui/login``: check the key (the service's gate and its limit on failures), open a session."""
    form = await request.form()
    if not same_token(form.get("nonce"), request.cookies.get(LOGIN_COOKIE, "")):
        return _form(console, request, status=400, error="The sign-in form expired: please try again.")
    key = form.get("key")
    client = request.client.host if request.client else "unknown"
    try:
        principal = await asyncio.to_thread(
            console.gate.authenticate, f"Bearer {key.strip()}" if isinstance(key, str) and key.strip() else None,
            client)
    except Refusal as refusal:
        message = "Too many failed attempts: wait a minute." if refusal.status == 429 else "That key is not valid."
        return _form(console, request, status=refusal.status if refusal.status == 429 else 401, error=message)
    token, _csrf = await asyncio.to_thread(console.sign_ins.open, principal.key_id)
    target = safe_next(form.get("next"))
    if target == "/ui/":
        target = "/ui/users" if principal.admin else "/ui/overview"
    response = console.redirect(target)
    options = cookie_options(request.url.scheme == "https")
    response.set_cookie(SESSION_COOKIE, token, max_age=int(console.sign_ins.seconds), **options)
    response.delete_cookie(LOGIN_COOKIE, path="/ui")
    return response


async def logout(console: Console, request: Request) -> Response:
    """``POST /ui/logout``: end the session (with its form token) and drop the cookie."""
    signin = await console.signed_in(request)
    form = await request.form()
    if signin is not None and same_token(form.get("csrf"), signin.csrf):
        await asyncio.to_thread(console.sign_ins.end, request.cookies.get(SESSION_COOKIE))
    response = console.redirect("/ui/login")
    response.delete_cookie(SESSION_COOKIE, path="/ui")
    return response
