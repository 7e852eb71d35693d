"""add_python_file: a helper module or package the job's functions import, on every target."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from sparkpoint.errors import SparkpointError


def _write_helpers(tmp_path, module: str, package: str):
    """A module file and a package directory; values are computed from them as 3x+1 and x*x."""
    (tmp_path / "files").mkdir()
    module_file = tmp_path / "files" / f"{module}.py"
    module_file.write_text("def triple_plus_one(x):\n    return 3 * x + 1\n")
    pkg = tmp_path / "deps" / package
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .square import square\n")
    (pkg / "square.py").write_text("def square(x):\n    return x * x\n")
    return module_file, tmp_path / "deps"


def _job(env, module: str, package: str):
    # the imports run inside the functions, where the records are processed
    code = textwrap.dedent(f"""
        def with_module(x):
            import {module}
            return {module}.triple_plus_one(x)

        def with_package(x):
            import {package}
            return {package}.square(x)
    """)
    namespace: dict = {}
    exec(code, namespace)
    return env.from_collection(list(range(1, 6))).map(namespace["with_module"]).map(namespace["with_package"])


EXPECTED = sorted((3 * x + 1) ** 2 for x in range(1, 6))


def test_local_target_imports_added_files(make_env, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    module_file, deps = _write_helpers(tmp_path, "pyfiles_local_module", "pyfiles_local_pkg")
    with pytest.raises(SparkpointError, match="pyfiles_local_module"):
        list(_job(make_env("local"), "pyfiles_local_module", "pyfiles_local_pkg").execute_and_collect())
    env = make_env("local")
    env.add_python_file(str(module_file))
    env.add_python_file(str(deps))
    assert env.get_configuration().get_string("python.files") == f"{module_file},{deps}"
    assert sorted(_job(env, "pyfiles_local_module", "pyfiles_local_pkg").execute_and_collect()) == EXPECTED


@pytest.mark.spark
def test_spark_target_ships_added_files(spark, make_env, tmp_path):
    module_file, deps = _write_helpers(tmp_path, "pyfiles_spark_module", "pyfiles_spark_pkg")
    env = make_env("spark")
    env.set_parallelism(1)
    env.add_python_file(str(module_file))
    env.add_python_file(str(deps))
    assert sorted(_job(env, "pyfiles_spark_module", "pyfiles_spark_pkg").execute_and_collect()) == EXPECTED


def test_a_zipped_directory_goes_when_the_process_exits(tmp_path):
    """A directory is zipped for Spark into a temporary directory of the process, not left in /tmp for good."""
    import subprocess

    _, deps = _write_helpers(tmp_path, "pyfiles_zip_module", "pyfiles_zip_pkg")
    code = (
        "import sys, zipfile; from pathlib import Path\n"
        "from sparkpoint.runtime.spark.python_files import _zip_directory\n"
        f"path = _zip_directory(Path({str(deps / 'pyfiles_zip_pkg')!r}))\n"
        "print(path); print(sorted(zipfile.ZipFile(path).namelist()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[1] == "['__init__.py', 'square.py']"  # the package's contents at the archive's root
    zipped = Path(out[0])
    assert zipped.name == "pyfiles_zip_pkg.zip" and not zipped.exists()
    assert not zipped.parent.parent.exists()  # the process's own directory went with it
