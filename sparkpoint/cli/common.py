"""What the ``sparkpoint`` commands share: ``-D`` and config-file parsing, the progress display, failure output."""

from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from sparkpoint.common.config_file import load_config_file
from sparkpoint.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from sparkpoint.errors import ConfigurationError, SparkpointError, UserFunctionError
from sparkpoint.runtime.job_listener import JobListener
from sparkpoint.runtime.restore import restore_message

__all__ = ["parse_dynamic", "load_conf", "conf_dir_file", "Progress", "report_failure", "user_traceback", "fmt_wm"]

CONF_DIR_VARIABLES = ("SPARKPOINT_CONF_DIR", "FLINK_CONF_DIR")
FINISHED_LINE = "Job with JobID %s has finished."
CONF_FILE_NAMES = ("config.yaml", "flink-conf.yaml")


def parse_dynamic(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        if "=" not in item:
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint="-D")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def load_conf(path: str | None, option: str = "--config-file") -> dict[str, Any]:
    if not path:
        return {}
    try:
        return load_config_file(path)
    except ConfigurationError as e:
        raise click.BadParameter(str(e), param_hint=option) from e


def conf_dir_file() -> str | None:
    """``config.yaml`` (Flink 2) or ``flink-conf.yaml`` in ``$SPARKPOINT_CONF_DIR`` or ``$FLINK_CONF_DIR``."""
    for variable in CONF_DIR_VARIABLES:
        directory = os.environ.get(variable)
        if directory:
            for name in CONF_FILE_NAMES:
                if (Path(directory) / name).is_file():
                    return str(Path(directory) / name)
    return None


def fmt_wm(wm: int | None) -> str:
    if wm is None or wm <= MIN_WATERMARK:
        return "-"
    if wm >= MAX_WATERMARK:
        return "+inf (end of input)"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(wm / 1000)) + f".{wm % 1000:03d}Z"


PROGRESS_EVERY_S = 1.0
"""Continuous mode's progress: a line at most this often (its barriers pass five times a second), each over the
barrier intervals since the last; epoch mode prints a line per epoch (an epoch is a Spark job). The key
``sparkpoint.cli.progress-interval`` sets it for either mode (``0 ms``: a line per epoch or barrier interval)."""
PROGRESS_INTERVAL_KEY = "sparkpoint.cli.progress-interval"


@dataclass
class _Held:
    """Epochs not printed yet: the first one's number, their sums, and the last one's stats."""

    first: int
    records_in: int
    records_out: int
    seconds: float
    last: Any

    def add(self, stats: Any) -> None:
        self.records_in += stats.records_in
        self.records_out += stats.records_out
        self.seconds += stats.duration_s
        self.last = stats


class Progress(JobListener):
    """Live progress on a terminal, plain lines in a pipe: a listener of the running job."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.tty = stream.isatty()
        self.started = time.time()
        self.busy_s = 0.0
        self.every_s = 0.0
        self.last_line = 0.0  # monotonic time of the last line
        self.pending: _Held | None = None
        self.live: Any = None
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(file=stream), refresh_per_second=4, transient=False)
            self.live.start()

    def on_job_started(self, job: Any) -> None:
        config = getattr(job, "config", None)
        if config is None:
            return
        mode = str(config.get_string("sparkpoint.execution.mode") or "epoch").strip().lower()
        default_ms = int(PROGRESS_EVERY_S * 1000) if mode == "continuous" else 0
        self.every_s = (config.get_duration_ms(PROGRESS_INTERVAL_KEY, default_ms) or 0) / 1000

    def on_epoch_completed(self, stats: Any) -> None:
        self.busy_s += stats.duration_s
        if self.pending is None:
            self.pending = _Held(stats.epoch, stats.records_in, stats.records_out, stats.duration_s, stats)
        else:
            self.pending.add(stats)
        ended = stats.watermark is not None and stats.watermark >= MAX_WATERMARK
        if ended or time.monotonic() - self.last_line >= self.every_s:
            self._print_pending()

    def _print_pending(self) -> None:
        held = self.pending
        if held is None:
            return
        self.pending, self.last_line = None, time.monotonic()
        stats = held.last
        rate = stats.total_records_in / max(self.busy_s, 1e-9)
        epochs = f"epoch {held.first}" if held.first == stats.epoch else f"epochs {held.first}-{stats.epoch}"
        line = (
            f"{epochs}: {held.records_in:,} records in, {held.records_out:,} out ({held.seconds:.2f}s); "
            f"total {stats.total_records_in:,} at {rate:,.0f} records/s; watermark {fmt_wm(stats.watermark)}"
        )
        if self.live is not None:
            self.live.update(line)
        else:
            print(line, file=self.stream, flush=True)

    def on_restore(self, job_id: str, restored: Any) -> None:
        self._print_pending()  # the epochs before the failure: their numbers start again from the checkpoint's
        line = restore_message(job_id, restored)
        if self.live is not None:  # above the live progress line
            self.live.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            print(line, file=self.stream, flush=True)

    def on_status_change(self, job_id: str, old: Any, new: Any, error: Any) -> None:
        if new.name == "FINISHED":  # Flink's CLI line; said before the job removes its checkpoints
            self.close()  # on a terminal: below the progress line, not on it
            print(f"{FINISHED_LINE % job_id}", file=self.stream, flush=True)

    def on_job_ended(self, job: Any) -> None:
        fate = getattr(job, "checkpoints_fate", None)
        if fate:
            self.close()
            print(fate, file=self.stream, flush=True)

    def close(self) -> None:
        self._print_pending()
        if self.live is not None:
            self.live.stop()
            self.live = None


def report_failure(error: SparkpointError, verbose: bool = False) -> None:
    """The job's failure: for a user function, its traceback (the function's frames) first, then one line;
    ``verbose``: the whole traceback before it."""
    if verbose:
        click.echo("".join(traceback.format_exception(error)).rstrip(), err=True)
    user_error = error if isinstance(error, UserFunctionError) else error.__cause__
    if isinstance(user_error, UserFunctionError) and user_error.traceback_text():
        click.echo("\n" + user_error.traceback_text().rstrip(), err=True)
    click.echo(f"\nThe job failed: {error}", err=True)


_NOT_THE_JOBS = (
    str(Path(__file__).resolve().parents[1]) + os.sep,
    str(Path(click.__file__).resolve().parent) + os.sep,
    "<frozen runpy>",
)


def user_traceback(error: BaseException, verbose: bool = False) -> str:
    """An error the job script raised, as Python prints it but for the frames of sparkpoint, click and runpy
    around the script's (all of them with ``verbose``)."""
    if verbose:
        return "".join(traceback.format_exception(error)).rstrip()
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(_NOT_THE_JOBS)]
    head = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) if frames else ""
    return (head + "".join(traceback.format_exception_only(error))).rstrip()


def ensure_sys_path(path: Path) -> None:
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
