"""The JVM half of the Spark executor: ``LocatedRDD``, compiled from its source on first use.

PySpark has no public way to give an RDD's partitions preferred locations. ``LocatedRDD``
(``jvm/LocatedRDD.java``) is a one-to-one view of an RDD that does, and that tells each task
the executor it runs on. Its source ships with the package and is compiled with the JDK's
``javac`` against the installed pyspark's jars into a cache directory
(``$SPARKPOINT_CACHE_DIR``, else ``$XDG_CACHE_HOME/sparkpoint`` or ``~/.cache/sparkpoint``),
keyed by the source and the Spark version; no artifact repository is needed. The driver
loads the class through its own class loader and Spark ships the jar to the executors
(``SparkContext.addJar``). Without a JDK the executor runs without locality preferences.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["TASK_LOCATION_PROPERTY", "located_rdd_factory"]

logger = logging.getLogger(__name__)

TASK_LOCATION_PROPERTY = "sparkpoint.task.location"
_SOURCE = Path(__file__).with_name("jvm") / "LocatedRDD.java"
_CLASS = "org.sparkpoint.spark.LocatedRDD"


def _cache_dir() -> Path:
    explicit = os.environ.get("SPARKPOINT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sparkpoint"


def _javac() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "javac").exists():
        return str(Path(java_home, "bin", "javac"))
    return shutil.which("javac")


def helper_jar() -> Path | None:
    """The compiled helper jar (built on first use), or ``None`` when no JDK compiler is at hand."""
    import pyspark

    source = _SOURCE.read_bytes()
    digest = hashlib.sha256(source + pyspark.__version__.encode()).hexdigest()[:16]
    jar = _cache_dir() / f"sparkpoint-spark-{digest}.jar"
    if jar.exists():
        return jar
    javac = _javac()
    if javac is None:
        logger.warning(
            "no javac (JDK) found: Spark tasks run without preferring the executor that holds their "
            "state, so keyed tasks move more often"
        )
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as build:
        result = subprocess.run(
            [javac, "-nowarn", "--release", "17", "-cp", f"{jars}{os.sep}*", "-d", build, str(_SOURCE)],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            logger.warning(
                "compiling %s failed, tasks run without locality preferences:\n%s", _SOURCE.name, result.stderr.strip()
            )
            return None
        partial = Path(build) / "helper.jar"
        with zipfile.ZipFile(partial, "w") as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for cls in Path(build).rglob("*.class"):
                z.write(cls, cls.relative_to(build).as_posix())
        os.replace(partial, jar)  # other processes building at the same time never see half a jar
    logger.info("compiled the Spark helper into %s", jar)
    return jar


def located_rdd_factory(sc: Any) -> Callable[[Any, list], Any] | None:
    """``located(rdd, locations)``: ``rdd`` whose partition ``i`` prefers ``locations[i]`` (a task-location
    string or ``None``), or ``None`` if the helper cannot be built."""
    from pyspark.rdd import RDD

    jar = helper_jar()
    if jar is None:
        return None
    jvm, gateway = sc._jvm, sc._gateway
    try:
        urls = gateway.new_array(jvm.java.net.URL, 1)
        urls[0] = jvm.java.io.File(str(jar)).toURI().toURL()
        loader = jvm.java.net.URLClassLoader(urls, jvm.java.lang.Thread.currentThread().getContextClassLoader())
        constructor = loader.loadClass(_CLASS).getConstructors()[0]
        sc._jsc.sc().addJar(str(jar))  # the executors load the class from the jar Spark ships them
    except Exception as e:  # noqa: BLE001 - py4j errors of any kind: run without preferences
        logger.warning("the Spark helper %s does not load (%s): tasks run without locality preferences", jar, e)
        return None

    def located(rdd: Any, locations: list) -> Any:
        prefs = gateway.new_array(jvm.java.lang.String, len(locations), 1 if any(locations) else 0)
        for i, where in enumerate(locations):
            if where:
                prefs[i][0] = where
        args = gateway.new_array(jvm.java.lang.Object, 2)
        args[0] = rdd._jrdd.rdd()
        args[1] = prefs
        return RDD(constructor.newInstance(args).toJavaRDD(), sc, rdd._jrdd_deserializer)

    return located
