"""The ``state_backend`` fixture: every conformance test runs once per supported backend."""

from __future__ import annotations

import pytest
from backend_suite import SUPPORTED_BACKENDS

from sparkpoint.state.backend_loader import load_state_backend


@pytest.fixture(params=SUPPORTED_BACKENDS)
def state_backend(request):
    return load_state_backend(request.param)
