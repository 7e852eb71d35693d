"""Starting a job: what ``sparkpoint run`` sets for every environment a job script creates, the keys of the
place a job is deployed to, and the thread an asynchronous job runs on."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

from sparkpoint.common.configuration import Configuration
from sparkpoint.datastream.job_client import JobClient
from sparkpoint.datastream.pipeline_executor import ExecutionContext, JobHandle

__all__ = ["set_cli_defaults", "apply_deployment_configuration", "start_in_background"]

# Set by the ``sparkpoint run`` command before it runs a job script: configuration from
# -D / --conf / --master, applied to every environment the script creates.
_cli_defaults: dict[str, Any] = {}


def set_cli_defaults(values: dict[str, Any]) -> None:
    """Sets the configuration that ``sparkpoint run`` applies to every environment a job script creates.

    Args:
        values: ``configuration`` (a dict of keys from -D, --conf and --master) and the run's hooks.
    """
    _cli_defaults.clear()
    _cli_defaults.update(values)


def apply_deployment_configuration(config: Configuration, executor: Any, context: ExecutionContext) -> None:
    """Keys the place the job is deployed to gives (Spark confs under spark-submit), under every key of ``config``.

    So code (and ``sparkpoint run``'s -D/--conf/-s) wins over ``spark.sparkpoint.*`` confs,
    which win over ``spark.sparkpoint.conf-file``, which wins over defaults.
    """
    provide = getattr(executor, "deployment_configuration", None)
    if provide is None:
        return
    for key, value in provide(Configuration(config), context).items():
        if not config.contains_key(key):
            config.set(key, value)


def start_in_background(job: JobHandle) -> JobClient:
    """Run ``job`` in a background thread; its client."""
    result: Future = Future()

    def run() -> None:
        try:
            result.set_result(job.run())
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            result.set_exception(e)

    thread = threading.Thread(target=run, name=f"sparkpoint-job-{job.job_id[:8]}", daemon=True)
    thread.start()
    return JobClient(job.job_id, job, thread, result)
