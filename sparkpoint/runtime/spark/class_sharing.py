"""Class data sharing for the JVM of a Spark that sparkpoint starts itself (``-XX:SharedArchiveFile``).

Starting Spark's driver JVM loads and verifies some 8,000 classes from Spark's jars: about 2 s of the ~5 s from
``sparkpoint run`` to a SparkContext on a machine of 2 cores. Java 17 can keep the classes an application loaded
in an archive that later JVMs map instead (a dynamic CDS archive, ``-XX:ArchiveClassesAtExit``). So a driver JVM
started here:

- maps the archive of this Java and these jars if there is one (``<cache>/<key>.jsa``; the key hashes the
  ``java`` binary, Spark's directory and every jar on its class path, so another Spark or Java makes another);
- else records one at its exit (``<key>.<pid>.tmp``, written by the JVM after the job, in the background), unless
  another JVM is recording one now. Its pid and command line go beside it (``.cmd``): a start after that JVM is
  gone checks the recording with a JVM of the same command that must map it (``-Xshare:on ... -version``) and
  only then moves it in place, since a JVM that maps a truncated archive (its recording killed) dies of SIGBUS.

The cache is ``$SPARKPOINT_CACHE_DIR`` or ``$XDG_CACHE_HOME/sparkpoint`` (``~/.cache/sparkpoint``), under
``jvm/``; ``sparkpoint.jvm.class-sharing: false`` turns it off, as does a driver option of the user's naming a
shared archive (``-Xshare``, ``SharedArchiveFile``, ``ArchiveClassesAtExit``). The JVM's own messages about the
archive are off (``-Xlog:cds=off``): an archive that does not fit is simply not used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["CONFIG_KEY", "cache_dir", "driver_options", "record_command"]

logger = logging.getLogger(__name__)

CONFIG_KEY = "sparkpoint.jvm.class-sharing"
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
_USERS_OWN = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit")


def cache_dir() -> Path:
    explicit = os.environ.get("SPARKPOINT_CACHE_DIR")
    if explicit:
        return Path(explicit) / "jvm"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sparkpoint" / "jvm"


def _java() -> str | None:
    """The ``java`` Spark's launch script runs: ``$JAVA_HOME/bin/java``, else the one on the path."""
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else shutil.which("java")


def _key(java: str, spark_home: str, extra_class_path: str) -> str:
    h = hashlib.sha256()
    real = os.path.realpath(java)
    st = os.stat(real)
    home = os.path.realpath(spark_home)  # the class path an archive was recorded with must be the JVM's
    h.update(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{home}\0{extra_class_path}\0".encode())
    jars = Path(spark_home) / "jars"
    for jar in sorted(jars.glob("*.jar")):
        h.update(f"{jar.name}\0{jar.stat().st_size}\0".encode())
    return h.hexdigest()[:20]


def driver_options(spark_home: str, user_options: str, extra_class_path: str = "") -> tuple[str, Path | None]:
    """The driver's Java options with the archive's: ``(options, recording)``, ``recording`` the file the JVM
    records an archive into at its exit (its command goes beside it, :func:`record_command`), if it does."""
    java = _java()
    if java is None or any(flag in user_options for flag in _USERS_OWN):
        return user_options, None
    try:
        directory = cache_dir()
        key = _key(java, spark_home, extra_class_path)
        archive = directory / f"{key}.jsa"
        recording_now = False
        if not archive.exists() and directory.is_dir():
            recording_now = _settle(directory, key, archive)
        if archive.exists():
            return _join(user_options, f"-XX:SharedArchiveFile={archive} {_QUIET}"), None
        if recording_now:
            return user_options, None  # another JVM is recording it
        directory.mkdir(parents=True, exist_ok=True)
        recording = directory / f"{key}.{os.getpid()}.tmp"
        return _join(user_options, f"-XX:ArchiveClassesAtExit={recording} {_QUIET}"), recording
    except OSError as e:  # no cache to use: the JVM starts as it would without
        logger.info("no class data sharing archive for Spark's JVM: %s", e)
        return user_options, None


def _join(user_options: str, ours: str) -> str:
    return f"{user_options} {ours}".strip()


def record_command(recording: Path, jvm_pid: int) -> None:
    """Keep the pid and command line of the JVM recording ``recording``: the recording is done once that JVM is
    gone, and is checked with the same command."""
    try:
        with open(f"/proc/{jvm_pid}/cmdline", "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
        Path(f"{recording}.cmd").write_text(json.dumps({"pid": jvm_pid, "argv": argv}))
    except OSError as e:  # without it the recording is never used (and is deleted once settled)
        logger.info("cannot keep the command of Spark's JVM (pid %d): %s", jvm_pid, e)


def _recording_by(pid: int, recording: Path) -> bool:
    """Whether process ``pid`` is alive and is the JVM recording ``recording`` (not another that took its pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f"ArchiveClassesAtExit={recording}".encode() in f.read()
    except OSError:
        return False


def _settle(directory: Path, key: str, archive: Path) -> bool:
    """Recordings whose JVM is gone: moved into place if a JVM of their command maps them, else deleted. Whether
    a JVM is recording one still."""
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
    return recording_now


def _maps(recording: Path, argv: list[str]) -> bool:
    """Whether a JVM of the recorded command (its options, without its main class) maps ``recording``."""
    options: list[str] = []
    rest = iter(argv[1:])
    for arg in rest:
        if not arg.startswith("-"):
            break  # the main class: what follows is the application's
        if "ArchiveClassesAtExit" in arg or "SharedArchiveFile" in arg:
            continue
        options.append(arg)
        if arg in ("-cp", "-classpath", "--class-path"):
            options.append(next(rest, ""))
    crash = recording.with_suffix(".crash")  # a JVM that cannot map it may die: its report goes there, not to cwd
    check = [argv[0], *options, "-Xshare:on", f"-XX:SharedArchiveFile={recording}", f"-XX:ErrorFile={crash}"]
    try:
        done = subprocess.run([*check, "-XX:-CreateCoredumpOnCrash", "-version"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        crash.unlink(missing_ok=True)
    return done.returncode == 0
