"""Commands that control a running job over its REST endpoint: ``list``, ``cancel``, ``savepoint``, ``stop``,
``checkpoint``, ``checkpoints``.

A job on this machine is found in the local job registry (by id or id prefix). A job anywhere else is
reached with ``-m/--jobmanager HOST:PORT`` (or a URL, ``https://...``), or ``-D rest.address=HOST -D
rest.port=PORT`` (or those keys in ``--config-file FILE``), as Flink's client does, with
``--token`` (or ``$SPARKPOINT_REST_TOKEN``) when the endpoint requires one and ``--ca-cert`` (or
``$SPARKPOINT_REST_CA_CERT``) to trust its TLS certificate.
"""

from __future__ import annotations

import functools
import json as _json
import time
from collections.abc import Callable
from typing import Any

import click

from sparkpoint.cli.common import load_conf, parse_dynamic
from sparkpoint.cli.group import main
from sparkpoint.common.config_keys import override
from sparkpoint.errors import SparkpointError

__all__ = ["connect", "list_jobs", "cancel", "savepoint", "stop", "checkpoint", "checkpoints"]

RUNNING_STATES = ("RUNNING", "RESTARTING", "FAILING", "CANCELLING")
SCHEDULED_STATES = ("CREATED", "INITIALIZING", "RECONCILING", "SUSPENDED")


def _from_configuration(kwargs: dict) -> None:
    """``-m``, ``--token`` and ``--ca-cert`` not given: ``rest.address``/``rest.port``, ``rest.token`` and
    ``security.ssl.rest.certificate`` from ``-D`` and ``--config-file``, as Flink's client reads them."""
    config = override(load_conf(kwargs.pop("conf_file")), parse_dynamic(kwargs.pop("dynamic")))
    if kwargs["jobmanager"] is None and config.get("rest.address"):
        tls = str(config.get("security.ssl.rest.enabled", config.get("rest.ssl.enabled", ""))).lower() == "true"
        scheme = "https" if tls else "http"
        kwargs["jobmanager"] = f"{scheme}://{config['rest.address']}:{config.get('rest.port', 8081)}"
    if kwargs["token"] is None and config.get("rest.token"):
        kwargs["token"] = str(config["rest.token"])
    certificate = config.get("security.ssl.rest.certificate") or config.get("rest.ssl.certificate")
    if kwargs["ca_cert"] is None and certificate:
        kwargs["ca_cert"] = str(certificate)


def _remote(command: Callable) -> Callable:
    @functools.wraps(command)
    def f(**kwargs: Any) -> Any:
        _from_configuration(kwargs)
        return command(**kwargs)

    for decorator in reversed(
        [
            click.option(
                "-m",
                "--jobmanager",
                default=None,
                metavar="HOST:PORT",
                help="The REST address of the job (host:port or a URL); default: this machine's registry.",
            ),
            click.option("--token", default=None, envvar="SPARKPOINT_REST_TOKEN", help="The endpoint's bearer token."),
            click.option(
                "--ca-cert",
                "ca_cert",
                default=None,
                envvar="SPARKPOINT_REST_CA_CERT",
                type=click.Path(exists=True, dir_okay=False),
                help="Trust this PEM certificate (TLS).",
            ),
            click.option(
                "-D",
                "dynamic",
                multiple=True,
                metavar="KEY=VALUE",
                help="A key: rest.address and rest.port (the endpoint), rest.token, security.ssl.rest.*.",
            ),
            click.option(
                "--config-file",
                "conf_file",
                default=None,
                type=click.Path(exists=True, dir_okay=False),
                help="A config file with those keys.",
            ),
        ]
    ):
        f = decorator(f)
    return f


def _http(base_url: str, token: str | None, ca_cert: str | None) -> Any:
    import httpx

    verify: Any = True
    if ca_cert:  # a self-signed endpoint: trust its own certificate
        import ssl

        verify = ssl.create_default_context(cafile=ca_cert)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=base_url, headers=headers, timeout=10, verify=verify)


def connect(
    job_id: str | None, jobmanager: str | None = None, token: str | None = None, ca_cert: str | None = None
) -> tuple[Any, str]:
    """An HTTP client of the job's endpoint and the job's full id."""
    if jobmanager:
        client = _http(jobmanager if "://" in jobmanager else f"http://{jobmanager}", token, ca_cert)
        if job_id is None:
            return client, ""
        jobs = [j["jid"] for j in _overview(client)]
        matches = [j for j in jobs if j.startswith(job_id)]
        if len(matches) != 1:
            raise click.ClickException(f"no job {job_id!r} at {jobmanager} (it serves {', '.join(jobs) or 'none'})")
        return client, matches[0]
    from sparkpoint.rest.registry import JobRegistry

    entry = JobRegistry().find(job_id or "")
    if entry is None:
        raise click.ClickException(
            f"no running job {job_id!r} on this machine (see `sparkpoint list`, or give -m HOST:PORT)"
        )
    host = entry["address"] if ":" not in entry["address"] else f"[{entry['address']}]"
    client = _http(
        f"{entry.get('scheme', 'http')}://{host}:{entry['port']}",
        token or entry.get("owner_token") or entry.get("token"),  # the owner's: savepoint targets anywhere
        ca_cert or entry.get("certificate"),
    )
    return client, entry["job_id"]


def _overview(client: Any) -> list[dict]:
    import httpx

    try:
        r = client.get("/jobs/overview")
    except httpx.HTTPError as e:
        raise click.ClickException(f"{client.base_url} does not answer: {e}") from None
    if r.status_code != 200:
        raise click.ClickException(f"{client.base_url} answered {r.status_code}: {r.text[:300]}")
    return r.json()["jobs"]


def _errors(r: Any) -> str:
    try:
        return "; ".join(r.json()["errors"])
    except Exception:  # noqa: BLE001 - not Flink's error shape
        return f"{r.status_code} {r.text[:300]}"


def _archived_lines() -> list[str]:
    """Ended jobs of this machine's job store (their archives, kept for an hour as Flink's job store keeps
    them), newest first, as Flink's ``list -a`` shows them."""
    from sparkpoint.rest.archive import DEFAULT_EXPIRATION_S, ArchiveStore, local_archive_dir

    store = ArchiveStore([str(local_archive_dir())], DEFAULT_EXPIRATION_S)
    store.refresh()
    return [
        f"{time.strftime('%d.%m.%Y %H:%M:%S', time.localtime(job['end-time'] / 1000))} : {job['jid']} : "
        f"{job['name']} ({job['state']})"
        for job in store.jobs()
    ]


def _line(client: Any, job: dict) -> str:
    info = client.get(f"/jobs/{job['jid']}").json()
    sources = {n["id"] for n in info["plan"]["nodes"] if n["operator"] == "source"}
    records_in = sum(v["metrics"]["write-records"] for v in info["vertices"] if v["id"] in sources)
    return f"{job['jid']} : {job['name']} ({job['state']}) {records_in:,} records in, REST {client.base_url}"


@main.command(name="list")
@click.option("-r", "--running", is_flag=True, help="Running and restarting jobs.")
@click.option("-s", "--scheduled", is_flag=True, help="Scheduled jobs (not yet running).")
@click.option("-a", "--all", "all_jobs", is_flag=True, help="All jobs, ended ones of the last hour too.")
@_remote
def list_jobs(
    running: bool, scheduled: bool, all_jobs: bool, jobmanager: str | None, token: str | None, ca_cert: str | None
) -> None:
    """Jobs on this machine (or at -m HOST:PORT): by default running and scheduled ones, as Flink's `list`."""
    from sparkpoint.rest.registry import JobRegistry

    if not (running or scheduled or all_jobs):
        running = scheduled = True
    endpoints: list[tuple[Any, dict | None]] = []
    if jobmanager:
        endpoints.append((connect(None, jobmanager, token, ca_cert)[0], None))
    else:
        for registered in JobRegistry().jobs():
            try:
                endpoints.append((connect(registered["job_id"])[0], registered))
            except click.ClickException:
                continue
    sections: dict[str, list[str]] = {"Running/Restarting Jobs": [], "Scheduled Jobs": [], "Terminated Jobs": []}
    for client, entry in endpoints:
        try:
            for job in _overview(client):
                state = job["state"]
                section = (
                    "Running/Restarting Jobs"
                    if state in RUNNING_STATES
                    else "Scheduled Jobs"
                    if state in SCHEDULED_STATES
                    else "Terminated Jobs"
                )
                sections[section].append(_line(client, job))
        except Exception as e:  # noqa: BLE001 - a job may end while we ask
            if entry is None:  # the address given: its answer is the whole answer
                raise click.ClickException(f"{client.base_url}: {e}") from None
            click.echo(f"{entry['job_id']} : {entry['name']} (not answering: {e})")
    if all_jobs and not jobmanager:
        listed = {line.split(" : ", 1)[0] for lines in sections.values() for line in lines}
        sections["Terminated Jobs"] += [line for line in _archived_lines() if line.split(" : ")[1] not in listed]
    shown = {
        "Running/Restarting Jobs": running or all_jobs,
        "Scheduled Jobs": scheduled or all_jobs,
        "Terminated Jobs": all_jobs,
    }
    for title, lines in sections.items():
        if not shown[title]:
            continue
        if not lines:
            click.echo(f"No {title.split()[0].split('/')[0].lower()} jobs.")
            continue
        click.echo(f"------------------ {title} -------------------")
        for line in lines:
            click.echo(line)
        click.echo("--------------------------------------------------------------")


@main.command()
@click.argument("job_id")
@click.option("--timeout", default=30.0, show_default=True, help="Seconds to wait for the job to be CANCELED.")
@_remote
def cancel(job_id: str, timeout: float, jobmanager: str | None, token: str | None, ca_cert: str | None) -> None:
    """Cancel a running job and wait until it is CANCELED: its running epoch's tasks are interrupted
    (externalized checkpoints are kept or deleted as configured)."""
    client, jid = connect(job_id, jobmanager, token, ca_cert)
    r = client.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    if r.status_code != 202:
        raise click.ClickException(f"cancelling {jid} failed: {_errors(r)}")
    click.echo(f"Cancelling job {jid}.")
    state = _await_end(client, jid, timeout)
    if state != "CANCELED":
        raise click.ClickException(
            f"job {jid} was not cancelled: it ended {state}"
            if state in ("FINISHED", "FAILED")
            else f"job {jid} did not reach CANCELED within {timeout:.0f} s (it is {state}); "
            f"it may still end so (see `sparkpoint list -a`)"
        )
    click.echo(f"Cancelled job {jid}.")


def _await_end(client: Any, jid: str, timeout: float) -> str:
    """The job's state once it ended, or its state when ``timeout`` passed."""
    deadline = time.time() + timeout
    state = "unknown"
    while True:
        try:
            state = client.get(f"/jobs/{jid}").json()["state"]
        except Exception as e:  # noqa: BLE001 - the endpoint stopped without a client having read the end
            raise click.ClickException(
                f"job {jid}: its endpoint stopped answering before it said the job was "
                f"CANCELED (last seen {state}): {e}"
            ) from None
        if state in ("CANCELED", "FINISHED", "FAILED") or time.time() >= deadline:
            return state
        time.sleep(0.2)


def _await(client: Any, path: str, timeout: float) -> dict:
    """Poll an asynchronous operation (savepoint, stop, checkpoint) until it completes; its ``operation``."""
    import httpx

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            status = client.get(path).json()
        except httpx.HTTPError as e:  # the job ended meanwhile (its endpoint with it), or the network failed
            raise click.ClickException(
                f"the job's endpoint stopped answering before the operation completed (the job may have ended; "
                f"see `sparkpoint list -a`): {e}"
            ) from None
        if "errors" in status:
            raise click.ClickException("; ".join(status["errors"]))
        if status["status"]["id"] == "COMPLETED":
            op = status["operation"]
            cause = op.get("failure-cause") or op.get("failureCause")  # a savepoint's, a checkpoint's (Flink's names)
            if cause:
                raise click.ClickException(cause["stack-trace"])
            return op
        time.sleep(0.2)
    raise click.ClickException(f"no answer within {timeout:.0f} s; the operation may still complete")


@main.command()
@click.argument("job_id", required=False)
@click.argument("target_directory", required=False)
@click.option("-d", "--dispose", "dispose_path", default=None, help="Delete the savepoint at this path.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for the savepoint.")
@_remote
def savepoint(
    job_id: str | None,
    target_directory: str | None,
    dispose_path: str | None,
    timeout: float,
    jobmanager: str | None,
    token: str | None,
    ca_cert: str | None,
) -> None:
    """Trigger a savepoint of JOB_ID (into TARGET_DIRECTORY or state.savepoints.dir), or dispose one."""
    if dispose_path:
        _dispose(dispose_path)
        return
    if not job_id:
        raise click.UsageError("give a JOB_ID, or --dispose PATH")
    client, jid = connect(job_id, jobmanager, token, ca_cert)
    click.echo(f"Triggering savepoint for job {jid}.")
    r = client.post(f"/jobs/{jid}/savepoints", json={"target-directory": target_directory, "cancel-job": False})
    if r.status_code != 202:
        raise click.ClickException(f"triggering a savepoint of {jid} failed: {_errors(r)}")
    op = _await(client, f"/jobs/{jid}/savepoints/{r.json()['request-id']}", timeout)
    click.echo(f"Savepoint completed. Path: {op['location']}")
    click.echo("You can resume your program from this savepoint with the run command.")


@main.command()
@click.argument("job_id")
@click.option(
    "-p", "--savepointPath", "--savepoint-path", "savepoint_path", default=None, help="Where to write the savepoint."
)
@click.option("-d", "--drain", is_flag=True, help="End event time first: every event-time timer fires.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for the savepoint.")
@_remote
def stop(
    job_id: str,
    savepoint_path: str | None,
    drain: bool,
    timeout: float,
    jobmanager: str | None,
    token: str | None,
    ca_cert: str | None,
) -> None:
    """Stop JOB_ID with a final savepoint (sinks are committed first)."""
    client, jid = connect(job_id, jobmanager, token, ca_cert)
    click.echo(f"Suspending job {jid}.")
    r = client.post(f"/jobs/{jid}/stop", json={"targetDirectory": savepoint_path, "drain": drain})
    if r.status_code != 202:
        raise click.ClickException(f"stopping {jid} failed: {_errors(r)}")
    op = _await(client, f"/jobs/{jid}/savepoints/{r.json()['request-id']}", timeout)
    click.echo(f"Savepoint completed. Path: {op['location']}")


@main.command()
@click.argument("job_id")
@click.option("--full", is_flag=True, help="A full checkpoint, also when checkpoints are incremental.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for the checkpoint.")
@_remote
def checkpoint(
    job_id: str, full: bool, timeout: float, jobmanager: str | None, token: str | None, ca_cert: str | None
) -> None:
    """Trigger a checkpoint of JOB_ID now (as Flink's `checkpoint`); prints its id and path."""
    client, jid = connect(job_id, jobmanager, token, ca_cert)
    click.echo(f"Triggering checkpoint for job {jid}.")
    r = client.post(f"/jobs/{jid}/checkpoints", json={"checkpointType": "FULL" if full else "CONFIGURED"})
    if r.status_code != 202:
        raise click.ClickException(f"triggering a checkpoint of {jid} failed: {_errors(r)}")
    op = _await(client, f"/jobs/{jid}/checkpoints/{r.json()['request-id']}", timeout)
    cid = op["checkpointId"]
    path = client.get(f"/jobs/{jid}/checkpoints/details/{cid}").json().get("external_path")
    click.echo(f"Checkpoint({'FULL' if full else 'CONFIGURED'}) {cid} for job {jid} completed. Path: {path}")


def _dispose(path: str) -> None:
    from sparkpoint.runtime.savepoints import dispose_savepoint

    try:
        location = dispose_savepoint(path)
    except SparkpointError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"Savepoint '{location}' disposed.")


def ts(ms: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"


def size(n: Any) -> str:
    n = float(n or 0)
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


@main.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the REST response as JSON.")
@_remote
def checkpoints(job_id: str, as_json: bool, jobmanager: str | None, token: str | None, ca_cert: str | None) -> None:
    """Checkpoint counts and history of a running job."""
    from rich.console import Console
    from rich.table import Table

    client, jid = connect(job_id, jobmanager, token, ca_cert)
    r = client.get(f"/jobs/{jid}/checkpoints")
    if r.status_code != 200:
        raise click.ClickException(f"job {jid}: {_errors(r)}")
    data = r.json()
    if as_json:
        click.echo(_json.dumps(data, indent=2))
        return
    c = data["counts"]
    restored = data["latest"]["restored"]
    click.echo(
        f"Job {jid}: {c['completed']} completed, {c['failed']} failed, {c['in_progress']} in progress; "
        f"restored: {restored['external_path'] if restored else 'no'}"
    )
    table = Table("id", "status", "trigger time", "duration", "size", "written", "acks", "failure reason")
    for h in data["history"]:
        table.add_row(
            str(h["id"]),
            h["status"],
            ts(h["trigger_timestamp"]),
            f"{h['end_to_end_duration']} ms" if h["end_to_end_duration"] >= 0 else "-",
            size(h["state_size"]),
            size(h["checkpointed_size"]),
            f"{h['num_acknowledged_subtasks']}/{h['num_subtasks']}",
            h.get("failure_message") or "",
        )
    Console(width=160).print(table)
