"""Flink's command line: --version, info, run -py/-pym/-d/--restoreMode, list -r/-s/-a, checkpoint [--full],
control over -m HOST:PORT, and the config-file option, as a user types them (real `sparkpoint` processes)."""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli import sparkpoint
from tests.rest.job import wait_for

JOB_TEXT = """
import sys
from sparkpoint.common import Duration, WatermarkStrategy
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat

print("job arguments:", sys.argv[1:], flush=True)
env = StreamExecutionEnvironment.get_execution_environment()
source = (FileSource.for_record_stream_format(StreamFormat.text_line_format(), sys.argv[1])
          .monitor_continuously(Duration.of_millis(100)).build())
lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "lines").uid("lines").set_parallelism(1)
counts = lines.map(lambda s: (s, 1)).uid("pairs").set_parallelism(3).key_by(lambda p: p[0]).sum(1).uid("counts")
counts.set_parallelism(2).print()
env.execute("cli-job")
"""
DECLARED = {"lines": 1, "pairs": 3, "counts": 2}  # uid -> parallelism, as JOB_TEXT declares them


@pytest.fixture
def job_files(tmp_path, monkeypatch):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("x\ny\nx\n")
    (tmp_path / "jobpkg").mkdir()
    (tmp_path / "jobpkg" / "cli_job.py").write_text(JOB_TEXT)
    return tmp_path


def _ended(jid: str, env: dict) -> str | None:
    """The final state ``list -a`` shows for the ended job ``jid`` (from its archive), or None while it runs."""
    found = re.search(rf" : {jid} : \S+ \((\w+)\)", sparkpoint("list", "-a", env=env).stdout)
    return found.group(1) if found else None


def _env(tmp_path: Path, home: str = "home", **extra: str) -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("FLINK_CONF_DIR", "SPARKPOINT_CONF_DIR")}
    return dict(env, SPARKPOINT_HOME=str(tmp_path / home), **extra)


def test_version_is_the_packages():
    out = sparkpoint("--version")
    assert out.returncode == 0 and out.stdout.startswith(f"Version: {metadata.version('sparkpoint')}, Commit ID:")


def test_info_prints_the_plan_without_running_it(job_files):
    out = sparkpoint(
        "info", "-py", str(job_files / "jobpkg" / "cli_job.py"), str(job_files / "in"), env=_env(job_files)
    )
    assert out.returncode == 0, out.stderr
    assert "Job has been submitted" not in out.stdout  # nothing ran
    plan = json.loads(out.stdout.split("-" * 23 + " Execution Plan " + "-" * 23)[1].rsplit("-" * 62, 1)[0])
    by_uid = {n["uid"]: n for n in plan["nodes"]}
    assert {u: by_uid[u]["parallelism"] for u in DECLARED} == DECLARED
    assert [p["ship_strategy"] for p in by_uid["counts"]["predecessors"]] == ["HASH"]
    assert by_uid["lines"]["pact"] == "Data Source"
    by_module = sparkpoint(
        "info", "-pym", "cli_job", str(job_files / "in"), env=_env(job_files, PYTHONPATH=str(job_files / "jobpkg"))
    )
    assert by_module.returncode == 0, by_module.stderr
    assert json.loads(by_module.stdout.split("Execution Plan")[1].split("\n", 1)[1].rsplit("-" * 62, 1)[0]) == plan


def test_a_key_value_given_to_conf_is_refused_with_the_right_option(job_files):
    out = sparkpoint(
        "run",
        "--conf",
        "execution.checkpointing.interval=1s",
        "-py",
        str(job_files / "jobpkg" / "cli_job.py"),
        env=_env(job_files),
    )
    assert out.returncode != 0 and "-D execution.checkpointing.interval=1s" in out.stderr
    conf = job_files / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text("execution:\n  checkpointing:\n    intervall: 5 s\n")
    info = sparkpoint(
        "-v",
        "info",
        "-py",
        str(job_files / "jobpkg" / "cli_job.py"),
        str(job_files / "in"),
        env=_env(job_files, FLINK_CONF_DIR=str(conf)),
    )
    assert info.returncode == 0
    assert "did you mean 'execution.checkpointing.interval'" in info.stderr  # the file in $FLINK_CONF_DIR was read


def _detached(job_files: Path, *extra: str, env: dict, scheme: str = "http", job_args: tuple = ()) -> str:
    out = sparkpoint(
        "run",
        "-d",
        "-D",
        "execution.target=local",
        "-D",
        "execution.checkpointing.interval=1h",
        "-D",
        f"state.checkpoints.dir={(job_files / 'ck').as_uri()}",
        "-D",
        "execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
        "-D",
        "execution.epoch.idle-pause=20 ms",
        *extra,
        "-py",
        str(job_files / "jobpkg" / "cli_job.py"),
        str(job_files / "in"),
        *job_args,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"REST endpoint: {scheme}://127.0.0.1:" in out.stdout and "its log: " in out.stdout
    log = Path(re.search(r"its log: (\S+)", out.stdout).group(1))
    assert f"job arguments: {[str(job_files / 'in'), *job_args]}" in log.read_text()  # its own -d kept
    return re.search(r"JobID ([0-9a-f]{32})", out.stdout).group(1)


def _address(job_id: str, env: dict) -> str:
    import os

    from sparkpoint.rest.registry import JobRegistry

    old = os.environ.get("SPARKPOINT_HOME")
    os.environ["SPARKPOINT_HOME"] = env["SPARKPOINT_HOME"]
    try:
        entry = JobRegistry().find(job_id)
    finally:
        os.environ.pop("SPARKPOINT_HOME") if old is None else os.environ.__setitem__("SPARKPOINT_HOME", old)
    assert entry is not None
    return f"{entry['address']}:{entry['port']}"


def test_detached_run_list_checkpoint_and_control_from_another_host(job_files):
    env = _env(job_files)
    jid = _detached(job_files, env=env, job_args=("-d",))  # the command returned; the job runs on
    address = _address(jid, env)
    try:
        listed = sparkpoint("list", "-r", env=env)
        assert f"{jid} : cli-job (RUNNING)" in listed.stdout, listed.stdout + listed.stderr
        assert "No scheduled jobs." in sparkpoint("list", "-s", env=env).stdout
        full = sparkpoint("checkpoint", jid[:10], "--full", env=env)
        assert full.returncode == 0, full.stderr
        cid, path = re.search(r"Checkpoint\(FULL\) (\d+) for job \w+ completed\. Path: (\S+)", full.stdout).groups()
        assert Path(path.replace("file://", "")).joinpath("_metadata").is_file()
        # the same job from "another host": a registry that does not know it, the REST address given with -m
        elsewhere = _env(job_files, home="other-home")
        assert "No running jobs." in sparkpoint("list", env=elsewhere).stdout
        assert "no running job" in sparkpoint("checkpoints", jid, env=elsewhere).stderr
        history = json.loads(sparkpoint("checkpoints", jid[:6], "--json", "-m", address, env=elsewhere).stdout)
        assert int(cid) in {h["id"] for h in history["history"]}
        assert f"{jid} : cli-job (RUNNING)" in sparkpoint("list", "-m", address, env=elsewhere).stdout
        second = sparkpoint("checkpoint", jid, "-m", f"http://{address}", env=elsewhere)
        assert second.returncode == 0 and re.search(r"Checkpoint\(CONFIGURED\) \d+ ", second.stdout), second.stderr
    finally:
        cancelled = sparkpoint("cancel", jid, "-m", address, env=_env(job_files, home="other-home"))
    assert cancelled.returncode == 0 and f"Cancelled job {jid}" in cancelled.stdout
    ended = wait_for(lambda: _ended(jid, env), 60, "the job's end")  # archived: listed among the ended jobs
    assert ended == "CANCELED"


def _retained_checkpoint(job_files: Path, env: dict) -> Path:
    """A checkpoint of a cancelled job, retained: its chk-N directory."""
    jid = _detached(job_files, env=env)
    assert sparkpoint("checkpoint", jid, env=env).returncode == 0
    assert sparkpoint("cancel", jid, env=env).returncode == 0
    restored = wait_for(lambda: sorted((job_files / "ck" / jid).glob("chk-*/_metadata")), 60, "a retained checkpoint")
    wait_for(lambda: jid not in sparkpoint("list", env=env).stdout, 60, "the first job's end")
    return restored[-1].parent


def test_state_of_a_removed_operator_needs_allow_non_restored_state(job_files):
    env = _env(job_files)
    restored_dir = _retained_checkpoint(job_files, env)
    bounded = JOB_TEXT.replace(".monitor_continuously(Duration.of_millis(100))", "").replace(
        'uid("counts")', 'uid("renamed-counts")'
    )
    (job_files / "jobpkg" / "renamed.py").write_text(bounded)
    args = (
        "run",
        "-D",
        "execution.target=local",
        "-s",
        str(restored_dir),
        "-py",
        str(job_files / "jobpkg" / "renamed.py"),
        str(job_files / "in"),
    )
    refused = sparkpoint(*args, env=env)
    assert refused.returncode != 0 and "--allowNonRestoredState (-n)" in refused.stderr, refused.stdout + refused.stderr
    allowed = sparkpoint(*args[:1], "-n", *args[1:], env=env)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


@pytest.mark.parametrize("mode,kept", [("no_claim", True), ("claim", False), ("legacy", True)])
def test_restore_mode_decides_whether_the_restored_checkpoint_stays(job_files, mode, kept):
    env = _env(job_files)
    restored_dir = _retained_checkpoint(job_files, env)
    # the config file's settings, in their Flink 2.x spelling, are replaced by -D and -s in any spelling
    conf = job_files / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text(
        f"execution:\n  checkpointing:\n    dir: {(job_files / 'not-here').as_uri()}\n"
        f"  state-recovery:\n    path: {job_files / 'no-such-checkpoint'}\n"
    )
    second = _detached(
        job_files, "-s", str(restored_dir), "--restoreMode", mode, env=dict(env, FLINK_CONF_DIR=str(conf))
    )
    try:
        own = sparkpoint("checkpoint", second, env=env)  # the new job's first checkpoint of its own
        assert own.returncode == 0, own.stderr
        assert f"{(job_files / 'ck' / second).as_uri()}/chk-" in own.stdout  # -D state.checkpoints.dir won
        assert restored_dir.exists() == kept
        assert httpx.get(f"http://{_address(second, env)}/jobs/{second}/checkpoints").json()["latest"]["restored"]
    finally:
        sparkpoint("cancel", second, env=env)


def test_stop_over_tls_with_a_token_at_the_rest_address_from_the_configuration(job_files):
    from tests.rest.test_security import _self_signed

    cert, key = _self_signed(job_files)
    env = _env(job_files)
    jid = _detached(
        job_files,
        "-D",
        "rest.token=s3cret",
        "-D",
        "security.ssl.rest.enabled=true",
        "-D",
        f"security.ssl.rest.certificate={cert}",
        "-D",
        f"security.ssl.rest.private-key={key}",
        "-D",
        f"state.savepoints.dir={(job_files / 'sp').as_uri()}",
        env=env,
        scheme="https",
    )
    host, port = _address(jid, env).rsplit(":", 1)
    elsewhere = _env(job_files, home="other-home")  # a registry that does not know the job
    address = ("-D", f"rest.address={host}", "-D", f"rest.port={port}", "-D", "security.ssl.rest.enabled=true")
    try:
        refused = sparkpoint("list", *address, "--ca-cert", cert, env=elsewhere)
        assert refused.returncode != 0 and "401" in refused.stderr, refused.stdout + refused.stderr
        client_conf = job_files / "client.yaml"
        client_conf.write_text(f"rest:\n  token: s3cret\nsecurity:\n  ssl:\n    rest:\n      certificate: {cert}\n")
        listed = sparkpoint("list", *address, "--config-file", str(client_conf), env=elsewhere)
        assert f"{jid} : cli-job (RUNNING)" in listed.stdout and "https://" in listed.stdout, listed.stderr
        taken = sparkpoint(
            "savepoint",
            jid,
            str(job_files / "sp" / "taken"),
            *address,
            "--config-file",
            str(client_conf),
            env=elsewhere,
        )
        assert taken.returncode == 0, taken.stdout + taken.stderr
        taken_path = re.search(r"Savepoint completed\. Path: (\S+)", taken.stdout).group(1)
        assert str(job_files / "sp" / "taken") in taken_path
        assert Path(taken_path.replace("file://", "")).joinpath("_metadata").is_file()
        assert sparkpoint("savepoint", "-d", taken_path, env=elsewhere).returncode == 0  # Flink's -d: dispose
        assert not Path(taken_path.replace("file://", "")).exists()
        target = job_files / "sp" / "final"
        stopped = sparkpoint(
            "stop",
            jid[:8],
            *address,
            "--config-file",
            str(client_conf),
            "--savepointPath",
            str(target),
            "--drain",
            env=elsewhere,
        )
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        location = re.search(r"Savepoint completed\. Path: (\S+)", stopped.stdout).group(1)
        assert Path(location.replace("file://", "")).joinpath("_metadata").is_file()
        assert str(target) in location
    finally:
        sparkpoint("cancel", jid, env=env)
    assert wait_for(lambda: _ended(jid, env), 60, "the job's end") == "FINISHED"  # drained: it finished


@pytest.mark.parametrize("spelling", ["--claimMode", "-cm", "--restoreMode", "-rm"])
def test_flink_2s_claim_mode_is_an_option_of_run_not_the_jobs_argument(spelling):
    """Unknown, ``--claimMode CLAIM -s chk`` after ``-py job.py`` became the job's own arguments, ``-s`` with them:
    the job started with empty state."""
    from sparkpoint.cli import main

    run = main.commands["run"]
    ctx = run.make_context("run", ["-py", "job.py", spelling, "CLAIM", "-s", "/ck/chk-7"])
    assert (ctx.params["restore_mode"], ctx.params["restore_path"], ctx.params["job_args"]) == (
        "claim",
        "/ck/chk-7",
        (),
    )


def test_a_detached_run_starts_its_job_without_d_whatever_flags_it_came_with():
    from sparkpoint.cli.jobs import _undetached

    words = ["-nd", "-dn", "-n", "-d", "--detached", "-dd", "-s", "--drain"]
    assert [_undetached(a) for a in words] == ["-n", "-n", "-n", None, None, None, "-s", "--drain"]


def test_an_endpoint_that_does_not_answer_is_a_clear_error_not_a_traceback():
    from click.testing import CliRunner

    from sparkpoint.cli import main

    for args in (["list", "-m", "127.0.0.1:9"], ["checkpoints", "-m", "127.0.0.1:9", "0" * 32]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, (args, result.output)
        assert "does not answer" in result.output and "Traceback" not in result.output, (args, result.output)


PYFS_JOB = """
from helpers_pkg.shout import shout  # importable on the driver through -pyfs
from sparkpoint.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection(["a", "b"]).map(lambda s: shout(s)).print()
env.execute("pyfs")
"""


def test_pyfs_ships_a_directory_the_job_imports_and_the_other_python_options_parse(tmp_path):
    """Flink's ``-pyfs dir`` (the job and its functions import from it); ``-pyreq``/``-pyexec`` are taken as Flink's
    options and named as not applied (they became ``-p yfs``... : "'yfs' is not a valid integer")."""
    lib = tmp_path / "lib" / "helpers_pkg"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("")
    (lib / "shout.py").write_text("def shout(s):\n    return s.upper() + '!'\n")
    (tmp_path / "job.py").write_text(PYFS_JOB)
    r = sparkpoint(
        "run",
        "-D",
        "execution.target=local",
        "-pyfs",
        str(tmp_path / "lib"),
        "-pyreq",
        "reqs.txt",
        "-py",
        str(tmp_path / "job.py"),
        env=_env(tmp_path),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(line.split("> ")[-1] for line in r.stdout.splitlines() if line.endswith("!")) == ["A!", "B!"]
    assert "python.requirements is not applied" in r.stderr
