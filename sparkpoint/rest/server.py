"""A running job's REST endpoint, mirroring Flink's ``/jobs`` API (the parts sparkpoint has).

``GET /jobs``, ``GET /jobs/{id}``, ``GET /jobs/{id}/checkpoints``,
``GET /jobs/{id}/checkpoints/config``, ``PATCH /jobs/{id}?mode=cancel``,
``POST /jobs/{id}/savepoints`` (``{"target-directory", "cancel-job"}``), ``POST /jobs/{id}/stop``
and ``GET /jobs/{id}/savepoints/{request-id}``.
It listens on 127.0.0.1 by default (``rest.address``, ``rest.port``; port 0 picks a free
one). Bound to another address it requires a bearer token (``rest.token``, or one is
generated and written to the job registry).
"""

from __future__ import annotations

import logging
import secrets
import socket
import threading
import time
from typing import Any, Optional

__all__ = ["RestServer"]

logger = logging.getLogger(__name__)


class RestServer:
    """Serves one job's REST endpoint from a background thread."""

    def __init__(self, master: Any, address: str = "127.0.0.1", port: int = 0, token: Optional[str] = None):
        self.master = master
        self.address = address
        self.token = token or (None if address in ("127.0.0.1", "localhost", "::1") else secrets.token_hex(16))
        self.port = port or _free_port(address)
        self.started = int(time.time() * 1000)
        self._server: Any = None
        self._thread: Optional[threading.Thread] = None
        self.requests: dict[str, Any] = {}

    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route

        h = _Handlers(self)
        return Starlette(routes=[
            Route("/jobs/{job_id}/savepoints", h.savepoints, methods=["POST"]),
            Route("/jobs/{job_id}/stop", h.savepoints, methods=["POST"]),
            Route("/jobs/{job_id}/savepoints/{request_id}", h.savepoint_status),
            Route("/jobs", h.jobs),
            Route("/jobs/{job_id}", h.job, methods=["GET"]),
            Route("/jobs/{job_id}", h.cancel, methods=["PATCH"]),
            Route("/jobs/{job_id}/checkpoints", h.checkpoints),
            Route("/jobs/{job_id}/checkpoints/config", h.checkpoint_config),
        ])

    def start(self) -> None:
        import uvicorn

        config = uvicorn.Config(self._app(), host=self.address, port=self.port, log_level="warning",
                                lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # the job's process owns its signals
        self._thread = threading.Thread(target=self._server.run, name="sparkpoint-rest", daemon=True)
        self._thread.start()
        deadline = time.time() + 10
        while not getattr(self._server, "started", False) and time.time() < deadline:
            time.sleep(0.01)
        logger.info("REST endpoint of job %s on http://%s:%d", self.master.job_id, self.address, self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)


class _Handlers:
    """The endpoint's request handlers, over the job (the JobMaster) the server serves."""

    def __init__(self, server: RestServer):
        self.server = server
        self.master = server.master

    def _refuse(self, request: Any, with_job: bool = True) -> Optional[Any]:
        """An error response if the token is wrong or the path names another job, else None."""
        from starlette.responses import JSONResponse

        token = self.server.token
        if token and request.headers.get("authorization") != f"Bearer {token}":
            return JSONResponse({"errors": ["unauthorized"]}, status_code=401)
        if with_job and not self.master.job_id.startswith(request.path_params["job_id"]):
            return JSONResponse({"errors": [f"job {request.path_params['job_id']} not found"]}, status_code=404)
        return None

    async def jobs(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        master = self.master
        return self._refuse(request, with_job=False) or JSONResponse(
            {"jobs": [{"id": master.job_id, "status": master.status.name}]})

    async def job(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        master = self.master
        return self._refuse(request) or JSONResponse({
            "jid": master.job_id, "name": master.plan.job_name, "state": master.status.name,
            "start-time": self.server.started, "epoch": master.epoch, "restarts": master.restarts,
            "records-in": master.total_in, "metrics": master.metrics,
            "vertices": [{"id": n.effective_uid(), "name": n.name,
                          "parallelism": master.plan.stage(master.plan.stage_of[n.id]).parallelism}
                         for n in master.plan.nodes.values()],
        })

    async def cancel(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        err = self._refuse(request)
        if err:
            return err
        mode = request.query_params.get("mode", "cancel")
        if mode != "cancel":
            return JSONResponse({"errors": [f"unsupported mode {mode!r}"]}, status_code=400)
        self.master.cancel()
        return JSONResponse({}, status_code=202)

    async def checkpoints(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        err = self._refuse(request)
        if err:
            return err
        if self.master.coordinator is None:
            return JSONResponse({"counts": {"total": 0}, "latest": {}, "history": [], "enabled": False})
        return JSONResponse({**self.master.coordinator.stats.to_json(), "enabled": True})

    async def checkpoint_config(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        s = self.master.checkpointing
        return self._refuse(request) or JSONResponse({
            "mode": s.mode.lower(), "interval": s.interval_ms, "timeout": s.timeout_ms,
            "min_pause": s.min_pause_ms, "max_concurrent": s.max_concurrent,
            "tolerable_failed_checkpoints": s.tolerable_failures, "externalization": s.retention,
            "num_retained": s.num_retained, "checkpoint_storage": s.directory,
        })

    async def savepoints(self, request: Any) -> Any:
        import asyncio

        from starlette.responses import JSONResponse

        err = self._refuse(request)
        if err:
            return err
        body = await request.json() if (await request.body()) else {}
        stop = request.url.path.endswith("/stop") or bool(body.get("cancel-job"))
        target = body.get("target-directory") or body.get("targetDirectory")
        req = self.master.request_savepoint(target, stop=stop)
        self.server.requests[req.request_id] = req
        if not stop:
            return JSONResponse({"request-id": req.request_id}, status_code=202)
        # the job ends with this savepoint, and this endpoint with it: answer when it is done
        try:
            await asyncio.to_thread(req.future.exception, float(body.get("timeout", 600)))
        except TimeoutError:
            pass
        return JSONResponse({"request-id": req.request_id, **req.status()}, status_code=202)

    async def savepoint_status(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        err = self._refuse(request)
        if err:
            return err
        req = self.server.requests.get(request.path_params["request_id"])
        if req is None:
            return JSONResponse({"errors": ["unknown savepoint request"]}, status_code=404)
        return JSONResponse(req.status())


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as s:
        s.bind((address, 0))
        return s.getsockname()[1]
