"""A REST target is resolved once, when checked, and used resolved: a symbolic link swapped into its path after
the check never leads a disposal or a target directory out of the allowed root."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from sparkpoint.common import Configuration
from sparkpoint.rest.job_json import RestError
from sparkpoint.rest.security import RestSecurity
from tests.rest.job import await_operation, rest_client


def contents(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


class Swapper:
    """Swaps ``path`` between its real directory and a link to ``outside``, in a tight loop, until stopped."""

    def __init__(self, path: Path, outside: Path):
        self.path, self.real, self.outside = path, path.with_name(path.name + ".real"), outside
        self.stopped = threading.Event()
        self.swaps = 0
        self.swapped = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopped.is_set():
            os.rename(self.path, self.real)
            os.symlink(self.outside, self.path, target_is_directory=True)
            time.sleep(0.001)
            os.unlink(self.path)
            os.rename(self.real, self.path)
            with self.swapped:
                self.swaps += 1
                self.swapped.notify_all()
            time.sleep(0.001)

    def await_swap(self) -> int:
        """Wait until the loop completes one more swap (a starved swapper would leave the race untried)."""
        with self.swapped:
            seen = self.swaps
            assert self.swapped.wait_for(lambda: self.swaps > seen, timeout=10), "the swapper made no swap in 10 s"
            return self.swaps

    def __enter__(self) -> Swapper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(10)


def test_disposals_racing_a_symbolic_link_never_delete_outside_the_root(start_job, tmp_path):
    job = start_job(200)
    jid = job.job_id
    target = tmp_path / "savepoints" / "target"
    with rest_client(jid) as c:
        r = c.post(f"/jobs/{jid}/savepoints", json={"target-directory": str(target)})
        assert r.status_code == 202, r.text
        done = await_operation(c, f"/jobs/{jid}/savepoints/{r.json()['request-id']}")
        first = Path(done["operation"]["location"].removeprefix("file://"))
        assert first.parent == target
        names = [f"savepoint-copy-{i}" for i in range(12)]
        outside = tmp_path / "outside"
        for name in names:  # savepoints under the root, and the same names outside it (what a link would reach)
            shutil.copytree(first, target / name)
            shutil.copytree(first, outside / name)
        before = contents(outside)
        outcomes = []
        with Swapper(target, outside) as swapper:
            for name in names:
                swapper.await_swap()  # each disposal races a swapper that is running
                r = c.post("/savepoint-disposal", json={"savepoint-path": str(target / name)})
                if r.status_code == 400:  # the check itself saw the link (resolved outside the root)
                    outcomes.append("refused")
                    continue
                assert r.status_code == 202, r.text
                op = await_operation(c, f"/savepoint-disposal/{r.json()['request-id']}")
                outcomes.append("failed" if "failure-cause" in op["operation"] else "disposed")
        assert contents(outside) == before, outcomes  # nothing outside the root was deleted
        assert "disposed" in outcomes or "failed" in outcomes, outcomes
        disposed = [n for n, o in zip(names, outcomes) if o == "disposed"]
        assert all(not (target / n).exists() for n in disposed)
        left = next((n for n, o in zip(names, outcomes) if o != "disposed"), None)
        if left is not None:  # one the race refused goes once no link is about
            r = c.post("/savepoint-disposal", json={"savepoint-path": str(target / left)})
            operation = await_operation(c, f"/savepoint-disposal/{r.json()['request-id']}")["operation"]
            assert "failure-cause" not in operation
            assert not (target / left).exists() and contents(outside) == before


def test_a_target_directory_is_made_without_following_a_link_planted_after_the_check(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    conf = Configuration()
    conf.set("sparkpoint.rest.allowed-dirs", str(root))
    security = RestSecurity.from_config(conf)
    resolved = security.check_target(str(root / "a" / "b"), "target directory")
    assert resolved == f"file://{os.path.realpath(root)}/a/b"
    (root / "a").symlink_to(outside, target_is_directory=True)  # planted between the check and the use
    with pytest.raises(RestError) as info:
        security.make_target_directory(resolved)
    assert info.value.status == 400 and "'a' is not a directory under" in str(info.value), str(info.value)
    assert list(outside.iterdir()) == []  # nothing made outside the root
    (root / "a").unlink()
    security.make_target_directory(resolved)
    assert (root / "a" / "b").is_dir() and not (root / "a").is_symlink()
