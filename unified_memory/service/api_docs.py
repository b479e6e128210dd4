"""The service's own documentation: Swagger UI at ``/docs``, served offline, over an OpenAPI
document that says how to authenticate and what every refusal looks like.

- **Offline.** FastAPI's default page loads Swagger UI from a CDN, so it is blank without the
  internet. Here its script, style sheet and icon come from the installed ``fastapi-swagger``
  package (the ``http`` extra; MIT; Swagger UI 5) at ``/docs/assets/…``. ``/redoc`` (another
  CDN page) is not served.
- **Bearer keys.** The gatekeeper (a middleware) checks ``Authorization: Bearer <key>``, which
  FastAPI cannot see: the document declares the scheme (``bearer``) for every operation but the
  open ones (those :func:`~unified_memory.service.gatekeeper.is_protected` leaves open:
  ``/healthz``, ``/readyz``), so "Authorize" and "Try it out" send the key.
- **Errors.** Every operation under ``/v1`` lists the refusals it can answer with our body
  (:class:`~unified_memory.service.schemas.ErrorBody`), FastAPI's own 422 body replaced:
  :data:`ERROR_RESPONSES`.

    >>> from fastapi import FastAPI
    >>> app = FastAPI(docs_url=None, redoc_url=None)
    >>> install_docs(app)
    >>> doc = app.openapi()
    >>> doc["components"]["securitySchemes"]["bearer"]["scheme"], doc["security"]
    ('bearer', [{'bearer': []}])
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, Response

from unified_memory.service.gatekeeper import is_protected
from unified_memory.service.schemas import ErrorBody

__all__ = ["ERROR_RESPONSES", "install_docs"]

#: What an operation under ``/v1`` may answer instead of its result (OpenAPI ``responses``).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "The body is not JSON (or not a JSON object), or the path or query "
                                              "is not UTF-8 (`malformed_json`, `malformed_path`, `malformed_query`)"},
    401: {"model": ErrorBody, "description": "No key, or an unknown or revoked one (`unauthorized`)"},
    403: {"model": ErrorBody, "description": "The key is another user's, or not an admin's (`forbidden`)"},
    404: {"model": ErrorBody, "description": "No such record or route (`not_found`)"},
    409: {"model": ErrorBody, "description": "An imported row conflicts with a stored one (`conflict`)"},
    413: {"model": ErrorBody, "description": "The body is over the size limit (`too_large`)"},
    422: {"model": ErrorBody, "description": "A field has the wrong type or value; `field` names it (`invalid`)"},
}

#: The Swagger UI files served at ``/docs/assets/<name>``, with their media types.
_ASSETS = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css", "favicon-32x32.png": "image/png"}


def _asset(name: str) -> bytes:
    return resources.files("fastapi_swagger.resources").joinpath(name).read_bytes()


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and its assets from the installed package, and make ``app.openapi()``
    declare the Bearer scheme (see the module docstring). ``app`` is created with
    ``docs_url=None, redoc_url=None``."""

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - API",
                                   swagger_js_url="/docs/assets/swagger-ui-bundle.js",
                                   swagger_css_url="/docs/assets/swagger-ui.css",
                                   swagger_favicon_url="/docs/assets/favicon-32x32.png",
                                   swagger_ui_parameters={"persistAuthorization": True})

    @app.get("/docs/assets/{name}", include_in_schema=False)
    async def asset(name: str) -> Response:
        media_type = _ASSETS.get(name)
        if media_type is None:  # only these names: nothing else of the package is reachable
            raise HTTPException(status_code=404, detail=f"no asset {name!r}")
        try:
            content = _asset(name)
        except ModuleNotFoundError:
            raise HTTPException(status_code=503, detail="the API docs need fastapi-swagger: "
                                                        "pip install 'unified-memory[http]'") from None
        return Response(content, media_type=media_type, headers={"Cache-Control": "public, max-age=86400"})

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, description=app.description,
                                   routes=app.routes)
            components = document.setdefault("components", {})
            components.setdefault("securitySchemes", {})["bearer"] = {
                "type": "http", "scheme": "bearer",
                "description": "An API key: `unified-memory keys create --user U` (or `--admin`)"}
            document["security"] = [{"bearer": []}]
            for path, operations in document.get("paths", {}).items():
                if not is_protected(path):  # answered without a key (the gatekeeper's rule)
                    for operation in operations.values():
                        operation["security"] = []
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
