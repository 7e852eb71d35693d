"""State schema evolution: added fields with defaults restore; incompatible changes fail by name."""

from __future__ import annotations

import importlib
import sys
import uuid

import pytest

from sparkpoint.errors import StateError
from sparkpoint.runtime.restore import load_checkpoint
from sparkpoint.state_processor import SavepointWriter
from sparkpoint.state_processor.reader import _operator_snapshot

V1 = """
from dataclasses import dataclass

@dataclass
class Profile:
    name: str
    visits: int
"""

V2 = (
    V1
    + """    country: str = "unknown"

    def greeting(self):
        return f"{self.name} from {self.country}"
"""
)

V3 = """
from dataclasses import dataclass

@dataclass
class Visitor:
    name: str
"""


def test_added_field_with_default_and_removed_class(tmp_path, monkeypatch):
    name = f"profiles_{uuid.uuid4().hex[:8]}"
    module_file = tmp_path / f"{name}.py"
    module_file.write_text(V1)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module(name)
    rows = [{"user": "ann", "p": mod.Profile("ann", 3)}, {"user": "bob", "p": mod.Profile("bob", 5)}]
    path = (
        SavepointWriter.new_savepoint()
        .with_keyed_state("profiles", "profile", rows, key="user", value=lambda r: r["p"])
        .write(str(tmp_path / "sp"))
    )

    module_file.write_text(V2)  # a new version of the class: one more field, with a default
    importlib.reload(mod)
    snap = _operator_snapshot(load_checkpoint(path), "profiles")
    values = {k: v for states in snap.entries.values() for (k, _), v in states["profile"].items()}
    assert isinstance(values["ann"], mod.Profile)
    assert (values["ann"].visits, values["ann"].country, values["bob"].greeting()) == (3, "unknown", "bob from unknown")

    module_file.write_text(V3)  # the class is gone: incompatible
    importlib.reload(mod)
    del mod.Profile
    with pytest.raises(StateError, match=r"operator 'profiles', state 'profile': a stored value cannot be decoded"):
        _operator_snapshot(load_checkpoint(path), "profiles")
    sys.modules.pop(name, None)
