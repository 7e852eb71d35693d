"""``sparkpoint history-server``: ended jobs' archives served over Flink's REST paths and the web UI (Flink's
HistoryServer).

It reads the archives (:mod:`~sparkpoint.rest.archive`) in ``historyserver.archive.fs.dir`` (comma-separated URLs
or paths; default: this machine's job store, ``<SPARKPOINT_HOME>/archive``) again every
``historyserver.archive.fs.refresh-interval`` (default 10 s), and answers on ``historyserver.web.address``
(default ``127.0.0.1``) and ``historyserver.web.port`` (default 8082): ``/config``, ``/overview``, ``/jobs``,
``/jobs/overview`` over every archived job, each job's archived answers at their paths (``/jobs/<jid>``,
``.../exceptions``, ``.../checkpoints``, ``.../vertices/<vid>`` ...), and the web UI at ``/``. Like Flink's, it
asks for no token: bind it to loopback, or put it behind something that does.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from sparkpoint.rest import job_json as jj
from sparkpoint.rest.archive import ArchiveStore

__all__ = ["history_app", "DEFAULT_PORT"]

DEFAULT_PORT = 8082


class _Archives:
    """The store, read again at most every ``refresh_s`` seconds, on a request's way."""

    def __init__(self, store: ArchiveStore, refresh_s: float):
        self.store, self.refresh_s = store, refresh_s
        self._lock = threading.Lock()
        self._at = float("-inf")

    def fresh(self) -> ArchiveStore:
        with self._lock:
            if time.monotonic() - self._at >= self.refresh_s:
                self.store.refresh()
                self._at = time.monotonic()
        return self.store


def _overview(jobs: list[dict]) -> dict:
    states = [j.get("state") for j in jobs]
    return {
        "taskmanagers": 0,
        "slots-total": 0,
        "slots-available": 0,
        "jobs-running": 0,
        "jobs-finished": states.count("FINISHED"),
        "jobs-cancelled": states.count("CANCELED"),
        "jobs-failed": states.count("FAILED"),
        **{k: v for k, v in jj.dashboard_config().items() if k in ("flink-version",)},
        "flink-commit": "sparkpoint",
    }


def history_app(store: ArchiveStore, refresh_s: float = 10.0) -> Any:
    """The history server's starlette application over ``store``."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from sparkpoint.rest.security import RestSecurity
    from sparkpoint.rest.web import ui_routes

    archives = _Archives(store, refresh_s)

    def config(request: Any) -> Any:
        answer = jj.dashboard_config()
        answer["features"] = {**answer["features"], "web-history": True, "web-cancel": False}
        return JSONResponse(answer)

    def overview(request: Any) -> Any:
        return JSONResponse(_overview(archives.fresh().jobs()))

    def jobs_overview(request: Any) -> Any:
        return JSONResponse({"jobs": archives.fresh().jobs()})

    def jobs(request: Any) -> Any:
        return JSONResponse({"jobs": [{"id": j["jid"], "status": j["state"]} for j in archives.fresh().jobs()]})

    def archived(request: Any) -> Any:
        answer = archives.fresh().answer(request.url.path)
        if answer is None:
            return JSONResponse({"errors": [f"not found in the archives: {request.url.path}"]}, status_code=404)
        return JSONResponse(answer)

    security = RestSecurity("127.0.0.1", None, None, None, None, [], 0)  # the UI's page and assets, no token
    routes = [
        Route("/config", config, methods=["GET"]),
        Route("/overview", overview, methods=["GET"]),
        Route("/jobs", jobs, methods=["GET"]),
        Route("/jobs/overview", jobs_overview, methods=["GET"]),
        *ui_routes(security),
        Route("/jobs/{rest:path}", archived, methods=["GET"]),
    ]
    return Starlette(routes=routes)
