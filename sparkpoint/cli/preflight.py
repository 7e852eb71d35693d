"""What ``sparkpoint run`` checks before it starts anything, and before ``-d`` detaches.

Each check finds in well under a second what would otherwise fail after Spark's start-up (tens of seconds) or
deep in a Java or click traceback, and says it in one line with what to do: every configuration value parses
(:func:`~sparkpoint.common.config_values.check_values`), ``-m`` is a Spark master URL, the job file compiles
(its ``SyntaxError`` shown as Python shows it, nothing else), the ``-s`` checkpoint or savepoint loads, the
configured ports are free, and a Java that Spark can use is there (for jobs that run on Spark).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
import subprocess
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from sparkpoint.cli.common import ensure_sys_path
from sparkpoint.common.config_values import check_values
from sparkpoint.common.configuration import parse_boolean
from sparkpoint.errors import SparkpointError

__all__ = ["Refused", "preflight", "MIN_JAVA"]

MIN_JAVA = 17  # Spark 4's minimum
_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\s*\d+)?\])?|local-cluster\[.+\]|spark://.+|yarn|k8s://.+|mesos://.+)$")
_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


class Refused(click.ClickException):
    """A pre-flight check failed: its message is all the user sees (no ``Error:`` prefix for a job's own
    ``SyntaxError``, which reads as Python prints it)."""

    def __init__(self, message: str, plain: bool = False):
        super().__init__(message)
        self.plain = plain

    def show(self, file: Any = None) -> None:
        if self.plain:
            click.echo(self.message, err=True)
        else:
            super().show(file)


def preflight(config: Mapping[str, Any], path: str | None, module: str | None) -> None:
    """Run every check on the job about to start (``config``: its configuration, ``-D`` and options applied)."""
    try:
        check_values(config)
    except SparkpointError as e:
        raise Refused(f"-D {e}") from None
    _check_master(config.get("spark.master"))
    _check_job(path, module)
    _check_ports(config)
    restore = config.get("execution.state-recovery.path") or config.get("execution.savepoint.path")
    if restore:
        _check_restore(str(restore), config)
    if str(config.get("execution.target", "spark")) == "spark":
        _check_java()


def _check_master(master: Any) -> None:
    if master is None or _MASTER.match(str(master).strip()):
        return
    hint = ""
    if re.match(r"^[\w.-]+:\d+$", str(master)):
        hint = (
            " It looks like a Flink JobManager address: a running job's REST endpoint is found by job id "
            "(list, cancel, savepoint, stop take -m HOST:PORT for one elsewhere)."
        )
    raise Refused(
        f"-m {master}: not a Spark master URL (local[*], local[4], spark://HOST:7077, yarn, k8s://HOST:PORT); run "
        f"-m picks where the job runs.{hint}"
    )


def _check_job(path: str | None, module: str | None) -> None:
    """The job's source compiles; a ``SyntaxError`` is shown as Python shows it."""
    if module:
        ensure_sys_path(Path.cwd())  # as the run will have it
        try:
            spec = importlib.util.find_spec(module)
        except Exception as e:  # noqa: BLE001 - a parent package that fails to import: its error, in a line
            raise Refused(f"-pym {module}: {type(e).__name__}: {e}") from None
        if spec is None or spec.origin is None:
            raise Refused(f"-pym {module}: no such module on sys.path (the current directory is on it)")
        path = spec.origin
    if not path or not path.endswith(".py"):
        return
    try:
        compile(Path(path).read_bytes(), path, "exec")
    except SyntaxError as e:
        raise Refused("".join(traceback.format_exception_only(e)).rstrip(), plain=True) from None


def _check_ports(config: Mapping[str, Any]) -> None:
    """The REST port and the Prometheus reporter's port (or range: one free port of it is enough) can be bound."""
    from sparkpoint.rest.prometheus import port_candidates

    wanted: list[tuple[str, str, list[int]]] = []
    if parse_boolean(config.get("rest.enabled", True)) and str(config.get("rest.port") or "0") != "0":
        host = str(config.get("rest.bind-address") or config.get("rest.address") or "127.0.0.1")
        wanted.append(("rest.port", host, [int(str(config["rest.port"]))]))
    if config.get("metrics.reporter.prom.port"):
        host = str(config.get("metrics.reporter.prom.host") or "127.0.0.1")
        try:
            ports = port_candidates(config["metrics.reporter.prom.port"])
        except SparkpointError as e:
            raise Refused(f"-D {e}") from None
        wanted.append(("metrics.reporter.prom.port", host, ports))
    for key, host, ports in wanted:
        errors = [error for error in map(lambda p: _bind_error(host, p), ports) if error is not None]
        if len(errors) == len(ports):
            raise Refused(
                f"-D {key}={config[key]}: {'every port of it' if len(ports) > 1 else 'the port'} is taken on {host} "
                f"({errors[-1]}); pick another, or 0 for any free one"
            )


def _bind_error(host: str, port: int) -> str | None:
    """Why ``port`` on ``host`` cannot be bound (as the servers bind: address reuse on), or None."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OSError as e:
        return str(e)
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e.strerror or str(e)
    return None


def _check_restore(path: str, config: Mapping[str, Any]) -> None:
    from sparkpoint.checkpoint.loader import load_latest_checkpoint
    from sparkpoint.storage.file_systems import configure_file_systems

    configure_file_systems(dict(config))
    try:
        # as the job will find it (a chk-N, a savepoint, a job's checkpoint directory); its state files are
        # verified when the job reads them
        load_latest_checkpoint(path, verify_files=False)
    except (SparkpointError, OSError) as e:
        raise Refused(f"-s {path}: {e}") from None


def _check_java() -> None:
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            raise Refused(
                f"JAVA_HOME={home} has no bin/java: point it at a JDK {MIN_JAVA} or later, or unset it to use the "
                f"java on PATH (or run with -D execution.target=local, without Spark)"
            )
        found = str(java)
    else:
        found = shutil.which("java") or ""
        if not found:
            raise Refused(
                f"no Java found: Spark needs a JDK {MIN_JAVA} or later; install one (apt-get install "
                f"openjdk-{MIN_JAVA}-jdk-headless) and set JAVA_HOME, or run with -D execution.target=local"
            )
    try:
        done = subprocess.run([found, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Refused(f"{found} -version failed ({e}); Spark needs a working JDK {MIN_JAVA} or later") from None
    match = _JAVA_VERSION.search(done.stderr + done.stdout)
    if match is None:
        return  # an unusual banner: Spark will say what it thinks of it
    major = int(match.group(1)) if match.group(1) != "1" else int(match.group(2) or 0)  # 1.8 is Java 8
    if major < MIN_JAVA:
        raise Refused(f"{found} is Java {major}: Spark needs {MIN_JAVA} or later; set JAVA_HOME to a newer JDK")
