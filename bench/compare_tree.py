"""Run a benchmark on the code of another tree: a git revision against this checkout.

A measurement of "before" and "after" runs in a fresh process whose ``PYTHONPATH`` is the
tree under test, so that the driver and Spark's Python workers (which inherit the
driver's environment) import the same ``sparkpoint``. The workload itself (``bench/``,
``examples/``) and its oracle always come from this checkout, so both sides run the same
job and are checked the same way; only ``sparkpoint`` differs. For a tree other than this
checkout the path is a small directory of links: ``sparkpoint`` to the tree's package,
``bench``, ``examples`` and ``tests`` (the test suite's servers, which some benchmarks use) to
this checkout's.

The parent side: :func:`revision_tree` (a temporary ``git worktree``, or an existing
checkout), :func:`import_root` and :func:`run_child`. The child side: :func:`enter_tree`
before anything imports ``sparkpoint``, and :func:`check_workers` once a SparkSession is up.
Nothing here imports ``sparkpoint`` or ``pyspark`` at module level.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: What a tree's import root takes from this checkout rather than from the tree.
FROM_THIS_CHECKOUT = ("bench", "examples", "tests")


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout.strip()


def describe_tree(tree: Path) -> dict[str, Any]:
    """The commit a tree is at and how many paths differ from it (uncommitted changes)."""
    try:
        commit = git("rev-parse", "HEAD", cwd=tree)
        dirty = len([line for line in git("status", "--porcelain", "--", "sparkpoint", cwd=tree).splitlines() if line])
    except subprocess.CalledProcessError as e:
        return {"path": str(tree), "error": e.stderr.strip()}
    return {"path": str(tree), "commit": commit, "uncommitted_paths_in_sparkpoint": dirty}


@contextlib.contextmanager
def revision_tree(rev: str | None, existing: Path | None, root: Path) -> Iterator[Path]:
    """The tree to compare against: ``existing`` as it is (kept), or revision ``rev`` checked out into a
    temporary ``git worktree`` under ``root`` (removed afterwards)."""
    if existing is not None:
        tree = existing.resolve()
        if not (tree / "sparkpoint" / "__init__.py").is_file():
            raise SystemExit(f"--before-tree {tree}: no sparkpoint/__init__.py there")
        yield tree
        return
    if rev is None:
        raise SystemExit("give --before REV or --before-tree PATH")
    tree = root / "before-tree"
    try:
        git("worktree", "add", "--detach", str(tree), rev)
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"git worktree add {rev}: {e.stderr.strip()}") from None
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)


def import_root(tree: Path, root: Path, label: str) -> Path:
    """The directory to put on ``PYTHONPATH`` to run this checkout's workloads on ``tree``'s sparkpoint."""
    tree = tree.resolve()
    if tree == REPO:
        return REPO
    path = root / f"path-{label}"
    path.mkdir(parents=True, exist_ok=True)
    links = {"sparkpoint": tree / "sparkpoint", **{name: REPO / name for name in FROM_THIS_CHECKOUT}}
    for name, target in links.items():
        link = path / name
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=True)
    return path


def run_child(script: Path, args: list[str], path: Path, timeout_s: float | None = None) -> dict[str, Any]:
    """Run ``script args`` in a fresh interpreter with ``PYTHONPATH`` = ``path``; the JSON object the child
    printed on its last line of output. A child that fails raises ``RuntimeError`` with its stderr's end."""
    env = dict(os.environ, PYTHONPATH=str(path), PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    cmd = [sys.executable, str(script), *args]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=path, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{script.name} {' '.join(args)}: no result after {timeout_s:.0f} s") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{script.name} {' '.join(args)} exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        raise RuntimeError(f"{script.name} {' '.join(args)}: last line is not JSON: {lines[-1][:300]!r}") from None


def enter_tree(path: str | Path) -> str:
    """In the child, before anything imports ``sparkpoint``: import it from ``path`` (the ``PYTHONPATH`` the
    parent gave, which the Spark workers inherit). Returns the package's resolved directory."""
    if "sparkpoint" in sys.modules:
        raise RuntimeError("sparkpoint was imported before enter_tree(): the driver may not run the tree under test")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    sys.path.insert(0, str(path))
    import sparkpoint

    where = Path(sparkpoint.__file__).resolve().parent
    expected = (Path(path) / "sparkpoint").resolve()
    if where != expected:
        raise RuntimeError(f"sparkpoint imported from {where}, expected {expected}")
    return str(where)


def check_workers(spark: Any, driver_package: str) -> None:
    """Spark's Python workers import ``sparkpoint`` from where the driver did (else a comparison would time
    the wrong code on one side)."""

    def where(_: Any) -> list[str]:
        import sparkpoint as sp

        return [str(Path(sp.__file__).resolve().parent)]

    seen = set(spark.sparkContext.parallelize(range(2), 2).flatMap(where).collect())
    if seen != {driver_package}:
        raise RuntimeError(
            f"Spark's Python workers import sparkpoint from {sorted(seen)}, the driver from {driver_package}"
        )


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
