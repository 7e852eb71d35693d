"""What a file sink's output directory holds when a job starts: lineage, rollback, other jobs' files.

Committed part files are named ``<prefix>-<job>-<subtask>-<counter><suffix>``: ``job`` names
the job that wrote it (:func:`part_job`) and each subtask's counter grows through the job's
life and, as writer state, on through the jobs restored from its checkpoints. A job restored
from a checkpoint records its parent in the output directory, in the hidden file
``.sparkpoint-jobs/<job>.json``: the restored job, the checkpoint and its writers' counters
(the hand-over point). The jobs linked that way form one **lineage**; a fresh job starts one.

Restoring checkpoint C of job J, the output C saw is exactly the part files of J with a
counter below C's counter of their subtask, and of each ancestor of J below its hand-over
counter. Every other committed part file of the lineage was committed after C (by J after
C's barrier, by ancestors past their hand-over, by jobs restored from C or later), and the
restored job writes its records again: :func:`prepare_file_output` moves these files aside
(into ``.rolled-back/chk-<C>-job-<job>/`` under the output directory, keeping their relative
paths, or into a directory given), deletes them, or warns. Files of other lineages are
never touched; they are counted and warned about (or fail the job, with
``if_not_empty='fail'``). Hidden files and directories (``.``/``_``) are not output.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from typing import Any, NamedTuple

from fsspec.core import url_to_fs

from sparkpoint.connectors.base import OutputStart
from sparkpoint.errors import SparkpointError

__all__ = [
    "OutputNotEmptyError",
    "PartName",
    "part_job",
    "committed_parts",
    "Lineage",
    "prepare_file_output",
    "LINEAGE_DIR",
    "ROLLED_BACK_DIR",
]

logger = logging.getLogger(__name__)

LINEAGE_DIR = ".sparkpoint-jobs"
ROLLED_BACK_DIR = ".rolled-back"


class OutputNotEmptyError(SparkpointError):
    """The output directory holds files of other jobs and the sink was asked to fail then; names it."""


def part_job(job_id: str) -> str:
    """The job's name in its part files' names."""
    return job_id.replace("-", "")[:12]


class PartName(NamedTuple):
    """A committed part file: its path and what its name says."""

    path: str
    job: str
    subtask: int
    counter: int


def _hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def committed_parts(fs: Any, root: str, prefix: str, suffix: str) -> tuple[list[PartName], list[str]]:
    """The visible files under ``root``: ``(part files of this naming, every other file)``."""
    pattern = re.compile(rf"^{re.escape(prefix)}-([^-/]+)-(\d+)-(\d+){re.escape(suffix)}$")
    parts, others = [], []
    for path in fs.find(root):
        if _hidden(path[len(root) :]):
            continue
        m = pattern.match(posixpath.basename(path))
        if m is None:
            others.append(path)
        else:
            parts.append(PartName(path, m.group(1), int(m.group(2)), int(m.group(3))))
    return parts, others


class Lineage:
    """The jobs of an output directory and which job each was restored from (its ``.sparkpoint-jobs``)."""

    def __init__(self, fs: Any, root: str):
        self.fs, self.dir = fs, f"{root}/{LINEAGE_DIR}"
        self.parents: dict[str, dict] = {}
        if fs.exists(self.dir):
            for path in fs.find(self.dir):
                if path.endswith(".json"):
                    record = json.loads(fs.cat_file(path))
                    self.parents[record["job"]] = record

    def record(self, job: str, parent: str, checkpoint_id: int, counters: dict[int, int]) -> None:
        """``job`` was restored from checkpoint ``checkpoint_id`` of ``parent``, whose writers were at ``counters``."""
        record = {
            "job": job,
            "parent": parent,
            "checkpoint": checkpoint_id,
            "counters": {str(i): n for i, n in counters.items()},
        }
        self.fs.makedirs(self.dir, exist_ok=True)
        self.fs.pipe_file(f"{self.dir}/{job}.json", json.dumps(record, sort_keys=True).encode())
        self.parents[job] = record

    def root_of(self, job: str) -> str:
        seen = {job}
        while job in self.parents and self.parents[job]["parent"] not in seen:
            job = self.parents[job]["parent"]
            seen.add(job)
        return job

    def seen_by(self, job: str, counters: dict[int, int]) -> dict[str, dict[int, int]]:
        """Per job, the counters below which a checkpoint of ``job`` at ``counters`` saw its part files."""
        seen = {job: counters}
        while job in self.parents and self.parents[job]["parent"] not in seen:
            record = self.parents[job]
            job = record["parent"]
            seen[job] = {int(i): int(n) for i, n in record["counters"].items()}
        return seen


def _restored_writers(start: OutputStart) -> tuple[str | None, dict[int, int]]:
    """The job that wrote the restored checkpoint's part files and its writers' counters by subtask."""
    jobs = {st["job"] for st in start.writer_states.values() if isinstance(st, dict) and "job" in st}
    counters = {int(i): int(st.get("part_counter", 0)) for i, st in start.writer_states.items() if isinstance(st, dict)}
    return (next(iter(jobs)) if len(jobs) == 1 else None), counters


def prepare_file_output(start: OutputStart, base_path: str, prefix: str, suffix: str) -> None:
    """Record the restored lineage, roll back what the restored checkpoint did not see, warn of other jobs' files."""
    fs, root = url_to_fs(base_path)
    root = root.rstrip("/") or "/"
    parent, counters = _restored_writers(start)
    me = part_job(start.job_id)
    if not fs.exists(root):
        if parent is not None and start.checkpoint_id is not None:
            Lineage(fs, root).record(me, parent, start.checkpoint_id, counters)
        return
    lineage = Lineage(fs, root)
    parts, others = committed_parts(fs, root, prefix, suffix)
    after: list[PartName] = []
    if parent is not None and start.checkpoint_id is not None:
        if parent != me:
            lineage.record(me, parent, start.checkpoint_id, counters)
        family = lineage.root_of(parent)
        seen = lineage.seen_by(parent, counters)
        mine = [p for p in parts if lineage.root_of(p.job) == family]
        others += [p.path for p in parts if lineage.root_of(p.job) != family]
        after = [p for p in mine if not (p.job in seen and p.counter < seen[p.job].get(p.subtask, 0))]
    else:
        others += [p.path for p in parts if p.job != me]
    _other_jobs(start, fs, base_path, others)
    if after:
        _roll_back(start, fs, root, base_path, after)


def _other_jobs(start: OutputStart, fs: Any, base_path: str, files: list[str]) -> None:
    if not files:
        return
    jobs = sorted(
        {m.group(1) for m in (re.search(r"-([0-9a-f]{12})-\d+-\d+", posixpath.basename(f)) for f in files) if m}
    )
    named = f" (part files of job(s) {', '.join(jobs[:5])}{', ...' if len(jobs) > 5 else ''})" if jobs else ""
    message = (
        f"sink '{start.sink_uid}': the output directory {base_path} already holds {len(files)} committed "
        f"file(s) of other jobs{named}"
    )
    if start.if_not_empty == "fail":
        raise OutputNotEmptyError(
            f"{message}; sparkpoint.sink.if-output-not-empty is 'fail': empty it or write elsewhere"
        )
    logger.warning(
        "%s; this job's part files are added beside them (sparkpoint.sink.if-output-not-empty: fail "
        "refuses such a directory)",
        message,
    )


def _roll_back(start: OutputStart, fs: Any, root: str, base_path: str, after: list[PartName]) -> None:
    what = (
        f"sink '{start.sink_uid}': {len(after)} part file(s) under {base_path} were committed after checkpoint "
        f"{start.checkpoint_id} ({start.replay_text()})"
    )
    if start.rollback == "off":
        logger.warning(
            "%s; the restored job writes their records again, so the output will hold them twice. "
            "Restore with --rollback move (sparkpoint.restore.rollback: move) to move them aside, or "
            "--rollback delete",
            what,
        )
        return
    if start.rollback == "delete":
        for part in after:
            fs.rm(part.path)
        logger.warning("%s; deleted them (sparkpoint.restore.rollback: delete)", what)
        return
    target_fs, target = fs, f"{root}/{ROLLED_BACK_DIR}"
    if start.rollback_dir:
        target_fs, target = url_to_fs(start.rollback_dir)
    target = f"{target.rstrip('/')}/chk-{start.checkpoint_id}-job-{part_job(start.job_id)}"
    for part in after:
        dest = f"{target}/{part.path[len(root) :].lstrip('/')}"
        target_fs.makedirs(posixpath.dirname(dest), exist_ok=True)
        if target_fs is fs:
            fs.mv(part.path, dest)
        else:
            target_fs.pipe_file(dest, fs.cat_file(part.path))
            fs.rm(part.path)
    logger.warning("%s; moved them to %s (sparkpoint.restore.rollback: move)", what, target)
