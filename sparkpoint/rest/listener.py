"""``RestJobListener``: serves a job's REST endpoint while it runs.

The runtime loads it by name when ``rest.enabled`` is set (see
:mod:`sparkpoint.runtime.job_listener`): the endpoint starts with the job, registers it
in the local job registry, records the job's status changes and failures (Flink's
``timestamps`` and exception history), archives what it answers when the job ends
(:mod:`~sparkpoint.rest.archive`), and stops and unregisters —
after a client that asked for a stop-with-savepoint has read its outcome, or
``sparkpoint.rest.shutdown-grace`` (default 30 s) has passed.
"""

from __future__ import annotations

import logging
from typing import Any

from sparkpoint.rest.archive import ARCHIVE_DIR_KEY, archive_job, local_archive_dir
from sparkpoint.rest.job_json import JobView, exception_entry, now_ms
from sparkpoint.rest.registry import JobRegistry
from sparkpoint.rest.security import RestSecurity
from sparkpoint.rest.server import RestServer
from sparkpoint.runtime.job_listener import JobListener

__all__ = ["RestJobListener"]

logger = logging.getLogger(__name__)

_MAX_EXCEPTIONS = 16


class RestJobListener(JobListener):
    """Starts the REST endpoint of ``job`` when it starts, and stops it when it ends."""

    def __init__(self, job: Any):
        self.job = job
        self.view = JobView(job, {job.status.name: now_ms()})
        self.server: RestServer | None = None
        self._last_error: BaseException | None = None

    def on_job_started(self, job: Any) -> None:
        config = job.config
        security = RestSecurity.from_config(config)
        server = RestServer(self.view, security, config.get_integer("rest.port", 0))
        server.start()
        bind = security.bind_address
        address = config.get_string("rest.address") or ("127.0.0.1" if bind in ("0.0.0.0", "::") else bind)
        JobRegistry().register(
            job.job_id,
            job.plan.job_name,
            address,
            server.port,
            security.token,
            scheme=security.scheme,
            certificate=security.certificate,
            owner_token=security.owner_token,
        )
        self.server = server

    def on_status_change(self, job_id: str, old: Any, new: Any, error: BaseException | None) -> None:
        ts = now_ms()
        self.view.status_times[new.name] = ts
        if error is not None and new.name in ("FAILING", "FAILED") and error is not self._last_error:
            self._last_error = error  # FAILING and FAILED (or RESTARTING) carry the same failure
            self.view.exceptions.append(exception_entry(error, ts))
            del self.view.exceptions[:-_MAX_EXCEPTIONS]

    def on_job_ended(self, job: Any) -> None:
        if self.server is None:
            return
        directories = [str(local_archive_dir()), *filter(None, [job.config.get_string(ARCHIVE_DIR_KEY)])]
        archive_job(self.view, directories)  # ended jobs stay visible: list -a, the history server
        self.server.stop(grace_s=job.config.get_duration_ms("sparkpoint.rest.shutdown-grace", 30_000) / 1000)
        JobRegistry().unregister(job.job_id)
        self.server = None
