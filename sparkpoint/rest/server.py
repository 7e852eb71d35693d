"""A running job's REST endpoint: Flink's REST API (paths, JSON field names, status codes).

The HTTP wiring only: routes, the token check, the request-size bound, Flink's
``{"errors": [...]}`` answers, TLS. The responses are built by :mod:`job_json`,
:mod:`checkpoint_json` and :mod:`operations`, which know nothing of HTTP. The paths are
listed by :data:`ROUTES` and described by ``GET /openapi.json`` (:mod:`openapi`).

It listens on ``rest.bind-address`` / ``rest.address`` (default 127.0.0.1) and
``rest.port`` (0 picks a free port); see :mod:`security` for the token, TLS and the
directories a savepoint may be written to or disposed from.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from sparkpoint.rest import checkpoint_json as cj
from sparkpoint.rest import job_json as jj
from sparkpoint.rest import task_metrics as tm
from sparkpoint.rest import vertex_json as vj
from sparkpoint.rest.job_json import JobView, RestError
from sparkpoint.rest.operations import Operations
from sparkpoint.rest.security import BY_OWNER, RestSecurity, parse_body

__all__ = ["RestServer", "ROUTES"]

logger = logging.getLogger(__name__)

_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")

# (method, path, handler(server, params, query, body) -> (status, JSON)); first match wins
Handler = Callable[["RestServer", dict, dict, dict], Any]


def _get(fn: Callable[..., Any]) -> Handler:
    return lambda s, p, q, b: (200, fn(s.view))


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/overview", _get(jj.overview)),
    ("GET", "/config", lambda s, p, q, b: (200, jj.dashboard_config())),
    ("GET", "/jobs", _get(jj.jobs)),
    ("GET", "/jobs/overview", _get(jj.jobs_overview)),
    ("GET", "/jobs/{jobid}", lambda s, p, q, b: (200, s.job_details())),
    ("PATCH", "/jobs/{jobid}", lambda s, p, q, b: s.cancel(q)),
    ("GET", "/jobs/{jobid}/plan", _get(jj.job_plan)),
    ("GET", "/jobs/{jobid}/config", _get(jj.job_config)),
    ("GET", "/jobs/{jobid}/exceptions", _get(jj.job_exceptions)),
    ("GET", "/jobs/{jobid}/metrics", lambda s, p, q, b: (200, jj.job_metrics(s.view, q.get("get")))),
    ("GET", "/jobs/{jobid}/checkpoints", _get(cj.checkpointing_statistics)),
    ("POST", "/jobs/{jobid}/checkpoints", lambda s, p, q, b: (202, s.operations.checkpoint(b))),
    ("GET", "/jobs/{jobid}/checkpoints/config", _get(cj.checkpoint_config)),
    (
        "GET",
        "/jobs/{jobid}/checkpoints/details/{checkpointid}",
        lambda s, p, q, b: (200, cj.checkpoint_details(s.view, _int(p["checkpointid"]))),
    ),
    (
        "GET",
        "/jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}",
        lambda s, p, q, b: (200, cj.checkpoint_subtasks(s.view, _int(p["checkpointid"]), _hex(p["vertexid"]))),
    ),
    (
        "GET",
        "/jobs/{jobid}/checkpoints/{triggerid}",
        lambda s, p, q, b: (200, s.operations.status("checkpoint", _hex(p["triggerid"]))),
    ),
    ("POST", "/jobs/{jobid}/savepoints", lambda s, p, q, b: (202, s.operations.savepoint(b, stop=False))),
    (
        "GET",
        "/jobs/{jobid}/savepoints/{triggerid}",
        lambda s, p, q, b: (200, s.operations.status("savepoint", _hex(p["triggerid"]))),
    ),
    ("POST", "/jobs/{jobid}/stop", lambda s, p, q, b: (202, s.operations.savepoint(b, stop=True))),
    (
        "GET",
        "/jobs/{jobid}/vertices/{vertexid}/watermarks",
        lambda s, p, q, b: (200, jj.vertex_watermarks(s.view, _hex(p["vertexid"]))),
    ),
    (
        "GET",
        "/jobs/{jobid}/vertices/{vertexid}/metrics",
        lambda s, p, q, b: (200, jj.vertex_metrics(s.view, _hex(p["vertexid"]), q.get("get"))),
    ),
    (
        "GET",
        "/jobs/{jobid}/vertices/{vertexid}/backpressure",
        lambda s, p, q, b: (200, tm.vertex_backpressure(s.view, jj.find_vertex(s.view, _hex(p["vertexid"])))),
    ),
    (
        "GET",
        "/jobs/{jobid}/vertices/{vertexid}/subtasks/metrics",
        lambda s, p, q, b: (200, jj.subtask_metrics(s.view, _hex(p["vertexid"]), q.get("get"), q.get("agg"))),
    ),
    ("POST", "/savepoint-disposal", lambda s, p, q, b: (202, s.operations.dispose(b))),
    (
        "GET",
        "/savepoint-disposal/{triggerid}",
        lambda s, p, q, b: (200, s.operations.status("disposal", _hex(p["triggerid"]))),
    ),
    (
        "GET",
        "/jobs/{jobid}/vertices/{vertexid}",
        lambda s, p, q, b: (200, vj.vertex_details(s.view, _hex(p["vertexid"]))),
    ),
    (
        "GET",
        "/jobs/{jobid}/vertices/{vertexid}/subtasktimes",
        lambda s, p, q, b: (200, vj.subtask_times(s.view, _hex(p["vertexid"]))),
    ),
    ("GET", "/jobs/{jobid}/accumulators", _get(vj.accumulators)),
    ("GET", "/taskmanagers", _get(vj.taskmanagers)),
    ("GET", "/jobmanager/config", _get(vj.jobmanager_config)),
    ("GET", "/openapi.json", lambda s, p, q, b: (200, _openapi())),
]


def _openapi() -> dict:
    from sparkpoint.rest.openapi import openapi_spec

    return openapi_spec()


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise RestError(400, f"bad request: {value!r} is not a checkpoint id") from None


def _hex(value: str) -> str:
    if not _HEX32.match(value):
        raise RestError(400, f"bad request: {value!r} is not an id of 32 hex characters")
    return value.lower()


def _errors(status: int, message: str) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"errors": [message]}, status_code=status)


class RestServer:
    """Serves one job's REST endpoint from a background thread."""

    view: JobView
    operations: Operations

    def __init__(self, view: JobView, security: RestSecurity, port: int = 0):
        self.view = view
        self.master = view.master
        self.security = security
        self.address = security.bind_address
        self.port = port or _free_port(self.address)
        self.operations = Operations(self.master, security)
        self.cancel_unread = False  # a cancel was asked for and no client has read the job's end since
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def token(self) -> str | None:
        return self.security.token

    def cancel(self, query: dict) -> tuple[int, dict]:
        mode = query.get("mode", "cancel")
        if mode != "cancel":
            raise RestError(400, f"mode {mode!r}: only 'cancel' is supported (stop with POST /jobs/:jid/stop)")
        status = self.master.status
        if status.is_globally_terminal_state() and status.name != "CANCELED":  # Flink's 409, as its handler
            raise RestError(
                409,
                f"Job cancellation failed because the job has already reached another terminal state ({status.name}).",
            )
        if not status.is_globally_terminal_state():
            self.cancel_unread = True  # the endpoint outlives the job until a client read it CANCELED
        self.master.cancel()
        return 202, {}

    def job_details(self) -> dict:
        details = jj.job_details(self.view)
        if details["state"] in ("CANCELED", "FAILED", "FINISHED"):
            self.cancel_unread = False
        return details

    # -- HTTP -------------------------------------------------------------------------------
    async def _body(self, request: Any) -> dict:
        limit = self.security.max_content_length
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            raise RestError(413, f"request body of {length} bytes exceeds rest.server.max-content-length ({limit})")
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > limit:
                raise RestError(413, f"request body exceeds rest.server.max-content-length ({limit} bytes)")
        if not data.strip():
            return {}
        body = parse_body(bytes(data))
        if not isinstance(body, dict):
            raise RestError(400, "request body must be a JSON object")
        return body

    def _endpoint(self, handler: Handler) -> Callable[[Any], Any]:
        async def endpoint(request: Any) -> Any:
            from starlette.responses import JSONResponse

            owner = BY_OWNER.set(self.security.by_owner(request.headers.get("authorization")))
            try:
                params = dict(request.path_params)
                if "jobid" in params and _hex(params["jobid"]) != self.master.job_id:
                    raise RestError(404, f"job {params['jobid']} not found")
                body = await self._body(request) if request.method in ("POST", "PATCH") else {}
                status, payload = handler(self, params, dict(request.query_params), body)
            except RestError as e:
                return _errors(e.status, str(e))
            except Exception as e:  # noqa: BLE001 - answered as Flink's internal server error
                logger.exception("REST %s %s failed", request.method, request.url.path)
                return _errors(500, f"internal server error: {type(e).__name__}: {e}")
            finally:
                BY_OWNER.reset(owner)
            return JSONResponse(payload, status_code=status)

        return endpoint

    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.middleware import Middleware
        from starlette.middleware.base import BaseHTTPMiddleware
        from starlette.routing import Route

        security = self.security

        async def authenticate(request: Any, call_next: Any) -> Any:
            from sparkpoint.rest.web import TOKEN_COOKIE

            ui_login = request.url.path == "/" and "token" in request.query_params  # checked by the page itself
            if not ui_login and not security.authorized(
                request.headers.get("authorization"), request.cookies.get(TOKEN_COOKIE)
            ):
                return _errors(401, "unauthorized: a bearer token (rest.token) is required")
            return await call_next(request)

        async def http_error(request: Any, exc: Any) -> Any:
            return _errors(exc.status_code, f"{exc.detail}: {request.method} {request.url.path}")

        from sparkpoint.rest.web import ui_routes

        routes = [Route(path, self._endpoint(handler), methods=[method]) for method, path, handler in ROUTES]
        routes += ui_routes(security)
        return Starlette(
            routes=routes,
            middleware=[Middleware(BaseHTTPMiddleware, dispatch=authenticate)],
            exception_handlers={HTTPException: http_error},
        )

    def start(self) -> None:
        import uvicorn

        ssl: dict[str, Any] = {}
        if self.security.certificate:
            ssl = {
                "ssl_certfile": self.security.certificate,
                "ssl_keyfile": self.security.private_key,
                "ssl_keyfile_password": self.security.key_password,
            }
        config = uvicorn.Config(
            self._app(), host=self.address, port=self.port, log_level="warning", lifespan="off", access_log=False, **ssl
        )
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # the job's process owns its signals
        self._thread = threading.Thread(target=self._server.run, name="sparkpoint-rest", daemon=True)
        self._thread.start()
        deadline = time.time() + 10
        while not getattr(self._server, "started", False) and time.time() < deadline:
            if not self._thread.is_alive():
                raise OSError(f"the REST endpoint could not listen on {self.address}:{self.port}")
            time.sleep(0.01)
        logger.info(
            "REST endpoint of job %s on %s://%s:%d", self.master.job_id, self.security.scheme, self.address, self.port
        )

    def stop(self, grace_s: float = 0.0) -> None:
        """Stop serving; first wait up to ``grace_s`` for clients to read the outcome of a stop or a cancel they
        asked for."""
        deadline = time.time() + grace_s
        while (self.operations.unread_stops() or self.cancel_unread) and time.time() < deadline:
            time.sleep(0.05)
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as s:
        s.bind((address, 0))
        return s.getsockname()[1]
