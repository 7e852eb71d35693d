"""Class data sharing for the JVM of a Spark that sparkpoint starts itself (``-XX:SharedArchiveFile``).

Starting Spark's driver JVM loads and verifies some 8,000 classes from Spark's jars: about 2 s of the ~5 s from
``sparkpoint run`` to a SparkContext on a machine of 2 cores. Java 17 can keep the classes an application loaded
in an archive that later JVMs map instead (a dynamic CDS archive, ``-XX:ArchiveClassesAtExit``). So a driver JVM
started here (its options go in ``SPARK_SUBMIT_OPTS`` for the launch, after which the variable is as it was;
``spark.driver.extraJavaOptions``, wherever set, comes after them and is left alone):

- maps the archive of this Java and this Spark if there is one (``<cache>/<key>.jsa``; the key hashes the
  ``java`` binary, Spark's directory, its configuration directory and every jar on its class path, so another
  Spark or Java makes another);
- else records one at its exit (``<key>.<pid>-<random>.tmp``, written by the JVM after the job, in the
  background), unless another JVM is recording one now, or a directory on the class path holds files (the JVM
  refuses to record then). Its pid and command line go beside it (``.cmd``): a start after that JVM is gone
  checks the recording with a JVM of the same command that must map it and verify its checksums (``-Xshare:on
  -XX:+VerifySharedSpaces ... -version``) and only then moves it in place, since a JVM that maps a truncated
  archive (its recording killed) dies of SIGBUS. Other recordings are deleted once their JVM is gone.

The cache is ``$SPARKPOINT_CACHE_DIR`` or ``$XDG_CACHE_HOME/sparkpoint`` (``~/.cache/sparkpoint``), under
``jvm/``; ``sparkpoint.jvm.class-sharing: false`` turns it off, as does a driver option of the user's naming a
shared archive (``-Xshare``, ``SharedArchiveFile``, ``ArchiveClassesAtExit``) in ``SPARK_SUBMIT_OPTS``,
``spark.driver.extraJavaOptions`` or ``spark-defaults.conf``. The JVM's own messages about the archive are off
(``-Xlog:cds=off``): an archive that does not fit is simply not used. Linux only (the recorder is found through
``/proc``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

__all__ = ["CONFIG_KEY", "cache_dir", "conf_dir", "driver_options", "record_command"]

logger = logging.getLogger(__name__)

CONFIG_KEY = "sparkpoint.jvm.class-sharing"
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
_USERS_OWN = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit")
_ORPHAN_S = 86_400.0  # a recording without its command (the start was interrupted) is deleted after a day


def cache_dir() -> Path:
    explicit = os.environ.get("SPARKPOINT_CACHE_DIR")
    if explicit:
        return Path(explicit) / "jvm"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sparkpoint" / "jvm"


def conf_dir(spark_home: str) -> Path:
    """Spark's configuration directory, first on the driver's class path."""
    return Path(os.environ.get("SPARK_CONF_DIR") or os.path.join(spark_home, "conf"))


def _java() -> str | None:
    """The ``java`` Spark's launch script runs: ``$JAVA_HOME/bin/java``, else the one on the path."""
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else shutil.which("java")


def _key(java: str, spark_home: str, extra_class_path: str) -> str:
    h = hashlib.sha256()
    real = os.path.realpath(java)
    st = os.stat(real)
    home = os.path.realpath(spark_home)  # the class path an archive was recorded with must be the JVM's
    h.update(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{home}\0{conf_dir(spark_home)}\0{extra_class_path}".encode())
    for jar in sorted((Path(spark_home) / "jars").glob("*.jar")):
        h.update(f"\0{jar.name}\0{jar.stat().st_size}".encode())
    return h.hexdigest()[:20]


def _users_own(spark_home: str, user_options: str) -> bool:
    """Whether the user's driver options name an archive of their own."""
    given = f"{user_options} {os.environ.get('SPARK_SUBMIT_OPTS', '')}"
    with contextlib.suppress(OSError):
        given += (conf_dir(spark_home) / "spark-defaults.conf").read_text(errors="replace")
    return any(flag in given for flag in _USERS_OWN)


def _full_dirs(spark_home: str, extra_class_path: str) -> bool:
    """Whether a directory on the driver's class path holds files (a JVM then refuses to record an archive)."""
    entries = [str(conf_dir(spark_home)), *filter(None, extra_class_path.split(os.pathsep))]
    return any(os.path.isdir(e) and any(os.scandir(e)) for e in entries)


def driver_options(spark_home: str, user_options: str = "", extra_class_path: str = "") -> tuple[str, Path | None]:
    """The driver JVM's options for the archive (``""``: none) and the file it records one into at its exit, if it
    does (its command goes beside it, :func:`record_command`)."""
    java = _java()
    if java is None or not os.path.isdir("/proc/self") or _users_own(spark_home, user_options):
        return "", None
    try:
        directory = cache_dir()
        key = _key(java, spark_home, extra_class_path)
        archive = directory / f"{key}.jsa"
        recording_now = directory.is_dir() and _settle(directory, key, archive)
        if archive.exists():
            return _options("SharedArchiveFile", archive), None
        if recording_now or _full_dirs(spark_home, extra_class_path):
            return "", None
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK):
            return "", None
        recording = directory / f"{key}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        return f"{_options('ArchiveClassesAtExit', recording)} -XX:+VerifySharedSpaces", recording
    except (OSError, ValueError) as e:  # no cache to use: the JVM starts as it would without
        logger.info("no class data sharing archive for Spark's JVM: %s", e)
        return "", None


def _options(flag: str, path: Path) -> str:
    """``-XX:<flag>=<path>`` quoted for Spark's launcher (a path may hold spaces), and the archive's messages off."""
    if '"' in str(path) or "\\" in str(path):
        raise ValueError(f"cannot quote {path} for the JVM's options")
    return f'-XX:{flag}="{path}" {_QUIET}'


def record_command(recording: Path, jvm_pid: int) -> None:
    """Keep the pid and command line of the JVM recording ``recording``: the recording is done once that JVM is
    gone, and is checked with the same command."""
    command = Path(f"{recording}.cmd")
    try:
        with open(f"/proc/{jvm_pid}/cmdline", "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
        partial = command.with_name(f".{command.name}")
        partial.write_text(json.dumps({"pid": jvm_pid, "argv": argv}))
        os.replace(partial, command)  # a start settling recordings never reads it half written
    except OSError as e:  # without it the recording is never used (and is deleted in a day)
        logger.info("cannot keep the command of Spark's JVM (pid %d): %s", jvm_pid, e)


def _recording_by(pid: int, recording: Path) -> bool:
    """Whether process ``pid`` is alive and is the JVM recording ``recording`` (not another that took its pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return str(recording).encode() in f.read()
    except OSError:
        return False


def _settle(directory: Path, key: str, archive: Path) -> bool:
    """Recordings whose JVM is gone: the first a JVM of its command maps moved into place (if none is), the others
    deleted. Whether a JVM is recording one still."""
    recording_now = False
    for command in sorted(directory.glob(f"{key}.*.tmp.cmd")):
        recording = Path(str(command)[: -len(".cmd")])
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            recorded = json.loads(command.read_text())
            if _recording_by(int(recorded["pid"]), recording):
                recording_now = True
                continue
            if recording.exists() and not archive.exists() and _maps(recording, recorded["argv"]):
                os.replace(recording, archive)
                logger.info("Spark's JVM maps its classes from %s from now on", archive)
        recording.unlink(missing_ok=True)
        command.unlink(missing_ok=True)
    now = time.time()
    for recording in directory.glob(f"{key}.*.tmp"):  # their start was interrupted before the command was kept
        with contextlib.suppress(OSError):
            if not Path(f"{recording}.cmd").exists() and now - recording.stat().st_mtime > _ORPHAN_S:
                recording.unlink()
    return recording_now


def _maps(recording: Path, argv: list[str]) -> bool:
    """Whether a JVM of the recorded command (its options, without its main class) maps ``recording`` and finds
    its checksums right."""
    options: list[str] = []
    rest = iter(argv[1:])
    for arg in rest:
        if not arg.startswith("-"):
            break  # the main class: what follows is the application's
        if "ArchiveClassesAtExit" in arg or "SharedArchiveFile" in arg or arg.startswith("-agentlib"):
            continue
        options.append(arg)
        if arg in ("-cp", "-classpath", "--class-path", "--add-opens", "--add-exports", "--add-modules"):
            options.append(next(rest, ""))
    crash = recording.with_suffix(".crash")  # a JVM that cannot map it may die: its report goes there, not to cwd
    check = [argv[0], *options, "-Xshare:on", "-XX:+VerifySharedSpaces", f"-XX:SharedArchiveFile={recording}"]
    try:
        done = subprocess.run(
            [*check, f"-XX:ErrorFile={crash}", "-XX:-CreateCoredumpOnCrash", "-version"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        crash.unlink(missing_ok=True)
    return done.returncode == 0
