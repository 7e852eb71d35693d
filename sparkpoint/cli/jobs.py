"""``sparkpoint run`` and ``sparkpoint info``: a job script (``-py FILE``, or a module with ``-pym``) run as
``__main__``, as ``flink run`` does, or only planned.

``run`` applies ``--master``, ``-p``, ``-D key=value``, ``--config-file FILE`` (or ``config.yaml`` /
``flink-conf.yaml`` in ``$SPARKPOINT_CONF_DIR`` / ``$FLINK_CONF_DIR``), ``-s``, ``-n`` and
``--restoreMode`` to every environment the script creates; ``-d`` starts it in the background.
``info`` prints the plan the script would run, without running it.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from sparkpoint.cli.common import (
    Progress,
    conf_dir_file,
    ensure_sys_path,
    load_conf,
    parse_dynamic,
    report_failure,
    user_traceback,
)
from sparkpoint.cli.group import main
from sparkpoint.cli.preflight import preflight
from sparkpoint.common.config_keys import override, warn_unknown_keys
from sparkpoint.common.configuration import parse_boolean, parse_comma_list
from sparkpoint.errors import JobCancellationException, SparkpointError

__all__ = ["run", "info", "run_script", "capture_plan"]

_SUBMITTED = "Job has been submitted with JobID "
_FIRST_EPOCH = re.compile(r"^epoch \d+:", re.M)  # the progress line of a completed epoch or barrier


def run_script(job: str | None, module: str | None, args: tuple[str, ...]) -> None:
    """Run a job file or module as ``__main__`` with ``args`` as its ``sys.argv[1:]``."""
    old_argv = sys.argv
    try:
        if module:
            ensure_sys_path(Path.cwd())
            sys.argv = [module, *args]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            path = Path(job or "").resolve()
            ensure_sys_path(path.parent)
            sys.argv = [str(path), *args]
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = old_argv


class _Planned(Exception):
    pass


def capture_plan(job: str | None, module: str | None, args: tuple[str, ...], conf: dict) -> Any:
    """The job plan the script's first ``execute()`` would run (nothing runs)."""
    from sparkpoint.datastream.stream_execution_environment import set_cli_defaults

    plans: list = []

    def capture(plan: Any) -> None:
        plans.append(plan)
        raise _Planned()

    set_cli_defaults({"configuration": {"execution.target": "local", **conf}, "capture_plan": capture})
    try:
        run_script(job, module, args)
    except _Planned:
        pass
    finally:
        set_cli_defaults({})
    if not plans:
        raise click.ClickException(f"{module or job} never called execute(); there is no plan")
    return plans[0]


def _job_source(job: str | None, python: str | None, module: str | None) -> tuple[str | None, str | None]:
    given = [x for x in (job, python, module) if x]
    if len(given) != 1:
        raise click.UsageError("give the job as one of: JOB (a file), -py/--python FILE, -pym/--pyModule MODULE")
    path = python or job
    if path and not Path(path).is_file():
        raise click.BadParameter(f"{path} is not a file", param_hint="-py/--python")
    return path, module


def _configuration(dynamic: tuple[str, ...], conf_file: str | None, legacy_conf: str | None) -> dict[str, Any]:
    if legacy_conf is not None and "=" in legacy_conf:
        raise click.BadParameter(
            f"{legacy_conf!r}: --conf takes a config file here; give a key as "
            f"-D {legacy_conf} (or use --config-file FILE)",
            param_hint="--conf",
        )
    config: dict[str, Any] = {"rest.enabled": True}
    config.update(load_conf(conf_file or legacy_conf or conf_dir_file()))
    return override(config, parse_dynamic(dynamic))  # -D replaces a file's setting, whichever its spelling


def _importable(config: dict) -> None:
    """``python.files`` (-pyfs) on this process's ``sys.path`` before the job's script runs, as Flink's client puts
    them on its PYTHONPATH (the job ships them to its workers itself)."""
    from sparkpoint.runtime.executors import add_to_sys_path

    add_to_sys_path(parse_comma_list(config.get("python.files")))


def _python_options(*given: str | None) -> list[tuple[str, str | None]]:
    """Flink's -pyfs, -pyreq, -pyarch, -pyexec and -pyclientexec as their configuration keys."""
    keys = ("python.files", "python.requirements", "python.archives", "python.executable", "python.client.executable")
    return list(zip(keys, given))


def _job_options(f: Callable) -> Callable:
    for decorator in reversed(
        [
            click.option("--master", "-m", default=None, help="Spark master URL (default local[*])."),
            click.option("-D", "dynamic", multiple=True, metavar="KEY=VALUE", help="A configuration key (flink-conf)."),
            click.option(
                "--config-file",
                "conf_file",
                default=None,
                type=click.Path(exists=True, dir_okay=False),
                help="A YAML file of configuration keys (Flink's config.yaml / flink-conf.yaml); default: "
                "one in $SPARKPOINT_CONF_DIR or $FLINK_CONF_DIR.",
            ),
            click.option("--conf", "legacy_conf", default=None, hidden=True),
            click.option("-py", "--python", "python", default=None, help="The job's Python file."),
            click.option("-pym", "--pyModule", "module", default=None, help="The job's Python module (on sys.path)."),
            click.option(
                "-pyfs",
                "--pyFiles",
                "py_files",
                default=None,
                help="Comma-separated Python files, directories or archives the job imports, for the job and "
                "its workers (python.files).",
            ),
            click.option("-pyreq", "--pyRequirements", "py_requirements", default=None, hidden=True),
            click.option("-pyarch", "--pyArchives", "py_archives", default=None, hidden=True),
            click.option("-pyexec", "--pyExecutable", "py_executable", default=None, hidden=True),
            click.option("-pyclientexec", "--pyClientExecutable", "py_client_executable", default=None, hidden=True),
            click.option("-p", "--parallelism", type=int, default=None, help="Default parallelism of the job."),
        ]
    ):
        f = decorator(f)
    return f


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@_job_options
@click.option("-s", "--fromSavepoint", "restore_path", default=None, help="Restore from this checkpoint or savepoint.")
@click.option(
    "-n",
    "--allowNonRestoredState",
    "allow_non_restored",
    is_flag=True,
    help="Skip state that cannot be mapped to the job.",
)
@click.option(
    "-rm",
    "--restoreMode",
    "-cm",
    "--claimMode",
    "restore_mode",
    type=click.Choice(["claim", "no_claim", "legacy"], case_sensitive=False),
    default=None,
    help="CLAIM: the restored snapshot is deleted once the job has a checkpoint of its own; "
    "NO_CLAIM (default) and LEGACY: it is never deleted.",
)
@click.option(
    "--rollback",
    type=click.Choice(["move", "delete"]),
    default=None,
    help="With -s: output that sinks committed after the checkpoint is moved aside (file sinks: "
    "into .rolled-back/ of the output directory, or sparkpoint.restore.rollback-dir; insert-only "
    "exactly-once JDBC sinks: into <table>__rolled_back) or deleted.",
)
@click.option("-d", "--detached", is_flag=True, help="Start the job in the background; print its id and return.")
@click.option("--verbose", is_flag=True, help="On failure, the whole traceback (sparkpoint's frames too).")
@click.argument("job", required=False)
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED)
def run(
    master: str | None,
    dynamic: tuple[str, ...],
    conf_file: str | None,
    legacy_conf: str | None,
    python: str | None,
    module: str | None,
    parallelism: int | None,
    py_files: str | None,
    py_requirements: str | None,
    py_archives: str | None,
    py_executable: str | None,
    py_client_executable: str | None,
    restore_path: str | None,
    allow_non_restored: bool,
    restore_mode: str | None,
    rollback: str | None,
    detached: bool,
    verbose: bool,
    job: str | None,
    job_args: tuple[str, ...],
) -> None:
    """Run a job (JOB or -py FILE or -pym MODULE) as __main__ with JOB_ARGS, like `flink run`."""
    if (module or python) and job:  # with -py / -pym the first word after the options is the job's argument
        job_args, job = (job, *job_args), None
    path, module = _job_source(job, python, module)
    options = {
        key: value
        for key, value in (
            ("spark.master", master),
            ("parallelism.default", parallelism),
            ("execution.state-recovery.path", restore_path),
            ("sparkpoint.restore.rollback", rollback),
            ("execution.state-recovery.claim-mode", restore_mode and restore_mode.upper()),
            ("execution.state-recovery.ignore-unclaimed-state", allow_non_restored or None),
            *_python_options(py_files, py_requirements, py_archives, py_executable, py_client_executable),
        )
        if value
    }
    config = override(_configuration(dynamic, conf_file, legacy_conf), options)
    _importable(config)
    preflight(config, path, module)
    if detached:
        _detach(len(job_args), parse_boolean(config.get("rest.enabled", True)))
        return
    _run_attached(config, path, module, job_args, verbose)


def _run_attached(
    config: dict, path: str | None, module: str | None, job_args: tuple[str, ...], verbose: bool = False
) -> None:
    from sparkpoint.datastream.stream_execution_environment import set_cli_defaults

    progress = Progress(sys.stderr)

    def on_job_created(master_: Any) -> None:
        master_.add_listener(progress)
        click.echo(f"{_SUBMITTED}{master_.job_id}", err=False)
        sys.stdout.flush()

    set_cli_defaults({"configuration": config, "on_job_created": on_job_created})
    try:
        run_script(path, module, job_args)
    except JobCancellationException as e:  # Flink's client: the job was cancelled, the program failed
        progress.close()
        click.echo(f"\n{e}", err=True)
        sys.exit(1)
    except SparkpointError as e:
        progress.close()
        report_failure(e, verbose)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - the job script's own error: its frames, not the CLI's
        progress.close()
        click.echo(user_traceback(e, verbose), err=True)
        sys.exit(1)
    finally:
        set_cli_defaults({})
    progress.close()


def _undetached(arg: str) -> str | None:
    """A word of ``run``'s own options without ``-d``: short flags given together lose their ``d`` (``-nd``: ``-n``);
    None: nothing is left."""
    if arg in ("-d", "--detached"):
        return None
    if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2 and set(arg[1:]) <= {"n", "d"}:
        flags = arg.replace("d", "")
        return flags if flags != "-" else None
    return arg


def _detach(n_job_args: int, rest: bool) -> None:
    """Start this very command without -d in a new session, its output in a log file; wait for the job id, then
    until the job runs (its REST endpoint is up) or its process ended, which fails this command with the reason.
    The job's own arguments (the last ``n_job_args`` words) are passed on as they are, a ``-d`` among them too."""
    split = len(sys.argv) - n_job_args
    own = [_undetached(a) for a in sys.argv[1:split]]
    argv = [a for a in own if a is not None] + sys.argv[split:]
    log_dir = Path(os.environ.get("SPARKPOINT_HOME", Path.home() / ".sparkpoint")) / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = Path(tempfile.mkstemp(prefix=time.strftime("run-%Y%m%d-%H%M%S-"), suffix=".log", dir=log_dir)[1])
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sparkpoint.cli", *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.time() + 300
    while time.time() < deadline:
        text = log.read_text(errors="replace")
        if _SUBMITTED in text:
            job_id = text.split(_SUBMITTED, 1)[1].split()[0]
            click.echo(f"{_SUBMITTED}{job_id}")
            if _wait_until_running(job_id, proc, log, rest):
                click.echo(f"The job runs in the background (process {proc.pid}); its log: {log}")
            return
        if proc.poll() is not None:
            raise click.ClickException(
                f"the job ended before it was submitted (exit code {proc.returncode}); its log {log}:\n{text[-3000:]}"
            )
        time.sleep(0.1)
    raise click.ClickException(f"no job id after 300 s; the job may still start: see {log}")


def _wait_until_running(job_id: str, proc: subprocess.Popen, log: Path, rest: bool) -> bool:
    """Wait until the job runs -- its first epoch (or barrier) done, its REST endpoint up (printed) -- and True;
    or until its process ended: with success (False), or with a failure, which raises naming it."""
    from sparkpoint.rest.registry import JobRegistry

    endpoint = None
    started = time.time()
    while time.time() < started + 60:
        if proc.poll() is not None:
            if proc.returncode == 0:
                click.echo(f"The job has already finished; its log: {log}")
                return False
            lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            reason = ([line for line in lines if line.startswith("The job failed")] or lines or ["no output"])[-1]
            raise click.ClickException(
                f"the job failed right after it was submitted (exit code {proc.returncode}): {reason}; its log: {log}"
            )
        if rest and endpoint is None:
            entry = JobRegistry().find(job_id)
            if entry is not None:
                endpoint = f"{entry.get('scheme', 'http')}://{entry['address']}:{entry['port']}"
        if (endpoint is not None or not rest) and _FIRST_EPOCH.search(log.read_text(errors="replace")):
            break
        time.sleep(0.1)
    if endpoint is not None:
        click.echo(f"REST endpoint: {endpoint}")
    return True


def plan_json(plan: Any) -> dict:
    """Flink's execution plan (``flink info``): every operator with its uid, parallelism and inputs."""
    kinds = {"source": "Data Source", "sink": "Data Sink", "print": "Data Sink", "collect": "Data Sink"}
    nodes = []
    for nid, n in sorted(plan.nodes.items()):
        node: dict[str, Any] = {
            "id": nid,
            "type": n.kind,
            "pact": kinds.get(n.kind, "Operator"),
            "contents": n.name,
            "uid": n.effective_uid(),
            "parallelism": plan.stage(plan.stage_of[nid]).parallelism,
        }
        if n.inputs:
            node["predecessors"] = [
                {
                    "id": e.source,
                    "ship_strategy": str(e.partitioning).upper(),
                    "side": "second" if e.type_number == 2 else "first",
                }
                for e in n.inputs
            ]
        nodes.append(node)
    return {"nodes": nodes}


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@_job_options
@click.argument("job", required=False)
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED)
def info(
    master: str | None,
    dynamic: tuple[str, ...],
    conf_file: str | None,
    legacy_conf: str | None,
    python: str | None,
    module: str | None,
    parallelism: int | None,
    py_files: str | None,
    py_requirements: str | None,
    py_archives: str | None,
    py_executable: str | None,
    py_client_executable: str | None,
    job: str | None,
    job_args: tuple[str, ...],
) -> None:
    """Print the plan of a job (operators, uids, parallelism) without running it, like `flink info`."""
    if (module or python) and job:
        job_args, job = (job, *job_args), None
    path, module = _job_source(job, python, module)
    config = _configuration(dynamic, conf_file, legacy_conf)
    config.pop("rest.enabled", None)
    if parallelism:
        config["parallelism.default"] = parallelism
    dependencies = _python_options(py_files, py_requirements, py_archives, py_executable, py_client_executable)
    config.update((key, value) for key, value in dependencies if value)

    warn_unknown_keys(config)
    _importable(config)
    plan = capture_plan(path, module, job_args, config)
    click.echo("----------------------- Execution Plan -----------------------")
    click.echo(json.dumps(plan_json(plan), indent=2))
    click.echo("--------------------------------------------------------------")
