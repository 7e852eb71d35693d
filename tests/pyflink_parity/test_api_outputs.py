"""``api_outputs`` against PyFlink 2.3.0's recorded output: module paths, print prefixes, inherited types,
sliding count windows, keyed collect, projection, custom partitioning, mutable rows, the file sink's encoder.

The job runs at parallelism 1, so its lines are compared exactly; the sliding count windows are also
checked against a hand computation of PyFlink's definition.
"""

from __future__ import annotations

import pytest
from test_parity import TARGETS, recorded, run_job, target_configuration


@pytest.mark.parametrize("target", TARGETS)
def test_api_outputs(request, monkeypatch, capsys, tmp_path, target, mode):
    configuration = target_configuration(request, target, tmp_path)
    lines, _ = run_job("api_outputs", monkeypatch, capsys, tmp_path, configuration, mode=mode)
    assert lines == recorded("api_outputs")
    # count_window(3, 2) over 1..7: windows start at every 2nd element and fire when 3 are in
    values = list(range(1, 8))
    by_hand = [f"slide> (k,{sum(values[s : s + 3])})" for s in range(0, len(values) - 2, 2)]
    assert [line for line in lines if line.startswith("slide>")] == by_hand
