"""``window_triggers`` against PyFlink 2.3.0's recorded output: ``ContinuousEventTimeTrigger`` on tumbling and
merging (session) windows, ``window(CountSlidingWindowAssigner.of(3, 2))`` and the assigners' default triggers.

The job runs at parallelism 1, so its lines are compared exactly, but for one deliberate difference (README,
difference 9). The continuous firings are also checked against a hand computation.
"""

from __future__ import annotations

import pytest
from test_parity import TARGETS, recorded, run_job, target_configuration

# The one deliberate difference: sparkpoint purges a count window (tumbling or sliding) once it fired (it never
# gets another element); PyFlink's default trigger keeps its contents in state forever.
PYFLINK_COUNT_DEFAULT = "default trigger CountTrigger"
OURS_COUNT_DEFAULT = "default trigger PurgingTrigger"


def continuous_by_hand(events, windows_of, interval=3):
    """Every window fires twice at the end of input, each time with all its elements: once at its first
    interval boundary after its first element, then at its end. The next boundary is scheduled while the final
    watermark is being processed, so (as in PyFlink) it never fires. A window whose first boundary is its
    end fires once."""
    windows: dict = {}
    for key, ts, value in events:
        windows.setdefault(key, {})
        for window in windows_of(key, ts):
            windows[key].setdefault(window, []).append((ts, value))
    firings = []
    for key, by_window in windows.items():
        for (start, end), members in by_window.items():
            first = min(ts for ts, _ in members)
            boundary = min(first - first % interval + interval, end - 1)
            line = f"({key},{start},{end},{len(members)},{sum(v for _, v in members)})"
            firings += [(boundary, line)] + ([(end - 1, line)] if boundary != end - 1 else [])
    return sorted(line for _, line in firings)


def sessions(events, gap):
    """Event-time sessions per key: ``[ts, ts + gap)`` windows merged when they overlap or touch."""
    merged: dict = {}
    for key, ts, _ in events:
        spans = merged.setdefault(key, [])
        new = [ts, ts + gap]
        for span in [s for s in spans if s[0] <= new[1] and new[0] <= s[1]]:
            spans.remove(span)
            new = [min(new[0], span[0]), max(new[1], span[1])]
        spans.append(new)
    return lambda key, ts: [tuple(s) for s in merged[key] if s[0] <= ts < s[1]]


@pytest.mark.parametrize("target", TARGETS)
def test_window_triggers(request, monkeypatch, capsys, tmp_path, target, mode):
    configuration = target_configuration(request, target, tmp_path)
    lines, job = run_job("window_triggers", monkeypatch, capsys, tmp_path, configuration, mode=mode)
    expected = recorded("window_triggers")
    assert expected.count(PYFLINK_COUNT_DEFAULT) == 2 and lines.count(OURS_COUNT_DEFAULT) == 2
    assert lines == [OURS_COUNT_DEFAULT if line == PYFLINK_COUNT_DEFAULT else line for line in expected]
    events = job["EVENTS"]
    for name, windows_of in (
        ("tumbling", lambda key, ts: [(ts - ts % 10, ts - ts % 10 + 10)]),
        ("session", sessions(events, 4)),
    ):
        printed = sorted(line.split("> ", 1)[1] for line in lines if line.startswith(name + ">"))
        assert printed == continuous_by_hand(events, windows_of)
