"""One Spark standalone cluster for the session: a master and two workers on 127.0.0.1.

Each worker has a private ``/tmp`` (its own mount namespace), so the executors do not
share a disk; checkpoints and output live under the repository's ``out/`` (or
``$SPARKPOINT_CLUSTER_TEST_DIR``), which every process sees. Before each test both workers
run and no application is left from the previous one. A failing test shows the tail of
the cluster's logs (master, workers, executors).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.servers.spark_cluster import ClusterError, StandaloneCluster

from .drivers import ROOT, ClusterDriver


def _private_tmp_unavailable() -> str:
    """Why a worker cannot get a private /tmp here ('' if it can)."""
    if shutil.which("unshare") is None or shutil.which("java") is None:
        return "the cluster tests need unshare (util-linux) and java"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", "mount -t tmpfs tmpfs /tmp"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"a private /tmp per worker needs a mount namespace (root or CAP_SYS_ADMIN): {probe.stderr.strip()}"
    return ""


@pytest.fixture(scope="session")
def shared_dir():
    """A directory every process of the cluster sees (not /tmp: each worker has its own)."""
    base = Path(os.environ.get("SPARKPOINT_CLUSTER_TEST_DIR") or ROOT / "out")
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="cluster-tests-", dir=base))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(shared_dir):
    reason = _private_tmp_unavailable()
    if reason:
        pytest.skip(reason)
    with StandaloneCluster(shared_dir / "cluster-logs", workers=2, cores=1, memory="2g") as started:
        yield started


@pytest.fixture
def driver(cluster, shared_dir, request):
    """Both workers running, the cluster idle, and a fresh work directory for this test's jobs."""
    for index, worker in enumerate(cluster.workers):
        if worker.proc is None or worker.proc.poll() is not None:
            cluster.start_worker(index)
    cluster.wait_for_workers()
    try:
        cluster.wait_idle(timeout=60)
    except ClusterError as e:
        pytest.fail(f"the cluster is still busy with an earlier application: {e}")
    work = Path(tempfile.mkdtemp(prefix=f"{request.node.name[:40]}-", dir=shared_dir))
    started = ClusterDriver(cluster, work)
    yield started
    started.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    started = item.funcargs.get("cluster") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and isinstance(started, StandaloneCluster):
        report.sections.append(("Spark cluster logs (tails)", started.logs(tail_chars=4000)))
