"""sparkpoint's parity jobs against the output PyFlink 2.3.0 recorded for jobs with the same semantics.

Every ``<job>.py`` next to this file is a sparkpoint job, run here as ``python <job>.py``
would run it; ``expected/<job>.txt`` is the stdout of PyFlink 2.3.0 running a job with
the same input and semantics (the independent oracle). Where a result can be worked out
by hand (word counts, window contents, running sums), the tests check that computation
too, and trust it over PyFlink should the two disagree.

README.md says how lines are compared and why: exactly where PyFlink's order is defined
(parallelism 1), per key where only each key's order is defined, and as multisets where
only the lines are (word_count in BATCH mode).

Every job runs in both execution modes (the ``mode`` fixture of conftest.py): in epochs, and
continuously (long-running tasks, barriers in band); the same comparisons hold in both.
"""

from __future__ import annotations

import contextlib
import logging
import re
import runpy
import struct
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.datastream.stream_execution_environment import set_cli_defaults

JOBS_DIR = Path(__file__).parent

# Lines PyFlink's runtime (Beam and PyFlink's own start-up) wrote to stdout ahead of the
# job's output; they say nothing about the job.
PYFLINK_STARTUP_LINES = {
    "Using Any for unsupported type: typing.Sequence[~T]",
    (
        "No module named google.cloud.bigquery_storage_v1. As a result, the ReadFromBigQuery transform "
        "*CANNOT* be used with `method=DIRECT_READ`."
    ),
    "PYFLINK_CYTHON_ENABLED: True",
}

# PyFlink ran at its default parallelism, the 2 cores of the recording machine. sparkpoint's
# default also follows the machine, so the jobs get the recorded value explicitly.
RECORDED_PARALLELISM = 2

RESULTS_TO_STDOUT = "Printing result to stdout. Use --output to specify output path."

_SUBTASK_PREFIX = re.compile(r"^(\d+)> (.*)$")

# the package whose log records show that a job ran in continuous mode
CONTINUOUS_RUNTIME = "sparkpoint.runtime.continuous"
ASSEMBLY = "sparkpoint.runtime.job_assembly"  # says when a BATCH job asked for continuous mode runs in epochs


# -- running a job and reading the recording ---------------------------------------------------


def run_job(
    job: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    tmp_path: Path,
    configuration: dict | None = None,
    *,
    mode: str,
    keep_argv: bool = False,
) -> tuple[list[str], dict[str, Any]]:
    """Run ``<job>.py`` as its own ``__main__`` in execution ``mode``; returns its stdout lines and its
    module globals.

    The configuration is what ``sparkpoint run -D ...`` would give the job; by default the
    in-process executor at the recorded parallelism. ``mode`` (``sparkpoint.execution.mode``) is
    checked to have reached the runtime: a continuous job's scheduler logs its slots, an epoch
    job's never touches continuous mode. ``keep_argv``: the caller set the job's ``sys.argv``.
    """
    script = JOBS_DIR / f"{job}.py"
    if configuration is None:
        configuration = {
            "execution.target": "local",
            "parallelism.default": RECORDED_PARALLELISM,
            "sparkpoint.local-state-dir": str(tmp_path / "local-state"),
        }
    if not keep_argv:
        monkeypatch.setattr(sys, "argv", [str(script)])
    monkeypatch.syspath_prepend(str(JOBS_DIR))
    # sparkpoint's log records stay out of the compared stdout, whatever handlers the process
    # has (PyFlink's Java-side logging never reached its stdout either).
    monkeypatch.setattr(logging.getLogger("sparkpoint"), "propagate", False)
    set_cli_defaults({"configuration": {**configuration, "sparkpoint.execution.mode": mode}})
    capsys.readouterr()
    with continuous_mode_records() as continuous, messages_of(ASSEMBLY) as assembly:
        try:
            job_globals = runpy.run_path(str(script), run_name="__main__")
        finally:
            set_cli_defaults({})
    in_epochs = any("BATCH runs in epochs" in m for m in assembly)  # a BATCH job runs in epochs in either mode
    assert bool(continuous) == (mode == "continuous" and not in_epochs), (
        f"{job} in {mode} mode; continuous mode logged {continuous}"
    )
    assert not in_epochs or mode == "continuous"
    return capsys.readouterr().out.splitlines(), job_globals


class _Messages(logging.Handler):
    """Keeps the messages of the records it is handed."""

    def __init__(self, level: int):
        super().__init__(level)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def continuous_mode_records() -> contextlib.AbstractContextManager[list[str]]:
    """The messages continuous mode's runtime logs (at INFO and above) meanwhile; its scheduler logs every
    deployment of slots, and a job in epoch mode logs nothing there."""
    return messages_of(CONTINUOUS_RUNTIME)


@contextlib.contextmanager
def messages_of(name: str) -> Iterator[list[str]]:
    """The messages logger ``name`` logs (at INFO and above) meanwhile."""
    handler = _Messages(logging.INFO)
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


#: run a parity job in-process, and on the default target (Spark, on the session the ``spark`` fixture starts)
TARGETS = ["local", pytest.param("spark", marks=pytest.mark.spark)]


def target_configuration(request: pytest.FixtureRequest, target: str, tmp_path: Path) -> dict | None:
    """``run_job``'s configuration for ``target``: None (in-process) or the default target's, on Spark."""
    if target != "spark":
        return None
    request.getfixturevalue("spark")
    return {"parallelism.default": RECORDED_PARALLELISM, "sparkpoint.local-state-dir": str(tmp_path / "local-state")}


def recorded(job: str) -> list[str]:
    """What PyFlink 2.3.0 printed for the job, less its runtime's start-up lines."""
    lines = (JOBS_DIR / "expected" / f"{job}.txt").read_text().splitlines()
    return [line for line in lines if line not in PYFLINK_STARTUP_LINES]


def subtask_and_body(line: str) -> tuple[int | None, str]:
    """``"2> (a,1)"`` -> ``(2, "(a,1)")``; a line without a ``N> `` prefix -> ``(None, line)``."""
    match = _SUBTASK_PREFIX.match(line)
    return (int(match.group(1)), match.group(2)) if match else (None, line)


def as_float32(x: float) -> float:
    """The double a Python float becomes after a Types.FLOAT() field: rounded to single precision."""
    return struct.unpack("f", struct.pack("f", x))[0]


# -- hand computations ----------------------------------------------------------------------------


def fixed_windows(events: list[tuple[str, int]], windows_of: Callable[[int], list[tuple[int, int]]]) -> list[str]:
    """``(key,start,end,count)`` of every non-empty window, all fired at end of input, by end then start."""
    counts: Counter = Counter()
    for key, ts in events:
        for start, end in windows_of(ts):
            counts[(key, start, end)] += 1
    fired = sorted(counts.items(), key=lambda item: (item[0][2], item[0][1]))
    return [f"({key},{start},{end},{n})" for (key, start, end), n in fired]


def sessions(events: list[tuple[str, int]], gap_of: Callable[[int], int]) -> list[str]:
    """``(key,start,end,count)`` of every session, by end.

    Each event proposes ``[ts, ts + gap)``; going through one key's proposals by start, a
    proposal joins the current session when it starts at or before the session's end (so
    touching windows merge, as Flink's TimeWindow.mergeWindows does).
    """
    proposals: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for key, ts in events:
        proposals[key].append((ts, ts + gap_of(ts)))
    closed = []
    for key, windows in proposals.items():
        merged: list[list[int]] = []
        for start, end in sorted(windows):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
                merged[-1][2] += 1
            else:
                merged.append([start, end, 1])
        closed += [(end, f"({key},{start},{end},{n})") for start, end, n in merged]
    return [line for _, line in sorted(closed)]


def tumbling(size: int) -> Callable[[int], list[tuple[int, int]]]:
    return lambda ts: [(ts - ts % size, ts - ts % size + size)]


def sliding(size: int, slide: int) -> Callable[[int], list[tuple[int, int]]]:
    def windows_of(ts: int) -> list[tuple[int, int]]:
        latest_start = ts - ts % slide
        return [(start, start + size) for start in range(latest_start, ts - size, -slide)]

    return windows_of


WINDOW_EVENTS = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 5), ("hi", 8), ("hi", 9), ("hi", 15)]
SESSION_EVENTS = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 8), ("hi", 9), ("hi", 15)]


# -- parallelism 1: the order is defined, lines compare exactly ---------------------------------


def test_basic_operations(monkeypatch, capsys, tmp_path, mode):
    """Three execute() calls on one environment; each prints its own sink's lines only."""
    out, _ = run_job("basic_operations", monkeypatch, capsys, tmp_path, mode=mode)
    assert out == recorded("basic_operations")
    assert len(out) == 4 + 1 + 4


@pytest.mark.parametrize(
    "job,by_hand",
    [
        ("tumbling_time_window", fixed_windows(WINDOW_EVENTS, tumbling(5))),
        ("sliding_time_window", fixed_windows(WINDOW_EVENTS, sliding(5, 2))),
        ("session_with_gap_window", sessions(SESSION_EVENTS, lambda ts: 5)),
        ("session_with_dynamic_gap_window", sessions(SESSION_EVENTS, lambda ts: ts)),
    ],
)
def test_event_time_windows(job, by_hand, monkeypatch, capsys, tmp_path, mode):
    out, _ = run_job(job, monkeypatch, capsys, tmp_path, mode=mode)
    assert out == recorded(job)
    assert out == [RESULTS_TO_STDOUT] + by_hand
    # PyFlink's result is not taken on trust for merging windows: the recording is checked
    # against the hand computation too, apart from sparkpoint.
    assert recorded(job)[1:] == by_hand


def test_tumbling_count_window(monkeypatch, capsys, tmp_path, mode):
    out, _ = run_job("tumbling_count_window", monkeypatch, capsys, tmp_path, mode=mode)
    assert out == recorded("tumbling_count_window")
    # By hand: a key's window fires on its every second element; hi's third (5) never fires.
    numbers = [(1, "hi"), (2, "hello"), (3, "hi"), (4, "hello"), (5, "hi"), (6, "hello"), (6, "hello")]
    open_windows: dict[str, list[int]] = defaultdict(list)
    fired = []
    for number, key in numbers:
        open_windows[key].append(number)
        if len(open_windows[key]) == 2:
            fired.append(f"({key},{sum(open_windows.pop(key))})")
    assert out == [RESULTS_TO_STDOUT] + fired


def test_word_count_in_batch_mode(monkeypatch, capsys, tmp_path, mode):
    """BATCH mode: the keyed reduce prints each word's final count, once."""
    out, job_globals = run_job("word_count", monkeypatch, capsys, tmp_path, mode=mode)
    want = recorded("word_count")

    def is_count(line: str) -> bool:
        return line.startswith("(")

    assert [line for line in out if not is_count(line)] == [line for line in want if not is_count(line)]
    # The same count lines; PyFlink's BATCH order (by the pickled key's bytes) is not reproduced.
    counts = Counter(line for line in out if is_count(line))
    assert counts == Counter(line for line in want if is_count(line))
    words = Counter(word for line in job_globals["TEXT"] for word in line.split())
    assert counts == Counter(f"({word},{n})" for word, n in words.items())


# -- parallelism 2: each key's order is defined, and its subtask (PyFlink's key groups) -------------


def lines_per_key(lines: list[str]) -> dict[str, tuple[set, list[str]]]:
    """key -> (subtasks that printed it, its lines in order), for lines ``N> ('key', value)``."""
    per_key: dict[str, tuple[set, list[str]]] = {}
    for line in lines:
        subtask, body = subtask_and_body(line)
        key = body.split(",")[0].strip("('")
        subtasks, bodies = per_key.setdefault(key, (set(), []))
        subtasks.add(subtask)
        bodies.append(body)
    return per_key


def assert_same_lines_per_key(out: list[str], want: list[str]) -> None:
    assert all(subtask_and_body(line)[0] is not None for line in out + want), "parallelism 2 prints N> prefixes"
    got, expected = lines_per_key(out), lines_per_key(want)
    assert {key: bodies for key, (_, bodies) in got.items()} == {key: bodies for key, (_, bodies) in expected.items()}
    assert all(len(subtasks) == 1 for subtasks, _ in got.values()), "a key lives on one subtask"
    assert {key: subtasks for key, (subtasks, _) in got.items()} == {
        key: subtasks for key, (subtasks, _) in expected.items()
    }, "each key lives on the subtask PyFlink puts it on"


def test_keys_land_where_pyflink_puts_them(monkeypatch, capsys, tmp_path, mode):
    """Keys of every type PyFlink hashes as pickles (str, int, float, tuples, None, bytes), and declared as
    Types.STRING/INT/LONG/DOUBLE/BOOLEAN/TUPLE/ROW/ROW_NAMED, at parallelism 4 and 7, are on PyFlink's subtask;
    so are the N> prefixes of print() behind a keyed map."""
    out, _ = run_job("key_placement", monkeypatch, capsys, tmp_path, mode=mode)
    want = recorded("key_placement")
    printed = [line for line in want if subtask_and_body(line)[0] is not None]
    assert len(printed) == 49 and len(want) == 571  # the recording is whole
    assert sorted(line for line in out if subtask_and_body(line)[0] is not None) == sorted(printed)
    assert [line for line in out if subtask_and_body(line)[0] is None] == [
        line for line in want if subtask_and_body(line)[0] is None
    ]


def test_state_access(monkeypatch, capsys, tmp_path, mode):
    out, _ = run_job("state_access", monkeypatch, capsys, tmp_path, mode=mode)
    assert_same_lines_per_key(out, recorded("state_access"))
    # By hand: running sums, in double precision, of the single-precision amounts (only the
    # source's Types.FLOAT() rounds; the state keeps the Python float).
    payments = [
        ("Alice", 110.1),
        ("Bob", 30.2),
        ("Alice", 20.0),
        ("Bob", 53.1),
        ("Alice", 13.1),
        ("Bob", 3.1),
        ("Bob", 16.1),
        ("Alice", 20.1),
    ]
    totals: dict[str, float] = defaultdict(float)
    by_hand: dict[str, list[str]] = defaultdict(list)
    for name, amount in payments:
        totals[name] += as_float32(amount)
        by_hand[name].append(str((name, totals[name])))
    assert {key: bodies for key, (_, bodies) in lines_per_key(out).items()} == by_hand


def test_event_time_timer(monkeypatch, capsys, tmp_path, mode):
    out, _ = run_job("event_time_timer", monkeypatch, capsys, tmp_path, mode=mode)
    assert_same_lines_per_key(out, recorded("event_time_timer"))
    # By hand: the bounded input is read before the watermark moves, so each key's timers (one
    # per distinct ts + 2000) all fire at end of input and print its final total.
    payments = [
        (1000, "Alice", 110.1),
        (4000, "Bob", 30.2),
        (3000, "Alice", 20.0),
        (2000, "Bob", 53.1),
        (5000, "Alice", 13.1),
        (3000, "Bob", 3.1),
        (7000, "Bob", 16.1),
        (10000, "Alice", 20.1),
    ]
    by_hand = {}
    for name in ("Alice", "Bob"):
        total = sum(as_float32(amount) for _, who, amount in payments if who == name)
        timers = {ts + 2000 for ts, who, _ in payments if who == name}
        by_hand[name] = [str((name, total))] * len(timers)
    assert {key: bodies for key, (_, bodies) in lines_per_key(out).items()} == by_hand


def test_process_json_data(monkeypatch, capsys, tmp_path, mode):
    out, _ = run_job("process_json_data", monkeypatch, capsys, tmp_path, mode=mode)
    # PyFlink printed both records from one subtask, in input order.
    assert [subtask_and_body(line)[1] for line in out] == [
        subtask_and_body(line)[1] for line in recorded("process_json_data")
    ]


def test_process_json_data_runs_at_default_parallelism(monkeypatch, capsys, tmp_path, mode):
    out, _ = run_job("process_json_data", monkeypatch, capsys, tmp_path, mode=mode)
    subtasks = {subtask_and_body(line)[0] for line in out}
    # As in Flink: map, filter and print run at parallelism 2 behind a rebalance, so lines carry
    # "N> "; records 2 and 4 take the same round-robin channel.
    assert len(subtasks) == 1 and None not in subtasks, out


# -- on Spark ------------------------------------------------------------------------------------


@pytest.mark.spark
def test_word_count_on_spark(spark, monkeypatch, capsys, tmp_path, mode):
    configuration = {
        "parallelism.default": RECORDED_PARALLELISM,
        "sparkpoint.local-state-dir": str(tmp_path / "local-state"),
    }
    out, _ = run_job("word_count", monkeypatch, capsys, tmp_path, configuration=configuration, mode=mode)
    assert Counter(out) == Counter(recorded("word_count"))
