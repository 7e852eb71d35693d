"""The ``sparkpoint`` command, modelled on Flink's ``bin/flink``.

``sparkpoint run job.py [args]`` runs a job script as ``__main__`` with those args,
as ``flink run`` does, applying ``--master``, ``-D key=value`` and ``--conf FILE.yaml``
(flink-conf keys) to every environment the script creates. It prints the job id;
on a terminal it shows live progress, in a pipe one plain log line per epoch.
"""

from __future__ import annotations

import logging
import runpy
import sys
import time
from pathlib import Path
from typing import Any, Optional

import click

from sparkpoint.common.config_file import load_config_file
from sparkpoint.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from sparkpoint.errors import ConfigurationError, SparkpointError, UserFunctionError
from sparkpoint.runtime.job_listener import JobListener

__all__ = ["main"]

logger = logging.getLogger("sparkpoint")


def _parse_dynamic(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        if "=" not in item:
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint="-D")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _load_conf(path: Optional[str]) -> dict[str, Any]:
    if not path:
        return {}
    try:
        return load_config_file(path)
    except ConfigurationError as e:
        raise click.BadParameter(str(e), param_hint="--conf") from e


def _fmt_wm(wm: Optional[int]) -> str:
    if wm is None or wm <= MIN_WATERMARK:
        return "-"
    if wm >= MAX_WATERMARK:
        return "+inf (end of input)"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(wm / 1000)) + f".{wm % 1000:03d}Z"


class _Progress(JobListener):
    """Live progress on a terminal, plain lines in a pipe: a listener of the running job."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.tty = stream.isatty()
        self.started = time.time()
        self.busy_s = 0.0
        self.live: Any = None
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(file=stream), refresh_per_second=4, transient=False)
            self.live.start()

    def on_epoch_completed(self, stats: Any) -> None:
        self.busy_s += stats.duration_s
        rate = stats.total_records_in / max(self.busy_s, 1e-9)
        line = (f"epoch {stats.epoch}: {stats.records_in:,} records in, {stats.records_out:,} out "
                f"({stats.duration_s:.2f}s); total {stats.total_records_in:,} at {rate:,.0f} records/s; "
                f"watermark {_fmt_wm(stats.watermark)}")
        if self.live is not None:
            self.live.update(line)
        else:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def main(verbose: int) -> None:
    """sparkpoint: Flink's stateful stream processing on Apache Spark."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--master", "-m", default=None, help="Spark master URL (default local[*]).")
@click.option("-D", "dynamic", multiple=True, metavar="KEY=VALUE", help="A configuration key (flink-conf).")
@click.option("--conf", "conf_file", default=None, type=click.Path(exists=True, dir_okay=False),
              help="A YAML file of configuration keys (flink-conf.yaml).")
@click.option("-p", "--parallelism", type=int, default=None, help="Default parallelism of the job.")
@click.option("-s", "--fromSavepoint", "restore_path", default=None,
              help="Restore from this checkpoint or savepoint.")
@click.option("-n", "--allowNonRestoredState", "allow_non_restored", is_flag=True,
              help="Skip state that cannot be mapped to the job.")
@click.option("--rollback", type=click.Choice(["move", "delete"]), default=None,
              help="With -s: output that sinks committed after the checkpoint is moved aside (file sinks: "
                   "into .rolled-back/ of the output directory, or sparkpoint.restore.rollback-dir; insert-only "
                   "exactly-once JDBC sinks: into <table>__rolled_back) or deleted.")
@click.argument("job", type=click.Path(exists=True, dir_okay=False))
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED)
def run(master: Optional[str], dynamic: tuple[str, ...], conf_file: Optional[str], parallelism: Optional[int],
        restore_path: Optional[str], allow_non_restored: bool, rollback: Optional[str], job: str,
        job_args: tuple[str, ...]) -> None:
    """Run JOB (a Python file) as __main__ with JOB_ARGS, like `flink run`."""
    from sparkpoint.datastream.stream_execution_environment import set_cli_defaults

    config: dict[str, Any] = {"rest.enabled": True}
    config.update(_load_conf(conf_file))
    config.update(_parse_dynamic(dynamic))
    if master:
        config["spark.master"] = master
    if parallelism:
        config["parallelism.default"] = parallelism
    if restore_path:
        config["execution.savepoint.path"] = restore_path
    if allow_non_restored:
        config["execution.savepoint.ignore-unclaimed-state"] = True
    if rollback:
        config["sparkpoint.restore.rollback"] = rollback
    progress = _Progress(sys.stderr)

    def on_job_created(master_: Any) -> None:
        master_.add_listener(progress)
        click.echo(f"Job has been submitted with JobID {master_.job_id}", err=False)
        sys.stdout.flush()

    set_cli_defaults({"configuration": config, "on_job_created": on_job_created})
    job_path = Path(job).resolve()
    sys.path.insert(0, str(job_path.parent))
    old_argv = sys.argv
    sys.argv = [str(job_path), *job_args]
    try:
        runpy.run_path(str(job_path), run_name="__main__")
    except SparkpointError as e:
        progress.close()
        _report_failure(e)
        sys.exit(1)
    finally:
        sys.argv = old_argv
        set_cli_defaults({})
    progress.close()


def _report_failure(error: SparkpointError) -> None:
    """The job's failure: for a user function, its traceback (the function's frames) first, then one line."""
    user_error = error if isinstance(error, UserFunctionError) else error.__cause__
    if isinstance(user_error, UserFunctionError) and user_error.traceback_text():
        click.echo("\n" + user_error.traceback_text().rstrip(), err=True)
    click.echo(f"\nThe job failed: {error}", err=True)


def _client(job_id: str) -> tuple[Any, str, dict]:
    import httpx

    from sparkpoint.rest.registry import JobRegistry

    entry = JobRegistry().find(job_id)
    if entry is None:
        raise click.ClickException(f"no running job {job_id!r} on this machine (see `sparkpoint list`)")
    headers = {"Authorization": f"Bearer {entry['token']}"} if entry.get("token") else {}
    host = entry["address"] if ":" not in entry["address"] else f"[{entry['address']}]"
    scheme = entry.get("scheme", "http")
    verify: Any = True
    if entry.get("certificate"):   # a self-signed endpoint: trust its own certificate
        import ssl

        verify = ssl.create_default_context(cafile=entry["certificate"])
    return httpx.Client(base_url=f"{scheme}://{host}:{entry['port']}", headers=headers, timeout=10,
                        verify=verify), entry["job_id"], entry


@main.command(name="list")
def list_jobs() -> None:
    """Running jobs on this machine."""
    from sparkpoint.rest.registry import JobRegistry

    jobs = JobRegistry().jobs()
    if not jobs:
        click.echo("No running jobs.")
        return
    click.echo("------------------ Running/Restarting Jobs -------------------")
    for entry in jobs:
        try:
            client, jid, _ = _client(entry["job_id"])
            info = client.get(f"/jobs/{jid}").json()
            sources = {n["id"] for n in info["plan"]["nodes"] if n["operator"] == "source"}
            records_in = sum(v["metrics"]["write-records"] for v in info["vertices"] if v["id"] in sources)
            click.echo(f"{jid} : {info['name']} ({info['state']}) {records_in:,} records in, "
                       f"REST {entry.get('scheme', 'http')}://{entry['address']}:{entry['port']}")
        except Exception as e:  # noqa: BLE001 - a job may end while we ask
            click.echo(f"{entry['job_id']} : {entry['name']} (not answering: {e})")


@main.command()
@click.argument("job_id")
def cancel(job_id: str) -> None:
    """Cancel a running job (externalized checkpoints are kept or deleted as configured)."""
    client, jid, _ = _client(job_id)
    r = client.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    if r.status_code != 202:
        raise click.ClickException(f"cancelling {jid} failed: {r.status_code} {r.text}")
    click.echo(f"Cancelled job {jid}.")


def _await_savepoint(client: Any, jid: str, request_id: str, timeout: float) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = client.get(f"/jobs/{jid}/savepoints/{request_id}").json()
        if "errors" in status:
            raise click.ClickException("; ".join(status["errors"]))
        if status["status"]["id"] == "COMPLETED":
            op = status["operation"]
            if "failure-cause" in op:
                raise click.ClickException(op["failure-cause"]["stack-trace"])
            return op["location"]
        time.sleep(0.2)
    raise click.ClickException(f"no answer within {timeout:.0f} s; the savepoint may still complete")


@main.command()
@click.argument("job_id", required=False)
@click.argument("target_directory", required=False)
@click.option("-d", "--dispose", "dispose_path", default=None, help="Delete the savepoint at this path.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for the savepoint.")
def savepoint(job_id: Optional[str], target_directory: Optional[str], dispose_path: Optional[str],
              timeout: float) -> None:
    """Trigger a savepoint of JOB_ID (into TARGET_DIRECTORY or state.savepoints.dir), or dispose one."""
    if dispose_path:
        _dispose(dispose_path)
        return
    if not job_id:
        raise click.UsageError("give a JOB_ID, or --dispose PATH")
    client, jid, _ = _client(job_id)
    click.echo(f"Triggering savepoint for job {jid}.")
    r = client.post(f"/jobs/{jid}/savepoints", json={"target-directory": target_directory, "cancel-job": False})
    if r.status_code != 202:
        raise click.ClickException(f"triggering a savepoint of {jid} failed: {'; '.join(r.json()['errors'])}")
    path = _await_savepoint(client, jid, r.json()["request-id"], timeout)
    click.echo(f"Savepoint completed. Path: {path}")
    click.echo("You can resume your program from this savepoint with the run command.")


@main.command()
@click.argument("job_id")
@click.option("-p", "--savepoint-path", "savepoint_path", default=None, help="Where to write the savepoint.")
@click.option("-d", "--drain", is_flag=True, help="End event time first: every event-time timer fires.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for the savepoint.")
def stop(job_id: str, savepoint_path: Optional[str], drain: bool, timeout: float) -> None:
    """Stop JOB_ID with a final savepoint (sinks are committed first)."""
    client, jid, _ = _client(job_id)
    click.echo(f"Suspending job {jid}.")
    r = client.post(f"/jobs/{jid}/stop", json={"targetDirectory": savepoint_path, "drain": drain})
    if r.status_code != 202:
        raise click.ClickException(f"stopping {jid} failed: {'; '.join(r.json()['errors'])}")
    path = _await_savepoint(client, jid, r.json()["request-id"], timeout)
    click.echo(f"Savepoint completed. Path: {path}")


def _dispose(path: str) -> None:
    from sparkpoint.runtime.savepoints import dispose_savepoint

    try:
        location = dispose_savepoint(path)
    except SparkpointError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"Savepoint '{location}' disposed.")


def _ts(ms: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"


def _size(n: Any) -> str:
    n = float(n or 0)
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


@main.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the REST response as JSON.")
def checkpoints(job_id: str, as_json: bool) -> None:
    """Checkpoint counts and history of a running job."""
    import json as _json

    from rich.console import Console
    from rich.table import Table

    client, jid, _ = _client(job_id)
    data = client.get(f"/jobs/{jid}/checkpoints").json()
    if as_json:
        click.echo(_json.dumps(data, indent=2))
        return
    c = data["counts"]
    restored = data["latest"]["restored"]
    click.echo(f"Job {jid}: {c['completed']} completed, {c['failed']} failed, {c['in_progress']} in progress; "
               f"restored: {restored['external_path'] if restored else 'no'}")
    table = Table("id", "status", "trigger time", "duration", "size", "written", "acks", "failure reason")
    for h in data["history"]:
        table.add_row(str(h["id"]), h["status"], _ts(h["trigger_timestamp"]),
                      f"{h['end_to_end_duration']} ms" if h["end_to_end_duration"] >= 0 else "-",
                      _size(h["state_size"]), _size(h["checkpointed_size"]),
                      f"{h['num_acknowledged_subtasks']}/{h['num_subtasks']}", h.get("failure_message") or "")
    Console(width=160).print(table)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": True})
@click.argument("path")
@click.option("--against", "against", default=None, type=click.Path(exists=True, dir_okay=False),
              help="A job script: tell, without running it, whether and how PATH would restore into it.")
@click.option("-n", "--allowNonRestoredState", "allow_non_restored", is_flag=True,
              help="With --against: state without an operator may be skipped.")
@click.option("-D", "dynamic", multiple=True, metavar="KEY=VALUE",
              help="Configuration: s3.* keys of the store PATH is on, and the --against job's keys.")
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED)
def inspect(path: str, against: Optional[str], allow_non_restored: bool, dynamic: tuple[str, ...],
            job_args: tuple[str, ...]) -> None:
    """What a checkpoint or savepoint holds (it is verified file by file first)."""
    from sparkpoint.checkpoint.loader import load_checkpoint
    from sparkpoint.storage.file_systems import configure_file_systems

    configure_file_systems(_parse_dynamic(dynamic))
    try:
        restored = load_checkpoint(path)
    except SparkpointError as e:
        raise click.ClickException(str(e)) from None
    if against:
        _inspect_against(restored, against, job_args, _parse_dynamic(dynamic), allow_non_restored)
        return
    m = restored.metadata
    d = restored.driver_state
    click.echo(f"{m.kind} {m.checkpoint_id} of job {m.job_id} ({m.job_name}) at {restored.location}")
    click.echo(f"  taken at the end of epoch {m.barrier_epoch}, triggered {_ts(m.trigger_timestamp)}, "
               f"completed {_ts(m.completion_timestamp)}; max parallelism {m.max_parallelism}")
    click.echo(f"  {len(m.state_files())} state files, {_size(m.total_size())}, all checksums verified")
    click.echo("  operators:")
    from sparkpoint.state_processor.reader import keyed_state_summary

    summary = keyed_state_summary(restored)
    for uid, op in sorted(m.operators.items()):
        keyed = sum(f.handle.size for f in op.keyed_state)
        has_op_state = uid in d.get("operator_states", {})
        parts = [f"parallelism {op.parallelism}"]
        if op.keyed_state:
            ranges = len({(f.key_group_start, f.key_group_end) for f in op.keyed_state})
            parts.append(f"keyed state {_size(keyed)} in {ranges} key-group ranges")
        if has_op_state:
            parts.append("operator state")
        click.echo(f"    {uid} ({op.name}): {', '.join(parts)}")
        for name, (entries, keys) in sorted(summary.get(uid, {}).items()):
            click.echo(f"      {name}: {entries:,} entries, {keys:,} keys")
    for uid, src in d.get("sources", {}).items():
        splits = [s for ss in src["splits"].values() for s in ss]
        click.echo(f"  source {uid}: {len(splits)} open split(s): " +
                   ", ".join(f"{s.split_id}@{s.position}" for s in splits[:6]) + (" ..." if len(splits) > 6 else ""))
    for uid, c in d.get("committables", {}).items():
        click.echo(f"  sink {uid}: {len(c)} pre-committed file(s) to commit on restore")


class _Planned(Exception):
    pass


def _inspect_against(restored: Any, job: str, job_args: tuple[str, ...], conf: dict, allow_non_restored: bool) -> None:
    from sparkpoint.checkpoint.compatibility import check_compatibility
    from sparkpoint.datastream.stream_execution_environment import set_cli_defaults
    from sparkpoint.runtime.restore import job_operators

    plans: list = []

    def capture(plan: Any) -> None:
        plans.append(plan)
        raise _Planned()

    set_cli_defaults({"configuration": {"execution.target": "local", **conf}, "capture_plan": capture})
    job_path = Path(job).resolve()
    old_argv = sys.argv
    sys.argv = [str(job_path), *job_args]
    sys.path.insert(0, str(job_path.parent))
    try:
        runpy.run_path(str(job_path), run_name="__main__")
    except _Planned:
        pass
    finally:
        sys.argv = old_argv
        set_cli_defaults({})
    if not plans:
        raise click.ClickException(f"{job} never called execute(); nothing to compare with")
    plan = plans[0]
    report = check_compatibility(restored, job_operators(plan), plan.max_parallelism)
    m = restored.metadata
    click.echo(f"{m.kind} {m.checkpoint_id} ({restored.location}) against {job}:")
    for line in report.lines(allow_non_restored):
        click.echo(line)
    if not report.restorable(allow_non_restored):
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
