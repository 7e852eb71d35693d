"""Crash-and-restore driver: run a job, SIGKILL it at random progress points, restore, repeat.

For a user's own job as for the end-to-end exactly-once tests and the soak benchmark
(``docs/testing.md`` shows a test of a job's exactly-once with it). Each round starts
``sparkpoint run`` (restoring from the newest completed checkpoint after the first) and,
while kills are left, ends it with a SIGKILL; the round after the last kill runs to the
end. The checkpoint directory is a local path or any URL checkpoint storage takes
(``s3://bucket/prefix``: the ``s3.*`` keys of ``conf`` reach the store, here as in the job).

Kills come at progress points, never after a fixed delay, so a fast machine and a slow one
land every kill (see ``testing/faults.py``):

- A killed round's sources read at most ``epochs_per_round`` epochs
  (``SPARKPOINT_HOLD_SOURCES_AFTER``); then its epochs are empty but go on, with their
  checkpoints and commits, until the kill. The job cannot finish in a killed round, and
  no round gets further than that, so a job of more than ``kills * (epochs_per_round + 1)``
  epochs of input outlasts every kill (else the round that finishes first says so).
- A *fault* round (share ``fault_share``) is killed by the child itself, the n-th time
  (1..3) it passes a fault point of the checkpoint protocol (``SPARKPOINT_KILL_AT``). A
  point the held round does not pass again (``sink-commit`` with nothing to commit) is
  replaced by the driver's kill after ``n + 2`` further checkpoints (``fallback``).
- A *random* round is killed by the driver after a random number of checkpoints of the
  round have completed (0..``checkpoints_per_round``, seen in ``SPARKPOINT_PROGRESS_FILE``)
  and a random number of its epochs (1..``epochs_per_round``, its ``epoch N:`` lines), plus
  a random fraction of the time its last epoch took: anywhere in the protocol — while an
  epoch runs, at a barrier, during an upload, between ``_metadata`` and the commit.

Every kill is checked: the driver's SIGKILL went to a live process, every killed round
died by signal 9, and a round given a checkpoint restored it (its first epoch follows one
an earlier round ran; a fresh run starts at epoch 0).
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sparkpoint.storage.checkpoint_storage import latest_completed
from sparkpoint.storage.file_systems import storage_options_for

__all__ = [
    "ALL_FAULT_POINTS",
    "FAULT_POINTS",
    "KillLoop",
    "KillLoopResult",
    "kill_loop_conf",
    "read_committed_lines",
    "run_command",
]

FAULT_POINTS = ("barrier", "metadata-write", "after-metadata", "after-commit")
# and the points inside the protocol: the asynchronous upload, the middle of a sink's commit
ALL_FAULT_POINTS = (*FAULT_POINTS, "upload", "sink-commit")

_EPOCH_LINE = re.compile(r"^epoch (\d+): ")
_CHECKPOINT_DONE = "after-commit"  # every completed checkpoint passes it, after its sinks' commit


@dataclass
class KillLoopResult:
    """What a :meth:`KillLoop.run` did: its rounds, the kills (by the driver, or by the job at a fault
    point), the checkpoint each round restored, and each round's output (``log``)."""

    rounds: int = 0
    kills: int = 0
    fault_kills: dict = field(default_factory=dict)  # kills by the child at a fault point, per point
    fallback_kills: int = 0  # fault rounds the driver ended (point not passed again)
    restores: list = field(default_factory=list)  # per round: the checkpoint it was given (None: fresh)
    plans: list = field(default_factory=list)  # per round: how it was to end, in words
    first_epochs: list = field(default_factory=list)  # per round: its first epoch (None: killed before one)
    last_epochs: list = field(default_factory=list)  # per round: its last epoch line's
    seconds: float = 0.0
    log: list = field(default_factory=list)


def kill_loop_conf(checkpoints: Path | str, target: str = "local", **keys: object) -> dict:
    """The configuration of a job under a kill loop, ``keys`` over it: checkpoints into ``checkpoints`` (a local
    directory or a URL) every second, the last three kept and retained when a round ends (the next round restores
    one), parallelism 2, no restart strategy (a round that fails ends: the loop restores, not the job itself), and
    on Spark an embedded ``local[2]`` without its web UI."""
    return {
        "execution.target": target,
        "execution.checkpointing.interval": "1 s",
        "state.checkpoints.dir": checkpoints.as_uri() if isinstance(checkpoints, Path) else checkpoints,
        "state.checkpoints.num-retained": 3,
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "parallelism.default": 2,
        "restart-strategy.type": "none",
        **({"spark.master": "local[2]", "spark.ui.enabled": "false"} if target == "spark" else {}),
        **keys,
    }


def run_command(
    job: str, job_args: Sequence[str], conf: dict, restore: str | None = None, cli_options: Sequence[str] = ()
) -> list[str]:
    """``sparkpoint [cli_options] run -D k=v ... [-s restore] job job_args`` with this Python."""
    cmd = [sys.executable, "-m", "sparkpoint.cli", *cli_options, "run"]
    # a progress line per epoch (in continuous mode, per barrier interval): the rounds choose kill points by them
    for k, v in {"sparkpoint.cli.progress-interval": "0 ms", **conf}.items():
        cmd += ["-D", f"{k}={v}"]
    if restore:
        cmd += ["-s", restore]
    return cmd + [job, *job_args]


@dataclass
class _Plan:
    """How a killed round ends: at a fault point, or by the driver after so many checkpoints and epochs."""

    fault: str | None = None  # "point@n"
    checkpoints: int = 0
    epochs: int = 1
    fraction: float = 0.0  # of the last epoch's time, after the progress point

    def describe(self) -> str:
        if self.fault is not None:
            return f"fault {self.fault}"
        return (
            f"random: after {self.checkpoints} checkpoint(s) and {self.epochs} epoch(s), "
            f"+{self.fraction:.2f} of an epoch"
        )


class _Round:
    """One running ``sparkpoint run``: its output lines and epochs (a reader thread), its progress file."""

    def __init__(self, cmd: list[str], env: dict, cwd: str | None, progress: Path):
        self.progress, self._offset = progress, 0
        self.progress_lines: list[str] = []  # the fault points the child passed (testing/faults.py)
        self.lines: list[str] = []
        self.epochs: list[tuple[int, float]] = []  # (epoch, when its line came)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd, text=True)
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.append(line)
            m = _EPOCH_LINE.match(line)
            if m:
                self.epochs.append((int(m.group(1)), time.time()))

    def poll_progress(self) -> list[str]:
        if self.progress.exists():
            with open(self.progress) as f:
                f.seek(self._offset)
                text = f.read()
            whole = text[: text.rfind("\n") + 1]  # a line still being written waits for the next poll
            self._offset += len(whole)
            self.progress_lines.extend(whole.splitlines())
        return self.progress_lines

    def checkpoints(self) -> int:
        return self.poll_progress().count(_CHECKPOINT_DONE)

    def epoch_seconds(self) -> float:
        """How long the last epoch took, line to line (its own figure for the first)."""
        if len(self.epochs) >= 2:
            return self.epochs[-1][1] - self.epochs[-2][1]
        m = re.search(r"\((\d+\.\d+)s\)", self.lines[-1] if self.lines else "")
        return float(m.group(1)) if m else 0.1

    def output(self) -> str:
        return "".join(self.lines)


class KillLoop:
    """Runs ``sparkpoint run [conf] job [job_args]`` until it finishes, killing it exactly ``kills`` times.

    Args:
        job: the job file (a Python program that builds and executes a job, as ``sparkpoint run`` takes).
        job_args: the job's own arguments.
        checkpoint_dir: where the job's checkpoints go (a local ``Path`` or a URL such as
            ``s3://bucket/prefix``); ``conf`` must name the same place as ``state.checkpoints.dir``.
        conf: configuration keys passed as ``-D key=value``: checkpointing must be on, and
            ``restart-strategy.type: none`` makes a failure end the round instead of being restarted.
        kills: how many rounds are killed; the round after the last kill runs to the end and must exit 0.
        seed: seeds the choice of every kill, so a failing run can be repeated.
        fault_share: the share of kills made by the job itself at a fault point of the checkpoint
            protocol (one of ``fault_points``), the rest by this driver at a random moment.
        cwd: the child's working directory.
        timeout_per_round: seconds a round may take before the loop fails.
        fault_points: the points of :mod:`sparkpoint.testing.faults` a fault kill chooses from.
        before_restart: called with the round's number before each round after the first.
        epochs_per_round: a killed round's sources read at most this many epochs; the job's input must
            last more than ``kills * (epochs_per_round + 1)`` epochs.
        checkpoints_per_round: a random kill waits for 0 to this many completed checkpoints of its round.

    :meth:`run` raises ``AssertionError`` naming the round when a kill did not land as planned, a
    restored round did not continue from its checkpoint, or the last round failed; compare the
    job's output with an oracle afterwards.
    """

    def __init__(
        self,
        job: str,
        job_args: Sequence[str],
        checkpoint_dir: Path | str,
        conf: dict,
        kills: int,
        seed: int = 7,
        fault_share: float = 0.4,
        cwd: str | None = None,
        timeout_per_round: float = 600,
        fault_points: Sequence[str] = FAULT_POINTS,
        before_restart: Callable[[int], None] | None = None,
        epochs_per_round: int = 4,
        checkpoints_per_round: int = 2,
    ):
        self.job, self.job_args, self.checkpoint_dir = job, list(job_args), checkpoint_dir
        self.checkpoint_uri = checkpoint_dir.as_uri() if isinstance(checkpoint_dir, Path) else checkpoint_dir
        self.conf = dict(conf)
        self.kills = kills
        self.rnd = random.Random(seed)
        self.fault_share = fault_share
        self.cwd = cwd
        self.timeout_per_round = timeout_per_round
        self.fault_points = tuple(fault_points)  # a fault round kills at one of these (see testing/faults.py)
        self.before_restart = before_restart  # called with the round number before every round after the first
        self.epochs_per_round = epochs_per_round  # a killed round's sources read at most this many epochs
        self.checkpoints_per_round = checkpoints_per_round  # a random kill waits for 0..this many checkpoints

    def _command(self, restore: str | None) -> list[str]:
        return run_command(self.job, self.job_args, self.conf, restore)

    def _plan(self) -> _Plan:
        if self.rnd.random() < self.fault_share:
            return _Plan(fault=f"{self.rnd.choice(self.fault_points)}@{self.rnd.randint(1, 3)}")
        return _Plan(
            checkpoints=self.rnd.randint(0, self.checkpoints_per_round),
            epochs=self.rnd.randint(1, self.epochs_per_round),
            fraction=self.rnd.random(),
        )

    def run(self) -> KillLoopResult:
        """Run the rounds until one ends without a kill planned; what happened in each."""
        result = KillLoopResult()
        started = time.time()
        with tempfile.TemporaryDirectory(prefix="kill-loop-") as scratch:
            while True:
                restore = (
                    latest_completed(
                        self.checkpoint_uri, storage_options=storage_options_for(self.checkpoint_uri, self.conf)
                    )
                    if result.rounds
                    else None
                )
                if result.rounds and self.before_restart is not None:
                    self.before_restart(result.rounds + 1)
                plan = self._plan() if result.kills < self.kills else None
                result.rounds += 1
                result.restores.append(restore)
                result.plans.append(plan.describe() if plan is not None else "to the end")
                progress = Path(scratch) / f"round-{result.rounds}.progress"
                run = _Round(self._command(restore), self._env(plan, progress), self.cwd, progress)
                driver_killed = self._drive(run, plan, result)
                self._check_restored(run, restore, result)
                if plan is None:
                    if run.proc.returncode != 0:
                        raise AssertionError(
                            f"round {result.rounds} (the last, not to be killed) failed with exit "
                            f"code {run.proc.returncode}:\n{run.output()}"
                        )
                    break
                self._check_killed(run, plan, driver_killed, result)
        result.seconds = time.time() - started
        return result

    def _env(self, plan: _Plan | None, progress: Path) -> dict:
        env = dict(os.environ)
        for key in ("SPARKPOINT_KILL_AT", "SPARKPOINT_HOLD_SOURCES_AFTER", "SPARKPOINT_PROGRESS_FILE"):
            env.pop(key, None)
        if plan is not None:
            env["SPARKPOINT_PROGRESS_FILE"] = str(progress)
            env["SPARKPOINT_HOLD_SOURCES_AFTER"] = str(self.epochs_per_round)
            if plan.fault is not None:
                env["SPARKPOINT_KILL_AT"] = plan.fault
        return env

    def _drive(self, run: _Round, plan: _Plan | None, result: KillLoopResult) -> bool:
        """Wait for the round's end, killing it where ``plan`` says; whether the driver sent the SIGKILL."""
        deadline = time.time() + self.timeout_per_round
        kill_at: float | None = None
        killed = False
        while run.proc.poll() is None:
            now = time.time()
            if now > deadline:
                run.proc.kill()
                run.proc.wait()
                raise AssertionError(
                    f"round {result.rounds} ({result.plans[-1]}) did not end in "
                    f"{self.timeout_per_round} s:\n{run.output()}"
                )
            if plan is not None and kill_at is None and self._due(run, plan):
                kill_at = now + plan.fraction * run.epoch_seconds()
            if kill_at is not None and now >= kill_at and run.proc.poll() is None:
                os.kill(run.proc.pid, signal.SIGKILL)  # a live process: poll() said it had not ended
                killed = True
                run.proc.wait()
                break
            time.sleep(0.01)
        run.reader.join(timeout=10)
        run.poll_progress()
        result.log.append(run.output())
        if killed and plan is not None and plan.fault is not None:
            result.fallback_kills += 1
        return killed

    def _due(self, run: _Round, plan: _Plan) -> bool:
        if plan.fault is not None:  # the fallback: the point should have been passed n times by now
            nth = plan.fault.partition("@")[2]
            return bool(run.epochs) and run.checkpoints() >= int(nth) + 2
        return len(run.epochs) >= plan.epochs and run.checkpoints() >= plan.checkpoints

    def _check_killed(self, run: _Round, plan: _Plan, driver_killed: bool, result: KillLoopResult) -> None:
        """A round with kills left died by SIGKILL: the driver's, or its own at the planned fault point."""
        code, out = run.proc.returncode, run.output()
        if code == 0:
            raise AssertionError(
                f"round {result.rounds} finished before its kill ({result.kills} of {self.kills} kills done): "
                f"the job's input must last more than kills x (epochs_per_round + 1) = "
                f"{self.kills * (self.epochs_per_round + 1)} epochs:\n{out}"
            )
        if code != -signal.SIGKILL:
            raise AssertionError(f"round {result.rounds} ({result.plans[-1]}) failed with exit code {code}:\n{out}")
        if not driver_killed:
            assert plan.fault is not None, f"round {result.rounds} died by a SIGKILL nobody sent:\n{out}"
            point = plan.fault.partition("@")[0]
            assert f"kill {point}" in run.progress_lines, (
                f"round {result.rounds} died by SIGKILL, not at {plan.fault}: {run.progress_lines[-10:]}\n{out}"
            )
            result.fault_kills[point] = result.fault_kills.get(point, 0) + 1
        result.kills += 1

    def _check_restored(self, run: _Round, restore: str | None, result: KillLoopResult) -> None:
        """A round given a checkpoint went on from it: its first epoch is one an earlier round reached (+1)."""
        first = run.epochs[0][0] if run.epochs else None
        reached = max((e for e in result.last_epochs if e is not None), default=-1)
        result.first_epochs.append(first)
        result.last_epochs.append(run.epochs[-1][0] if run.epochs else None)
        if first is None:
            return  # killed in its restore (a fault point of the re-commit), or failed: said elsewhere
        if restore is None:
            assert first == 0, f"round {result.rounds} started fresh at epoch {first}"
            return
        # (+2: a checkpoint that completes at its barrier may be committed before its epoch's line is printed)
        assert 0 < first <= reached + 2, (
            f"round {result.rounds} was given {restore} but began at epoch {first} (earlier rounds ran to {reached})"
        )


def read_committed_lines(directory: Path) -> list[str]:
    """Every line of every visible (non-hidden) file under ``directory``, as a plain reader sees them."""
    lines: list[str] = []
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not any(part.startswith((".", "_")) for part in path.relative_to(directory).parts):
            lines.extend(path.read_text().splitlines())
    return lines
