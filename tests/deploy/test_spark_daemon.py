"""The embedded local Spark's Python workers (``sparkpoint.runtime.spark.daemon``): they import pyspark and py4j
from the installed packages, not from the zips Spark puts first on their path (a zip holds no compiled modules),
and the daemon forks them with no thread started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pyspark
import pytest

from sparkpoint.runtime.spark.daemon import PRELOAD, installed_packages_first

ZIPS = Path(pyspark.__file__).parent / "python" / "lib"

WHERE = textwrap.dedent("""
    import json, sys
    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.datastream import StreamExecutionEnvironment
    from sparkpoint.datastream.connectors.generator import NumberSequenceSource

    def where(_):
        import py4j, pyspark
        preloaded = getattr(sys.modules["__main__"], "preloaded", None)  # the daemon's module, in a forked worker
        return json.dumps([pyspark.__file__, py4j.__file__, preloaded])

    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.from_source(NumberSequenceSource(0, 3), WatermarkStrategy.no_watermarks(), "n").uid("n")
    with stream.map(where).uid("where").execute_and_collect() as results:
        for line in set(results):
            print("WHERE", line)
""")


def _spark_zips() -> list[str]:
    return sorted(str(p) for p in ZIPS.glob("*.zip"))


@pytest.mark.slow
def test_the_workers_of_an_embedded_spark_import_the_installed_pyspark(tmp_path):
    job = tmp_path / "where.py"
    job.write_text(WHERE)
    r = subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "run", "-p", "2", str(job)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-3000:]
    found = [json.loads(line[6:]) for line in r.stdout.splitlines() if line.startswith("WHERE ")]
    assert found, r.stdout
    for pyspark_file, py4j_file, preloaded in found:
        assert ".zip" not in pyspark_file and ".zip" not in py4j_file, (pyspark_file, py4j_file)
        assert Path(pyspark_file).parent == Path(pyspark.__file__).parent
        assert preloaded == [PRELOAD], preloaded  # the worker was forked with sparkpoint's task modules imported


def test_the_daemon_imports_the_worker_module_without_starting_a_thread():
    """What the daemon does before it forks, with Spark's zips first on the path as Spark launches it: PySpark's
    worker module and sparkpoint's task modules (:data:`PRELOAD`) start no thread."""
    zips = _spark_zips()
    assert any(z.endswith("pyspark.zip") for z in zips), zips
    code = textwrap.dedent("""
        import os, sys
        from sparkpoint.runtime.spark.daemon import PRELOAD, installed_packages_first, threads
        sys.path[:] = installed_packages_first(sys.path)
        import pyspark.worker, pyspark.daemon, pyspark
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the daemon does before it imports sparkpoint's
        __import__(PRELOAD)
        print(threads(), pyspark.__file__)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*zips, os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(Path.cwd()))
    assert r.returncode == 0, r.stderr
    threads, where = r.stdout.split()
    assert threads == "1" and ".zip" not in where, r.stdout


def test_a_zip_of_another_version_stays_on_the_path(tmp_path):
    other = tmp_path / "pyspark.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("pyspark/version.py", "__version__: str = '0.0.1'\n")
    not_a_zip = tmp_path / "py4j-0.1-src.zip"
    not_a_zip.write_text("not a zip")
    path = [str(other), str(not_a_zip), *sys.path]
    assert installed_packages_first(path) == path
    same = [*_spark_zips(), *sys.path]
    assert installed_packages_first(same) == list(sys.path)


def test_a_forked_worker_draws_its_own_numpy_random_numbers():
    """numpy 1.x seeds its global random state once, at import, which the daemon now does before it forks: the
    handler the daemon registers reseeds it in each child (numpy 2 imports numpy.random lazily; seeded here)."""
    code = textwrap.dedent("""
        import os, numpy.random
        from sparkpoint.runtime.spark import daemon
        numpy.random.seed(7)
        os.register_at_fork(after_in_child=daemon._reseed_numpy)
        draws = []
        for _ in range(2):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.write(w, str(numpy.random.randint(1 << 30)).encode())
                os._exit(0)
            os.waitpid(pid, 0)
            draws.append(os.read(r, 64).decode())
        print(" ".join(draws), numpy.random.randint(1 << 30))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    first, second, parent = r.stdout.split()
    assert first != second and parent not in (first, second), r.stdout
