"""Crash-and-restore driver: run a job, SIGKILL it at random moments, restore, repeat.

Used by the end-to-end exactly-once tests and the soak benchmark. Each round starts
``sparkpoint run`` (restoring from the newest completed checkpoint after the first),
kills the process either after a random delay or at a fault-injection point
(``SPARKPOINT_KILL_AT``), and goes on until a round finishes by itself. The checkpoint
directory is a local path or any URL checkpoint storage takes (``s3://bucket/prefix``: the
``s3.*`` keys of ``conf`` reach the store, here as in the job).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

from sparkpoint.storage.checkpoint_storage import latest_completed
from sparkpoint.storage.file_systems import storage_options_for

__all__ = ["ALL_FAULT_POINTS", "FAULT_POINTS", "KillLoop", "KillLoopResult", "read_committed_lines", "run_command"]

FAULT_POINTS = ("barrier", "metadata-write", "after-metadata", "after-commit")
# and the points inside the protocol: the asynchronous upload, the middle of a sink's commit
ALL_FAULT_POINTS = (*FAULT_POINTS, "upload", "sink-commit")


@dataclass
class KillLoopResult:
    rounds: int = 0
    kills: int = 0
    fault_kills: dict = field(default_factory=dict)
    restores: list = field(default_factory=list)
    seconds: float = 0.0
    log: list = field(default_factory=list)


def run_command(job: str, job_args: Sequence[str], conf: dict, restore: Optional[str] = None,
                cli_options: Sequence[str] = ()) -> list[str]:
    """``sparkpoint [cli_options] run -D k=v ... [-s restore] job job_args`` with this Python."""
    cmd = [sys.executable, "-m", "sparkpoint.cli", *cli_options, "run"]
    for k, v in conf.items():
        cmd += ["-D", f"{k}={v}"]
    if restore:
        cmd += ["-s", restore]
    return cmd + [job, *job_args]


class KillLoop:
    """Runs ``sparkpoint run [conf] job [job_args]`` until it finishes, killing it ``kills`` times."""

    def __init__(self, job: str, job_args: Sequence[str], checkpoint_dir: Union[Path, str], conf: dict,
                 kills: int, seed: int = 7, min_delay: float = 0.5, max_delay: float = 4.0,
                 fault_share: float = 0.4, cwd: Optional[str] = None, timeout_per_round: float = 600,
                 start_marker: str = "Job has been submitted", fault_points: Sequence[str] = FAULT_POINTS,
                 before_restart: Optional[Callable[[int], None]] = None):
        self.job, self.job_args, self.checkpoint_dir = job, list(job_args), checkpoint_dir
        self.checkpoint_uri = checkpoint_dir.as_uri() if isinstance(checkpoint_dir, Path) else checkpoint_dir
        self.conf = dict(conf)
        self.kills = kills
        self.rnd = random.Random(seed)
        self.min_delay, self.max_delay, self.fault_share = min_delay, max_delay, fault_share
        self.cwd = cwd
        self.timeout_per_round = timeout_per_round
        self.start_marker = start_marker  # random kill delays count from the first output line with it
        self.fault_points = tuple(fault_points)   # a fault round kills at one of these (see testing/faults.py)
        self.before_restart = before_restart      # called with the round number before every round after the first

    def _command(self, restore: Optional[str]) -> list[str]:
        return run_command(self.job, self.job_args, self.conf, restore)

    def run(self) -> KillLoopResult:
        result = KillLoopResult()
        started = time.time()
        kills_left = self.kills
        while True:
            restore = latest_completed(self.checkpoint_uri, storage_options=storage_options_for(
                self.checkpoint_uri, self.conf)) if result.rounds else None
            if result.rounds and self.before_restart is not None:
                self.before_restart(result.rounds + 1)
            env = dict(os.environ)
            env.pop("SPARKPOINT_KILL_AT", None)
            delay = None
            if kills_left > 0:
                if self.rnd.random() < self.fault_share:
                    point = self.rnd.choice(self.fault_points)
                    env["SPARKPOINT_KILL_AT"] = f"{point}@{self.rnd.randint(1, 3)}"
                    result.fault_kills[point] = result.fault_kills.get(point, 0) + 1
                else:
                    delay = self.rnd.uniform(self.min_delay, self.max_delay)
            result.rounds += 1
            result.restores.append(restore)
            proc = subprocess.Popen(self._command(restore), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=env, cwd=self.cwd, text=True)
            lines: list[str] = []
            submitted = threading.Event()

            def pump(proc: subprocess.Popen = proc, lines: list[str] = lines,
                     submitted: threading.Event = submitted) -> None:
                for line in proc.stdout:  # type: ignore[union-attr]
                    lines.append(line)
                    if self.start_marker in line:
                        submitted.set()
                submitted.set()

            reader = threading.Thread(target=pump, daemon=True)
            reader.start()
            if delay is not None:
                # the delay counts from the job's start, so every kill lands while it runs
                submitted.wait(timeout=self.timeout_per_round)
                try:
                    proc.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=self.timeout_per_round)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise AssertionError(f"round {result.rounds} did not finish in {self.timeout_per_round} s:\n"
                                     + "".join(lines)) from None
            reader.join(timeout=10)
            out = "".join(lines)
            result.log.append(out)
            if proc.returncode == -signal.SIGKILL and not _finished(out):
                result.kills += 1
                kills_left -= 1
                continue
            if proc.returncode == -signal.SIGKILL:
                # killed after the job had finished (its output committed, its checkpoints removed): not a kill of
                # a running job; restoring an older checkpoint now would write the output a second time
                result.log.append("(killed after the job had finished)")
                break
            if proc.returncode != 0:
                raise AssertionError(f"round {result.rounds} failed with exit code {proc.returncode}:\n{out}")
            if "SPARKPOINT_KILL_AT" in env:
                # the fault point was never reached before the job finished: not a kill
                point = env["SPARKPOINT_KILL_AT"].partition("@")[0]
                result.fault_kills[point] -= 1
            break
        result.seconds = time.time() - started
        return result


def _finished(output: str) -> bool:
    """Whether a ``sparkpoint run``'s output says its job reached FINISHED (the CLI's ``Job with JobID ... has
    finished.`` line, printed before the job removes its checkpoints)."""
    return " has finished." in output and "Job with JobID " in output


def read_committed_lines(directory: Path) -> list[str]:
    """Every line of every visible (non-hidden) file under ``directory``, as a plain reader sees them."""
    lines: list[str] = []
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not any(part.startswith((".", "_")) for part in path.relative_to(directory).parts):
            lines.extend(path.read_text().splitlines())
    return lines
