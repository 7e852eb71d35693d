"""A Spark standalone cluster on 127.0.0.1 whose workers do not share a disk.

``StandaloneCluster`` starts a master and ``workers`` workers from the Spark installation
that ships with pyspark, each worker in its own mount namespace with a private ``/tmp``
(``unshare -m`` and a tmpfs; needs root or ``CAP_SYS_ADMIN``), so the executors' local
dirs are as separate as on two machines. Drivers connect with :meth:`driver_conf`; a
worker is killed for real (SIGKILL of the worker JVM, its executor JVM and its Python
workers) with :meth:`kill_worker` and started again with :meth:`start_worker`.

Every process of a worker shares the session the worker was started in (the Python
daemon makes its own process group, not its own session), so a worker's processes are
found by session id in ``/proc``. Logs (the master's, each worker's, and the executors'
``stdout``/``stderr`` in the workers' work dirs) go under ``log_dir``; :meth:`logs`
returns their tails for a failing test to print. Linux only.

    with StandaloneCluster(log_dir, workers=2) as cluster:
        conf = cluster.driver_conf()          # spark.master and what a driver needs
        ...
        killed = cluster.kill_worker(1)        # the processes that were killed
        cluster.start_worker(1)
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["StandaloneCluster", "ClusterError", "KilledWorker", "WorkerProcess", "spark_home"]

_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


class ClusterError(RuntimeError):
    """The cluster could not be started, reached or stopped as asked."""


def spark_home() -> Path:
    """The Spark installation: ``$SPARK_HOME``, else the one inside the pyspark package (not imported)."""
    env = os.environ.get("SPARK_HOME")
    if env and (Path(env) / "bin" / "spark-class").exists():
        return Path(env)
    spec = importlib.util.find_spec("pyspark")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        if (Path(location) / "bin" / "spark-class").exists():
            return Path(location)
    raise ClusterError("no Spark installation found: install pyspark or set SPARK_HOME")


def sparkpoint_root() -> Path:
    """The directory that holds the ``sparkpoint`` package under test (found, not imported): executors and
    workers must see the same package as the driver."""
    spec = importlib.util.find_spec("sparkpoint")
    if spec is None or spec.origin is None:
        raise ClusterError("the sparkpoint package cannot be found on this Python's path")
    return Path(spec.origin).resolve().parents[1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class WorkerProcess:
    """One process of a worker's session: the worker JVM, an executor JVM or a Python worker."""

    pid: int
    kind: str  # "worker", "executor", "python" or "other"
    command: str


@dataclass
class KilledWorker:
    """What :meth:`StandaloneCluster.kill_worker` killed: every process alive just before."""

    index: int
    processes: list[WorkerProcess]

    def kinds(self) -> set[str]:
        return {p.kind for p in self.processes}


@dataclass
class _Worker:
    index: int
    rpc_port: int = 0
    webui_port: int = 0
    proc: subprocess.Popen | None = None
    log: IO[str] | None = None
    starts: int = 0
    dirs: dict[str, Path] = field(default_factory=dict)


def session_processes(sid: int) -> list[WorkerProcess]:
    """Live (not zombie) processes of session ``sid``, read from ``/proc``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] == "Z" or int(fields[3]) != sid:
            continue
        found.append(WorkerProcess(int(entry.name), _kind(cmdline), cmdline.strip()))
    return found


def _kind(cmdline: str) -> str:
    if _WORKER_CLASS in cmdline:
        return "worker"
    if _EXECUTOR_CLASS in cmdline:
        return "executor"
    if "python" in cmdline.split(" ", 1)[0] or "pyspark" in cmdline:
        return "python"
    return "other"


class StandaloneCluster:
    """A master and ``workers`` workers on 127.0.0.1, each worker with a private ``/tmp``.

    Args:
        log_dir: where logs and the workers' work dirs go (created if missing).
        workers: number of workers.
        cores: cores of each worker (one executor per worker with the driver conf given).
        memory: memory each worker offers to executors.
        private_tmp: give each worker its own ``/tmp`` (a tmpfs in its own mount namespace).
        python: the Python executors run (``spark.pyspark.python``); default this interpreter.
    """

    def __init__(
        self,
        log_dir: Path,
        workers: int = 2,
        cores: int = 1,
        memory: str = "2g",
        private_tmp: bool = True,
        python: str | None = None,
        start_timeout: float = 90.0,
    ):
        self.log_dir = Path(log_dir).resolve()
        self.cores, self.memory, self.private_tmp = cores, memory, private_tmp
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self.home = spark_home()
        self.master_port = 0
        self.master_webui_port = 0
        self._master: subprocess.Popen | None = None
        self._master_log: IO[str] | None = None
        self.workers = [_Worker(i) for i in range(workers)]

    # -- life cycle -------------------------------------------------------------------------
    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> StandaloneCluster:
        """Start the master and every worker; returns when all workers are registered."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_master()
            for worker in self.workers:
                self._launch_worker(worker)
            self.wait_for_workers()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGKILL every worker's processes and the master; nothing of the cluster stays behind."""
        for worker in self.workers:
            if worker.proc is not None:
                try:
                    self._kill_session(worker)
                except ClusterError as e:  # go on: the master and the other workers must go too
                    print(f"stopping worker {worker.index}: {e}", file=sys.stderr)
        if self._master is not None:
            _kill_and_reap(self._master)
            left = session_processes(self._master.pid)
            for p in left:
                _sigkill(p.pid)
            self._master = None
        for log in [self._master_log, *(w.log for w in self.workers)]:
            if log is not None:
                log.close()

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def master_webui(self) -> str:
        return f"http://127.0.0.1:{self.master_webui_port}"

    def driver_conf(self, executor_memory: str = "1g") -> dict[str, str]:
        """The Spark confs of a driver on this cluster (pass them as ``-D key=value`` or to a builder).

        The driver waits for every worker's executor before it runs a job, reads shuffle
        blocks of another executor over the network even on the same host (a local read
        would look into the other worker's private ``/tmp``), and its executors run this
        cluster's Python with the ``sparkpoint`` package the caller imports.
        """
        package_root = str(sparkpoint_root())
        python_path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
        return {
            "spark.master": self.master_url,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": executor_memory,
            "spark.executor.cores": str(self.cores),
            "spark.cores.max": str(self.cores * len(self.workers)),
            "spark.shuffle.readHostLocalDisk": "false",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
            "spark.pyspark.python": self.python,
            "spark.executorEnv.PYTHONPATH": python_path,
            "spark.ui.enabled": "false",
        }

    # -- workers ----------------------------------------------------------------------------
    def worker_processes(self, index: int) -> list[WorkerProcess]:
        """The live processes of worker ``index``: its JVM, its executors' JVMs, their Python workers."""
        worker = self.workers[index]
        if worker.proc is None:
            return []
        return session_processes(worker.proc.pid)

    def kill_worker(self, index: int, timeout: float = 30.0) -> KilledWorker:
        """SIGKILL worker ``index`` with its executors and Python workers; returns once all are gone."""
        worker = self.workers[index]
        if worker.proc is None or worker.proc.poll() is not None:
            raise ClusterError(f"worker {index} is not running")
        before = self.worker_processes(index)
        self._kill_session(worker, timeout)
        self._wait(
            lambda: not self._registered(worker),
            timeout,
            f"the master still lists worker {index} as alive after it was killed",
        )
        return KilledWorker(index, before)

    def start_worker(self, index: int) -> None:
        """Start worker ``index`` again (new ports, a fresh private ``/tmp``) and wait until it registers."""
        worker = self.workers[index]
        if worker.proc is not None and worker.proc.poll() is None:
            raise ClusterError(f"worker {index} is running already")
        self._launch_worker(worker)
        self.wait_for_workers()

    def wait_for_workers(self, timeout: float | None = None) -> None:
        """Wait until every running worker is registered and alive at the master."""
        for worker in self.workers:
            if worker.proc is None or worker.proc.poll() is not None:
                continue
            self._wait(
                lambda w=worker: self._registered(w, check_exit=True),
                timeout or self.start_timeout,
                f"worker {worker.index} did not register with the master",
            )

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Wait until no application runs and every worker's cores are free (the previous driver is gone)."""

        def idle() -> bool:
            state = self.master_state()
            busy = [w for w in state.get("workers", []) if w.get("state") == "ALIVE" and w.get("coresused")]
            return not state.get("activeapps") and not busy

        self._wait(idle, timeout, "the cluster did not become idle (an application still runs)")

    def master_state(self) -> dict:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"{self.master_webui}/json/", timeout=5) as response:
            return json.loads(response.read().decode())

    def logs(self, tail_chars: int = 6000) -> str:
        """The tail of every log file of the cluster (master, workers, executors), for a failing test."""
        parts = []
        for path in sorted(self.log_dir.rglob("*")):
            if path.is_file() and (path.suffix == ".log" or path.name in ("stdout", "stderr")):
                text = path.read_text(errors="replace")
                parts.append(f"==> {path.relative_to(self.log_dir)} <==\n{text[-tail_chars:]}")
        return "\n".join(parts)

    # -- internals ----------------------------------------------------------------------------
    def _spark_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(SPARK_HOME=str(self.home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=self.python)
        env.pop("SPARK_CONF_DIR", None)
        return env

    def _start_master(self) -> None:
        self.master_port, self.master_webui_port = free_port(), free_port()
        self._master_log = open(self.log_dir / "master.log", "a")  # noqa: SIM115 - the master writes to it while it runs
        cmd = [
            str(self.home / "bin" / "spark-class"),
            _MASTER_CLASS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.master_port),
            "--webui-port",
            str(self.master_webui_port),
        ]
        self._master = subprocess.Popen(
            cmd,
            stdout=self._master_log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self._spark_env(),
            start_new_session=True,
        )

        def up() -> bool:
            try:
                return self.master_state().get("status") == "ALIVE"
            except OSError:
                return False

        self._wait(up, self.start_timeout, "the master did not start")

    def _launch_worker(self, worker: _Worker) -> None:
        worker.starts += 1
        worker.rpc_port, worker.webui_port = free_port(), free_port()
        work_dir = self.log_dir / f"worker-{worker.index}" / "work"
        work_dir.mkdir(parents=True, exist_ok=True)
        if worker.log is not None:
            worker.log.close()
        worker.log = open(self.log_dir / f"worker-{worker.index}.log", "a")  # noqa: SIM115 - written while the worker runs
        worker.log.write(f"\n---- start {worker.starts} ----\n")
        worker.log.flush()
        cmd = [
            str(self.home / "bin" / "spark-class"),
            _WORKER_CLASS,
            "--host",
            "127.0.0.1",
            "--port",
            str(worker.rpc_port),
            "--webui-port",
            str(worker.webui_port),
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--work-dir",
            str(work_dir),
            self.master_url,
        ]
        if self.private_tmp:
            # its own mount namespace, a tmpfs on /tmp: SPARK_LOCAL_DIRS of its executors is its alone
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", self._private_tmp_script(cmd)]
        env = self._spark_env()
        env["SPARK_LOCAL_DIRS"] = "/tmp"
        worker.proc = subprocess.Popen(
            cmd, stdout=worker.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )

    def _private_tmp_script(self, cmd: list[str]) -> str:
        """A tmpfs on /tmp, with what the worker must still see of the host's /tmp (this package, its Python,
        the cluster's directories, when they live there) bound back in: the host's /tmp is reached through a
        bind mount on /mnt, which exists in the worker's mount namespace only."""
        needed = [
            sparkpoint_root(),
            Path(sys.prefix),
            Path(self.python).parent,
            self.home,
            self.log_dir.resolve().parent,
        ]
        tops = sorted(
            {p.relative_to("/tmp").parts[0] for p in needed if p.is_relative_to("/tmp") and p != Path("/tmp")}
        )
        steps = ["set -e"]
        if tops:
            steps.append("mount --bind /tmp /mnt")
        steps.append("mount -t tmpfs -o mode=1777 tmpfs /tmp")
        for top in tops:
            steps.append(
                f"mkdir -p {shlex.quote('/tmp/' + top)} && mount --bind {shlex.quote('/mnt/' + top)} "
                f"{shlex.quote('/tmp/' + top)}"
            )
        return "; ".join(steps) + "; exec " + shlex.join(cmd)

    def _registered(self, worker: _Worker, check_exit: bool = False) -> bool:
        """Whether the master lists this start of the worker (its RPC port) as alive."""
        if check_exit and worker.proc is not None and worker.proc.poll() is not None:
            raise ClusterError(
                f"worker {worker.index} exited with code {worker.proc.returncode}:\n"
                + _tail(self.log_dir / f"worker-{worker.index}.log")
            )
        try:
            entries = self.master_state().get("workers", [])
        except OSError:
            return False
        return any(e.get("port") == worker.rpc_port and e.get("state") == "ALIVE" for e in entries)

    def _kill_session(self, worker: _Worker, timeout: float = 30.0) -> None:
        assert worker.proc is not None
        sid = worker.proc.pid
        deadline = time.monotonic() + timeout
        while True:
            left = session_processes(sid)
            if not left:
                break
            if time.monotonic() > deadline:
                raise ClusterError(f"processes of worker {worker.index} survived SIGKILL: {left}")
            for p in left:
                _sigkill(p.pid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(sid, signal.SIGKILL)
            time.sleep(0.05)
        _kill_and_reap(worker.proc)

    def _wait(self, condition: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} within {timeout:.0f} s; logs under {self.log_dir}:\n{self.logs(3000)}")
            time.sleep(0.2)


def _sigkill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _kill_and_reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        _sigkill(proc.pid)
    proc.wait(timeout=30)


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""
