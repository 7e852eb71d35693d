"""The ``state_backend`` fixture: every conformance test runs once per supported backend."""

from __future__ import annotations

import pytest
from backend_suite import SUPPORTED_BACKENDS

from sparkpoint.state.backend_loader import load_state_backend


@pytest.fixture(params=SUPPORTED_BACKENDS)
def state_backend(request):
    """The backend named by the parameter; every keyed backend a test creates from it is disposed after the
    test (a rocksdb one without a working directory lives in a temporary directory until then)."""
    backend = load_state_backend(request.param)
    created = []
    create = backend.create_keyed_backend

    def create_and_track(*args, **kwargs):
        keyed = create(*args, **kwargs)
        created.append(keyed)
        return keyed

    backend.create_keyed_backend = create_and_track
    yield backend
    for keyed in created:
        keyed.dispose()
