"""Checkpoints in an S3 bucket from tasks on Spark executors.

Spark's Python workers are processes of their own, started by the JVM: they never saw the
driver's configuration. They reach the bucket with the options the driver sends along with
each checkpoint location (uploads of incremental RocksDB checkpoints, the download of the
databases on restore) and with the state changelog they write every epoch.
"""

from __future__ import annotations

import pytest

from tests.checkpoint.test_checkpointing import counting_job, oracle_totals
from tests.storage.test_s3_checkpoints import ROCKSDB, _run_until_checkpoint_id

pytestmark = [pytest.mark.s3, pytest.mark.spark]


def test_executors_upload_and_restore_incremental_checkpoints_in_a_bucket(
    spark, make_env, s3_server, bucket, s3_conf, s3
):
    count = 12_000
    uri = f"s3://{bucket}/checkpoints"
    env = make_env(
        "spark", **{"execution.epoch.max-records": 500, "state.changelog.enabled": "true", **ROCKSDB, **s3_conf}
    )
    stream = counting_job(env, count, uri, rate=1_000)
    s3_server.start_recording()
    job_id, retained = _run_until_checkpoint_id(env, stream, uri, s3_conf, 3, timeout=120)
    s3_server.stop_recording()
    assert retained, "no checkpoint completed"
    assert s3.glob(f"{bucket}/checkpoints/{job_id}/shared/*.sst"), "the executors uploaded no SST file"
    assert any(
        r.method == "PUT" and r.path.startswith(f"/{bucket}/checkpoints/{job_id}/changelog/")
        for r in s3_server.requests()
    ), "the executors wrote no state changelog into the bucket"
    env2 = make_env(
        "spark",
        **{"execution.epoch.max-records": 4_000, "execution.savepoint.path": retained[-1], **ROCKSDB, **s3_conf},
    )
    restored = counting_job(env2, count, "memory://restored-on-spark", retention="DELETE_ON_CANCELLATION")
    last: dict = {}
    for key, n in restored.execute_and_collect():
        last[key] = max(last.get(key, 0), n)
    assert last == dict(oracle_totals(count))
