"""Where working state of rocksdb operators lives on an executor, and what a new attempt removes."""

from __future__ import annotations

import os

from sparkpoint.runtime.working_state import drop_older_attempts, working_dir


def test_databases_live_in_sparks_local_dirs_unless_a_local_dir_is_configured(tmp_path, monkeypatch):
    spark_dir = tmp_path / "blockmgr"
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{spark_dir},{tmp_path / 'second'}")
    path = working_dir(str(tmp_path / "driver-default"), True, "job-0", 1, 3, "counts")
    assert path.startswith(str(spark_dir / "sparkpoint-state" / "job-0" / "stage-1" / "task-3" / "op-"))
    # an explicitly configured local directory wins; a remote URL cannot hold a database
    assert working_dir(f"file://{tmp_path}/mine", False, "job-0", 1, 3, "counts").startswith(f"{tmp_path}/mine/job-0")
    assert working_dir("s3://bucket/state", False, "job-0", 1, 3, "counts").startswith(str(spark_dir))
    monkeypatch.delenv("SPARK_LOCAL_DIRS")
    assert working_dir(str(tmp_path / "default"), True, "job-0", 1, 3, "a") != working_dir(
        str(tmp_path / "default"), True, "job-0", 1, 3, "b"
    )  # one database per operator


def test_a_new_attempt_removes_only_older_attempts_of_its_own_job(tmp_path):
    """Older only: a task of a failed attempt Spark has not ended yet must not delete the next attempt's state."""
    for name in ("job-0", "job-1", "job-2", "job-3", "job-12", "job-x", "job2-0", "other-0"):
        (tmp_path / name / "stage-1").mkdir(parents=True)
    drop_older_attempts(str(tmp_path), False, "job", "job-2")
    assert sorted(os.listdir(tmp_path)) == ["job-12", "job-2", "job-3", "job-x", "job2-0", "other-0"]
