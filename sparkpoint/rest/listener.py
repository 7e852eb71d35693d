"""``RestJobListener``: serves a job's REST endpoint while it runs.

The runtime loads it by name when ``rest.enabled`` is set (see
:mod:`sparkpoint.runtime.job_listener`): the endpoint starts with the job, registers it
in the local job registry, and stops and unregisters when the job ends.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from sparkpoint.rest.registry import JobRegistry
from sparkpoint.rest.server import RestServer
from sparkpoint.runtime.job_listener import JobListener

__all__ = ["RestJobListener"]

logger = logging.getLogger(__name__)


class RestJobListener(JobListener):
    """Starts the REST endpoint of ``job`` when it starts, and stops it when it ends."""

    def __init__(self, job: Any):
        self.job = job
        self.server: Optional[RestServer] = None

    def on_job_started(self, job: Any) -> None:
        config = job.config
        server = RestServer(job, config.get_string("rest.address") or "127.0.0.1", config.get_integer("rest.port", 0),
                            config.get_string("rest.token"))
        server.start()
        JobRegistry().register(job.job_id, job.plan.job_name, server.address, server.port, server.token)
        self.server = server

    def on_job_ended(self, job: Any) -> None:
        if self.server is None:
            return
        self.server.stop()
        JobRegistry().unregister(job.job_id)
        self.server = None
