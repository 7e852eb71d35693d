"""Ended jobs kept, as Flink's JobManager archives them and its HistoryServer serves them.

When a job with a REST endpoint ends, :func:`archive_job` writes what its endpoint answered at the end -- job
details with the final status, the exception history, the checkpoint statistics (with each checkpoint's
details), the plan, the configuration and every vertex -- as one file in Flink's archive format
(``{"archive": [{"path": ..., "json": ...}, ...]}``) named by the job id, into ``jobmanager.archive.fs.dir``
when it is set and always into ``<SPARKPOINT_HOME>/archive`` (the local job store ``sparkpoint list -a`` reads;
entries older than ``jobstore.expiration-time``, default 1 h, are dropped there, as Flink's job store drops
them). :class:`ArchiveStore` reads archives back for ``sparkpoint list -a`` and ``sparkpoint history-server``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import fsspec

from sparkpoint.rest import checkpoint_json as cj
from sparkpoint.rest import job_json as jj
from sparkpoint.rest import vertex_json as vj
from sparkpoint.rest.job_json import JobView

__all__ = ["archive_job", "archived_responses", "ArchiveStore", "local_archive_dir", "ARCHIVE_DIR_KEY"]

logger = logging.getLogger(__name__)

ARCHIVE_DIR_KEY = "jobmanager.archive.fs.dir"
DEFAULT_EXPIRATION_S = 3600.0  # jobstore.expiration-time, Flink's default


def local_archive_dir() -> Path:
    return Path(os.environ.get("SPARKPOINT_HOME") or Path.home() / ".sparkpoint") / "archive"


def archived_responses(view: JobView) -> list[tuple[str, Any]]:
    """``(path, answer)`` of what a client may ask of an ended job (Flink's ``JsonArchivist`` paths)."""
    jid = view.master.job_id
    answers: list[tuple[str, Callable[[], Any]]] = [
        ("/jobs/overview", lambda: jj.jobs_overview(view)),
        (f"/jobs/{jid}", lambda: jj.job_details(view)),
        (f"/jobs/{jid}/plan", lambda: jj.job_plan(view)),
        (f"/jobs/{jid}/config", lambda: jj.job_config(view)),
        (f"/jobs/{jid}/exceptions", lambda: jj.job_exceptions(view)),
        (f"/jobs/{jid}/accumulators", lambda: vj.accumulators(view)),
        (f"/jobs/{jid}/checkpoints", lambda: cj.checkpointing_statistics(view)),
        (f"/jobs/{jid}/checkpoints/config", lambda: cj.checkpoint_config(view)),
    ]
    for vid, _, _ in view.vertices():
        answers.append((f"/jobs/{jid}/vertices/{vid}", partial(vj.vertex_details, view, vid)))
        answers.append((f"/jobs/{jid}/vertices/{vid}/subtasktimes", partial(vj.subtask_times, view, vid)))
    coordinator = view.master.coordinator
    for stats in coordinator.stats.history() if coordinator is not None else []:
        answers.append((f"/jobs/{jid}/checkpoints/details/{stats.id}", partial(cj.checkpoint_details, view, stats.id)))
    out = []
    for path, answer in answers:
        try:
            out.append((path, answer()))
        except Exception:  # noqa: BLE001 - an answer the ended job cannot give is left out, not the archive
            logger.debug("archive of job %s: no answer for %s", jid, path, exc_info=True)
    return out


def archive_job(view: JobView, directories: Iterable[str]) -> list[str]:
    """Write the ended job's archive into each of ``directories`` (URLs or paths); returns where it went."""
    body = json.dumps({"archive": [{"path": p, "json": json.dumps(a)} for p, a in archived_responses(view)]})
    written = []
    for directory in directories:
        try:
            fs, root = fsspec.core.url_to_fs(directory)
            fs.makedirs(root, exist_ok=True)
            target = posixpath.join(root, view.master.job_id)
            tmp = posixpath.join(root, f".{view.master.job_id}.inprogress")
            with fs.open(tmp, "w") as f:
                f.write(body)
            fs.mv(tmp, target)
            written.append(fs.unstrip_protocol(target))
        except OSError as e:  # the job's end is not failed by its archive: said, and the next directory tried
            logger.warning("could not archive job %s into %s: %s", view.master.job_id, directory, e)
    return written


class ArchiveStore:
    """The archived jobs of some directories: ``{path: answer}`` per job, read again when a file changes."""

    def __init__(self, directories: Iterable[str], expiration_s: float | None = None):
        self.directories = list(directories)
        self.expiration_s = expiration_s
        self._jobs: dict[str, tuple[float, dict[str, Any]]] = {}  # job id -> (mtime, path -> answer)

    def refresh(self) -> None:
        seen = set()
        for directory in self.directories:
            fs, root = fsspec.core.url_to_fs(directory)
            if not fs.exists(root):
                continue
            for info in fs.ls(root, detail=True):
                name = posixpath.basename(info["name"])
                if name.startswith(".") or info.get("type") == "directory":
                    continue
                mtime = float(info.get("mtime") or info.get("created") or 0)
                if self.expiration_s is not None and mtime and time.time() - mtime > self.expiration_s:
                    with contextlib.suppress(OSError):
                        fs.rm(info["name"])  # expired from the local job store, as Flink's job store drops it
                    continue
                seen.add(name)
                known = self._jobs.get(name)
                if known is None or known[0] != mtime:
                    answers = self._read(fs, info["name"])
                    if answers is not None:
                        self._jobs[name] = (mtime, answers)
        for gone in set(self._jobs) - seen:
            del self._jobs[gone]

    @staticmethod
    def _read(fs: Any, path: str) -> dict[str, Any] | None:
        try:
            with fs.open(path, "r") as f:
                doc = json.load(f)
            return {entry["path"]: json.loads(entry["json"]) for entry in doc["archive"]}
        except (OSError, ValueError, KeyError, TypeError) as e:
            logger.warning("skipping %s: not a job archive (%s)", path, e)
            return None

    def jobs(self) -> list[dict]:
        """Every archived job's ``/jobs/overview`` entry, newest first."""
        out = [job for _, answers in self._jobs.values() for job in answers.get("/jobs/overview", {}).get("jobs", [])]
        return sorted(out, key=lambda j: j.get("end-time", 0), reverse=True)

    def answer(self, path: str) -> Any | None:
        """What the archived job answered at ``path`` (``/jobs/<jid>/...``), or None."""
        parts = path.split("/")
        if len(parts) > 2 and parts[1] == "jobs" and parts[2] in self._jobs:
            return self._jobs[parts[2]][1].get(path.rstrip("/"))
        return None
