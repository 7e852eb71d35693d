"""PySpark's worker daemon, for a local Spark that sparkpoint starts itself (``spark.python.daemon.module``).

Spark puts ``pyspark.zip`` (and py4j's) first on its Python workers' path, and a zip holds no compiled modules:
every worker, forked from the daemon, compiled PySpark's worker modules from the zip's sources again before it
ran a task, about 0.7 s of CPU a worker, and each task re-read the zips' directories. Where the pyspark and py4j
installed beside sparkpoint are the zips' versions (a local Spark runs the driver's Python), this daemon takes
the zips off the path, so the installed packages' compiled modules are used, and imports the worker module once
before it forks (PySpark imports it after the fork because some imports start threads; the worker module's own
start none, which ``tests/deploy/test_spark_daemon.py`` checks, and should an import have started one, PySpark's
own daemon is run instead), then runs PySpark's daemon. It also imports sparkpoint's task modules
(:data:`PRELOAD`) before it forks, another 0.5 s of CPU each worker spent at its first task: numpy's OpenBLAS is
held to one thread (``OPENBLAS_NUM_THREADS``, unless set) so that they start none either, and should one have
started, the daemon starts again without them. Run as ``python -m sparkpoint.runtime.spark.daemon
pyspark.worker``.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import zipfile

__all__ = ["installed_packages_first", "threads", "PRELOAD", "preloaded"]

_MODULE = "sparkpoint.runtime.spark.daemon"
#: The module a worker runs sparkpoint's tasks with, and all it imports.
PRELOAD = "sparkpoint.runtime.spark.task_runner"
#: ``"0"``: the daemon does not import :data:`PRELOAD` (set when importing it started a thread).
_PRELOAD_ENV = "SPARKPOINT_DAEMON_PRELOAD"
#: What this daemon imported before forking its workers (a worker sees it as ``__main__.preloaded``).
preloaded: list[str] = []


def _package_of(entry: str) -> str | None:
    """The package a zip Spark puts on the workers' path holds: ``pyspark.zip``, ``py4j-<version>-src.zip``."""
    name = os.path.basename(entry)
    if name == "pyspark.zip":
        return "pyspark"
    if name.startswith("py4j-") and name.endswith("-src.zip"):
        return "py4j"
    return None


def _same_as_installed(entry: str, package: str, rest: list[str]) -> bool:
    spec = importlib.machinery.PathFinder.find_spec(package, rest)
    if spec is None or not spec.submodule_search_locations:
        return False
    try:
        with open(os.path.join(list(spec.submodule_search_locations)[0], "version.py"), "rb") as f:
            installed = f.read()
        with zipfile.ZipFile(entry) as z:
            return z.read(f"{package}/version.py") == installed
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


def installed_packages_first(path: list[str]) -> list[str]:
    """``path`` without the zips of pyspark and py4j that Spark puts on it where the same version of the package
    is installed on the rest of it (whose compiled modules are then used)."""
    zips = {entry: package for entry in path if (package := _package_of(entry)) is not None}
    rest = [entry for entry in path if entry not in zips]
    same = {entry for entry, package in zips.items() if _same_as_installed(entry, package, rest)}
    return [entry for entry in path if entry not in same]


def threads() -> int:
    """This process's threads, native ones included (an import may start them without ``threading``)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def _reseed_numpy() -> None:
    """A worker forked from the daemon gets its own numpy random state (numpy 1.x seeds it once, at import: every
    worker would draw the same numbers; Python's own ``random`` reseeds itself after a fork)."""
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        np_random.seed()


def main() -> None:
    sys.path[:] = installed_packages_first(sys.path)
    worker_module = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].startswith("pyspark") else "pyspark.worker"
    importlib.import_module(worker_module)
    if threads() > 1:  # another PySpark or library build started one: forking now is unsafe, run PySpark's own
        os.execv(sys.executable, [sys.executable, "-m", "pyspark.daemon", *sys.argv[1:]])
    if os.environ.get(_PRELOAD_ENV) != "0":
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # else numpy's import starts a thread per core
        importlib.import_module(PRELOAD)
        if threads() > 1:  # a library build that starts one at import: start again without the preload
            os.execve(sys.executable, [sys.executable, "-m", _MODULE, *sys.argv[1:]], {**os.environ, _PRELOAD_ENV: "0"})
        os.register_at_fork(after_in_child=_reseed_numpy)
        preloaded.append(PRELOAD)
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
