"""sparkpoint's settings given as Spark confs and a config file: how keys map and which wins; a session
that speculates is refused."""

from __future__ import annotations

import pytest

from sparkpoint.common import Configuration, Encoder
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.spark.session import session_defaults
from sparkpoint.runtime.spark.spark_conf import (
    CONF_FILE_KEY,
    check_spark_conf,
    resolve_conf_file,
    settings_from_spark_conf,
)


def test_prefixed_confs_set_their_keys_and_other_confs_are_not_sparkpoints():
    settings = settings_from_spark_conf(
        {
            "spark.sparkpoint.execution.checkpointing.interval": "10s",
            "spark.sparkpoint.execution.savepoint.path": "file:///ck/job/chk-7/_metadata",
            "spark.sparkpoint.sparkpoint.local-state-dir": "/data/state",
            "spark.sql.shuffle.partitions": "3",
            "spark.master": "local[2]",
            "spark.sparkpoint.": "nothing after the prefix",
        }
    )
    assert settings == {
        "execution.checkpointing.interval": "10s",
        "execution.savepoint.path": "file:///ck/job/chk-7/_metadata",
        "sparkpoint.local-state-dir": "/data/state",
    }
    assert Configuration(settings).get_duration_ms("execution.checkpointing.interval") == 10_000


def test_a_conf_file_gives_keys_and_single_confs_win_over_it(tmp_path):
    conf_file = tmp_path / "config.yaml"
    conf_file.write_text(
        "execution:\n  checkpointing:\n    interval: 5 s\nparallelism.default: 1\n"
        "state.checkpoints.dir: file:///from/file\n"
    )
    settings = settings_from_spark_conf(
        {CONF_FILE_KEY: str(conf_file), "spark.sparkpoint.state.checkpoints.dir": "file:///from/conf"}
    )
    assert settings == {
        "execution.checkpointing.interval": "5 s",
        "parallelism.default": 1,
        "state.checkpoints.dir": "file:///from/conf",
    }


def test_a_shipped_conf_file_is_found_by_its_name_in_the_spark_files_directory(tmp_path, monkeypatch):
    shipped = tmp_path / "userFiles"
    shipped.mkdir()
    (shipped / "flink-conf.yaml").write_text("parallelism.default: 3\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert resolve_conf_file("flink-conf.yaml", str(shipped)) == str(shipped / "flink-conf.yaml")
    assert settings_from_spark_conf({CONF_FILE_KEY: "flink-conf.yaml"}, str(shipped)) == {"parallelism.default": 3}
    # a path on the driver (the working directory of a YARN container holds --files) comes first
    (elsewhere / "flink-conf.yaml").write_text("parallelism.default: 4\n")
    assert settings_from_spark_conf({CONF_FILE_KEY: "flink-conf.yaml"}, str(shipped)) == {"parallelism.default": 4}


def test_a_missing_conf_file_names_where_it_was_looked_for(tmp_path):
    with pytest.raises(ConfigurationError, match=r"spark\.sparkpoint\.conf-file=nope\.yaml: no such file.*--files"):
        settings_from_spark_conf({CONF_FILE_KEY: "nope.yaml"}, str(tmp_path))


def test_a_conf_file_that_is_not_a_mapping_is_refused(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigurationError, match="must hold a mapping"):
        settings_from_spark_conf({CONF_FILE_KEY: str(bad)})


def test_session_defaults_leave_logging_to_spark_submit():
    started_here = session_defaults(Configuration({"pipeline.name": "counts"}), submitted=False)
    submitted = session_defaults(Configuration(), submitted=True)
    assert started_here["spark.app.name"] == "counts" and started_here["spark.log.level"] == "WARN"
    assert "spark.log.level" not in submitted and submitted["spark.master"] == "local[*]"


@pytest.mark.parametrize("value", ["true", "TRUE", " True "])
def test_a_session_with_speculation_is_refused_naming_the_conf(value):
    """A speculative copy of a slow task would write the task's keyed state and its sinks' staged output a second
    time; each task of an epoch runs once, as a Flink streaming job's do."""
    with pytest.raises(ConfigurationError, match=r"spark\.speculation=true.*second copy"):
        check_spark_conf({"spark.speculation": value, "spark.master": "local[2]"})


@pytest.mark.parametrize("conf", [{}, {"spark.speculation": "false"}, {"spark.master": "local[2]"}])
def test_a_session_without_speculation_is_accepted(conf):
    assert check_spark_conf(conf) is None


@pytest.mark.spark
def test_a_job_on_a_session_with_speculation_is_refused_before_it_runs(spark, spark_env, tmp_path):
    """The check runs where a job meets its session: the shared session's conf says speculation (the
    scheduler read it at start, so nothing speculates; the check reads the conf), and the job fails
    before any output is written."""
    conf = spark.sparkContext._conf  # the running context's own SparkConf, not getConf()'s copy
    conf.set("spark.speculation", "true")
    try:
        out = tmp_path / "out"
        spark_env.from_collection(["a", "b"]).map(lambda v: v.upper()).sink_to(
            FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
        )
        with pytest.raises(ConfigurationError, match=r"spark\.speculation=true"):
            spark_env.execute("speculating")
        assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))
    finally:
        conf.set("spark.speculation", "false")
    assert dict(spark.sparkContext.getConf().getAll())["spark.speculation"] == "false"


@pytest.mark.spark
def test_spark_settings_a_running_session_cannot_take_are_named(spark, caplog):
    """A job's own Spark settings (``-D spark.executor.memory=8g``, a master) when its code made a session before:
    the session is used as it is, and a warning names each setting that does not apply (it was silent)."""
    from sparkpoint.runtime.spark.session import get_or_create_session

    config = Configuration()
    config.set("spark.executor.memory", "8g")
    config.set("spark.app.name", spark.sparkContext.getConf().get("spark.app.name"))  # the same: no word
    assert get_or_create_session(config) is spark
    assert "spark.executor.memory=8g (the running session: unset)" in caplog.text
    assert "spark.app.name" not in caplog.text


@pytest.mark.spark
def test_a_job_on_a_session_passed_in_leaves_no_job_group_on_the_callers_thread(spark, make_env):
    """The epochs' Spark jobs go to the job's groups (cancelled together); afterwards the caller's thread is back
    in its own group, so the user's next job on that session is not filed under the job's last epoch."""
    sc = spark.sparkContext
    sc.setJobGroup("mine", "the user's own", interruptOnCancel=False)
    try:
        env = make_env("spark", **{"execution.epoch.max-records": 5})
        env.set_parallelism(2)
        env.from_collection(list(range(20))).map(lambda v: v * 2).print()
        assert env.execute("grouped").epochs > 1
        assert sc.getLocalProperty("spark.jobGroup.id") == "mine"
        assert sc.getLocalProperty("spark.job.description") == "the user's own"
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
        sc.setLocalProperty("spark.job.interruptOnCancel", None)
