"""The test cluster is what the other cluster tests assume: workers that do not share /tmp."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster


def _mount_namespace(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/mnt")


def _tmp_filesystem(pid: int) -> str:
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        if before.split()[4] == "/tmp":
            return after.split()[0]
    return ""


def test_each_worker_has_its_own_tmp(cluster):
    workers = [next(p for p in cluster.worker_processes(i) if p.kind == "worker") for i in range(2)]
    namespaces = {_mount_namespace(p.pid) for p in workers}
    assert len(namespaces) == 2 and _mount_namespace(os.getpid()) not in namespaces
    assert all(_tmp_filesystem(p.pid) == "tmpfs" for p in workers)
    assert {
        w["state"]
        for w in cluster.master_state()["workers"]
        if w["port"] in {cluster.workers[i].rpc_port for i in range(2)}
    } == {"ALIVE"}
