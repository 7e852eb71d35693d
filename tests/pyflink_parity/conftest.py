"""The parity jobs run in both execution modes: every test that runs a job takes the ``mode`` fixture."""

from __future__ import annotations

import pytest

#: ``sparkpoint.execution.mode``: epochs, and long-running tasks with barriers in band
EXECUTION_MODES = ["epoch", "continuous"]


@pytest.fixture(params=EXECUTION_MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """The execution mode a parity job runs in; its result must be the same in both."""
    return request.param
