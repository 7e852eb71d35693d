"""The web UI: a single page (``rest/ui/``) served at ``/`` by the job's REST endpoint.

The page reads the same REST API as any client. Off loopback the endpoint needs the token;
a browser presents it once as ``/?token=...``: the answer sets it as a cookie (HttpOnly,
SameSite=Strict, Secure under TLS) and redirects to ``/``, so it leaves the address bar and
every later request (page, assets, API) carries it. Assets are the files of ``rest/ui/``
only, by name.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from sparkpoint.rest.security import RestSecurity

__all__ = ["TOKEN_COOKIE", "ui_routes", "ASSETS"]

TOKEN_COOKIE = "sparkpoint_token"
#: name -> content type of every file the UI consists of
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}


def _asset(name: str) -> bytes:
    return resources.files("sparkpoint.rest").joinpath("ui", name).read_bytes()


def ui_routes(security: RestSecurity) -> list[Any]:
    """``GET /`` (the page; ``?token=`` sets the cookie) and ``GET /web/<asset>``."""
    from starlette.responses import RedirectResponse, Response
    from starlette.routing import Route

    async def index(request: Any) -> Any:
        token = request.query_params.get("token")
        if token is not None:
            if not security.matches(token):
                return Response(
                    '{"errors": ["unauthorized: wrong token"]}', status_code=401, media_type="application/json"
                )
            response = RedirectResponse("/", status_code=303)
            response.set_cookie(
                TOKEN_COOKIE, token, httponly=True, samesite="strict", secure=security.scheme == "https"
            )
            return response
        return Response(_asset("index.html"), media_type=ASSETS["index.html"], headers={"Cache-Control": "no-store"})

    async def asset(request: Any) -> Any:
        name = request.path_params["name"]
        if name not in ASSETS:
            return Response('{"errors": ["not found"]}', status_code=404, media_type="application/json")
        return Response(_asset(name), media_type=ASSETS[name], headers={"Cache-Control": "no-store"})

    return [Route("/", index, methods=["GET"]), Route("/web/{name}", asset, methods=["GET"])]
