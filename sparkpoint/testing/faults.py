"""Fault-injection points, switched on by environment variables (for crash tests).

``SPARKPOINT_KILL_AT=<point>[@<n>]`` SIGKILLs this process the ``n``-th time (default
1st) execution passes ``fault_point(<point>)``. Points in the checkpoint path:
``barrier``, ``metadata-write`` (inside the ``_metadata`` write: half of it written under
a temporary name, as a crashed writer leaves it; ``_metadata`` itself not yet there),
``after-metadata`` (checkpoint complete, sinks not yet committed), ``after-commit``.
Inside the protocol:

- ``upload``: in the asynchronous upload of a task's keyed snapshot, once that task's
  files are written and before its acknowledgement; with several stateful tasks, part of
  the checkpoint's files are written and the rest not (``@1`` on the local executor: the
  first task's).
- ``sink-commit``: inside a sink's commit, after each committable it commits: a file
  sink's rename of a staged part file, a Kafka sink's EndTxn of one transaction, a JDBC
  sink's ``COMMIT PREPARED`` of one gid. A kill there leaves part of an epoch's output
  committed. A restore commits the restored checkpoint's committables again and passes
  the point too, for files and JDBC only when it commits one that was still staged or
  prepared; for Kafka at every transaction (a repeated EndTxn cannot tell).

Fault points may sit in any layer (pyproject.toml lets the connectors import this
module, which needs only the standard library).
``SPARKPOINT_SLOW_UPLOAD_MS`` delays every keyed-state upload; ``SPARKPOINT_FAIL_UPLOAD=1``
makes uploads fail (the task declines).

For a crash driver that kills at progress points, not after delays (``testing/kill_loop.py``):

- ``SPARKPOINT_PROGRESS_FILE=<path>``: every fault point passed, armed or not, appends its
  name as a line to ``path`` (``kill <name>`` just before a fault kill; the driver process
  and Spark's Python workers alike), so the driver sees the protocol go by: a completed
  checkpoint passes ``after-metadata`` and ``after-commit``.
- ``SPARKPOINT_HOLD_SOURCES_AFTER=<n>``: once this process has deployed ``n`` epochs of
  sources, they read nothing more (the ``pause`` of a stop-with-savepoint's epoch): the
  job goes on with empty epochs, checkpoints and commits, and cannot finish until it is
  killed. The driver bounds with it how far a round may get, whatever the machine's speed.
"""

from __future__ import annotations

import os
import signal
import time

__all__ = ["fault_point", "fault_point_armed", "sources_held", "upload_delay_s", "upload_fails"]

_hits: dict[str, int] = {}
_first_source_epoch: list[int] = []  # the first epoch this process deployed sources for


def fault_point_armed(name: str) -> bool:
    """Whether ``SPARKPOINT_KILL_AT`` names ``name`` (a caller may prepare the crash's scene first)."""
    return os.environ.get("SPARKPOINT_KILL_AT", "").partition("@")[0] == name


def fault_point(name: str) -> None:
    """SIGKILL this process the n-th time it passes ``name``, if ``SPARKPOINT_KILL_AT`` asks so."""
    _progress(name)
    if not fault_point_armed(name):
        return
    nth = os.environ["SPARKPOINT_KILL_AT"].partition("@")[2]
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= int(nth or 1):
        _progress(f"kill {name}")
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)  # pragma: no cover - the signal arrives first


def sources_held(epoch: int) -> bool:
    """Whether the sources of ``epoch`` must read nothing (``SPARKPOINT_HOLD_SOURCES_AFTER``)."""
    limit = os.environ.get("SPARKPOINT_HOLD_SOURCES_AFTER", "")
    if not limit:
        return False
    if not _first_source_epoch:
        _first_source_epoch.append(epoch)
    held = epoch - _first_source_epoch[0] >= int(limit)
    if held and epoch - _first_source_epoch[0] == int(limit):
        _progress("hold")
    return held


def _progress(line: str) -> None:
    path = os.environ.get("SPARKPOINT_PROGRESS_FILE")
    if path:
        with open(path, "a") as f:  # one short append: whole lines, from several processes too
            f.write(line + "\n")


def upload_delay_s() -> float:
    return float(os.environ.get("SPARKPOINT_SLOW_UPLOAD_MS", "0") or 0) / 1000


def upload_fails() -> bool:
    return os.environ.get("SPARKPOINT_FAIL_UPLOAD", "") not in ("", "0")
