"""A job that fails loses nothing it had already accepted: committed output stays, intact."""

from __future__ import annotations

import pytest

from sparkpoint.common import Encoder, WatermarkStrategy
from sparkpoint.datastream.connectors.file_system import BucketAssigner, FileSink
from sparkpoint.datastream.connectors.generator import NumberSequenceSource
from sparkpoint.errors import UserFunctionError
from sparkpoint.testing.kill_loop import read_committed_lines


def fail_at(bad: int):
    def f(v: int) -> str:
        if v == bad:
            raise ValueError(f"cannot handle {v}")
        return str(v)

    return f


def test_failure_keeps_what_earlier_epochs_committed(make_env, tmp_path):
    out = tmp_path / "out"
    env = make_env("local", **{"execution.epoch.max-records": 100})
    env.set_parallelism(1)
    src = NumberSequenceSource(0, 9_999)
    (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "numbers")
        .uid("numbers")
        .map(fail_at(750))
        .uid("fragile")
        .sink_to(
            FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .build()
        )
        .uid("sink")
    )
    with pytest.raises(UserFunctionError, match=r"uid 'fragile'.*record 750.*ValueError: cannot handle 750"):
        env.execute()
    # epochs 0-6 (records 0-699) were accepted and committed; the failing epoch left nothing visible
    assert sorted(map(int, read_committed_lines(out))) == list(range(700))
