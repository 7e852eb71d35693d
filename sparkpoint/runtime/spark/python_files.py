"""``add_python_file`` on Spark: the files reach every executor through ``SparkContext.addPyFile``.

A ``.py`` file, ``.zip`` or ``.egg`` is added as it is; a directory is zipped first (its
contents at the archive's root, so its modules and packages import by their names), into a
temporary directory of this process that goes when it exits: Spark's file server reads an added
file from where it was added for as long as the SparkContext lives.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["ship_python_files"]

logger = logging.getLogger(__name__)

_zips: Path | None = None  # this process's zipped directories, removed when it exits


def _zip_root() -> Path:
    global _zips
    if _zips is None:
        _zips = Path(tempfile.mkdtemp(prefix="sparkpoint-pyfiles-"))
        atexit.register(_remove_zips, _zips, os.getpid())
    return _zips


def _remove_zips(path: Path, owner: int) -> None:
    if os.getpid() == owner:  # a forked child that exits runs the handlers it inherited: not its files
        shutil.rmtree(path, ignore_errors=True)


def _zip_directory(directory: Path) -> str:
    digest = hashlib.sha1(str(directory).encode()).hexdigest()[:12]  # two directories of one name stay apart
    target = _zip_root() / digest / f"{directory.name}.zip"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for root, dirs, files in os.walk(directory):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                path = Path(root) / name
                zf.write(path, path.relative_to(directory).as_posix())
    os.replace(tmp, target)
    return str(target)


def ship_python_files(spark_context: Any, python_files: Iterable[str]) -> None:
    """Make each file, archive or directory importable in the executors' Python workers."""
    for f in python_files:
        local = Path(f.removeprefix("file://"))
        if local.is_dir():
            path = _zip_directory(local.resolve())
        elif local.exists():
            path = str(local.resolve())
        else:
            path = f  # a remote URI (hdfs://, s3a://, ...): Spark fetches it
        logger.info("shipping %s to the executors (python.files)", f)
        spark_context.addPyFile(path)
