"""A class-data-sharing (CDS) archive for Spark's JVM, so sessions start in about half
the time.

Most of a local Spark session's start-up, and of its first query, is the JVM reading,
parsing and verifying classes from Spark's ~250 jars. Java 13 and later can write the
classes a run loaded to an archive when the JVM exits (`-XX:ArchiveClassesAtExit`) and map
that archive, already parsed, in later runs (`-XX:SharedArchiveFile`). Measured on local[2]
here: session start 6-8 s down to 3.6 s, the first query 3.0 s down to 1.7 s. The one run
that writes the archive is about 5 s slower, once per Java and Spark install.

The archive (about 150 MiB) lives in `~/.cache/lakelog/spark-jvm`; the environment variable
`LAKELOG_SPARK_CACHE` names another directory for it (and `python_launcher`'s), or turns
both off with `off`. The JVM ignores an archive another build or class path wrote; a
damaged one crashes it, so a session that fails to start while mapping one starts again
without it, and the archive is deleted. Only the JVM that PySpark launches is affected:
under spark-submit the JVM is already running."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lakelog.util.java import find_java

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ENV = "LAKELOG_SPARK_CACHE"
OFF = ("off", "0", "false", "no")
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""The JVM warns about every class it cannot archive (those of signed jars); that is
expected and says nothing to a Spark user."""
MIN_ARCHIVE_BYTES = 1 << 20
"""Smaller than any archive of a Spark run (~150 MiB): the write failed."""
WRITE_TIMEOUT_S = 120.0
"""How long a process waits at exit for its JVM to finish writing the archive."""


def cache_root() -> Path | None:
    """Lakelog's Spark start-up files: `LAKELOG_SPARK_CACHE`, else `$XDG_CACHE_HOME/lakelog`
    or `~/.cache/lakelog`; None when `LAKELOG_SPARK_CACHE` turns them off."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in OFF:
        return None
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lakelog"


def cache_dir() -> Path | None:
    """Where archives live, or None when the cache is turned off."""
    root = cache_root()
    return None if root is None else root / "spark-jvm"


@dataclass(frozen=True)
class JvmOptions:
    """What to give the driver JVM, and why."""

    options: str = ""
    """For `spark.driver.extraJavaOptions` ("" when there is nothing to do)."""
    mapped: Path | None = None
    """The archive the JVM maps."""
    writing: Path | None = None
    """Where the JVM writes a new archive as it exits."""


def get_or_create(builder: SparkSession.Builder) -> SparkSession:
    """`builder.getOrCreate()` with the driver JVM mapping this machine's archive, or, when
    there is none yet, writing one as it exits (this process then waits for that at exit,
    once). A JVM already running in this process is returned unchanged. If the JVM fails
    to start while mapping an archive, the archive is deleted and the start retried
    without it: a damaged archive can crash the JVM (SIGBUS) instead of being ignored."""
    from pyspark import SparkContext

    jvm = java_options() if SparkContext._gateway is None else JvmOptions()
    if not jvm.options:
        return builder.getOrCreate()
    key = "spark.driver.extraJavaOptions"
    own = str(getattr(builder, "_options", {}).get(key, ""))  # the caller's, kept
    try:
        session = builder.config(key, f"{own} {jvm.options}".strip()).getOrCreate()
    except Exception:
        if jvm.mapped is None:
            raise
        with contextlib.suppress(OSError):
            jvm.mapped.unlink()
        return builder.config(key, own).getOrCreate()
    if jvm.writing is not None:
        atexit.register(_finish_writing, jvm.writing)
    return session


def archive_path() -> Path | None:
    """This machine's archive (it may not exist yet), or None when the cache is off or
    Java or Spark is not found."""
    directory = cache_dir()
    key = archive_key() if directory is not None else None
    return None if directory is None or key is None else directory / f"{key}.jsa"


def java_options() -> JvmOptions:
    """Map the archive if there is one, else write it, unless another live process is
    writing it already; nothing when the cache is off or Java or Spark is not found."""
    archive = archive_path()
    if archive is None:
        return JvmOptions()
    if archive.is_file():
        # A damaged archive crashes the JVM, whose report would land in the user's cwd.
        crash = f"-XX:ErrorFile={archive.parent / 'hs_err_pid%p.log'}"
        return JvmOptions(f"-XX:SharedArchiveFile={archive} {crash} {QUIET}", mapped=archive)
    directory, key = archive.parent, archive.stem
    _drop_abandoned(directory, key)
    if any(_alive(pid) for _, pid in _writes(directory, key)):
        return JvmOptions()
    writing = directory / f"{key}.{os.getpid()}.writing"
    try:  # the claim (the JVM writes over it as it exits)
        directory.mkdir(parents=True, exist_ok=True)
        writing.touch()
    except OSError:
        return JvmOptions()
    return JvmOptions(f"-XX:ArchiveClassesAtExit={writing} {QUIET}", writing=writing)


def archive_key() -> str | None:
    """Names the archive after what it depends on: the JVM build and Spark's jars (the JVM
    ignores an archive another build or class path wrote, and this one would then never be
    replaced)."""
    java = find_java()
    jars = _spark_jars()
    if java is None or jars is None:
        return None
    libjvm = java.parent.parent / "lib" / "server" / "libjvm.so"
    digest = hashlib.sha256()
    for path in (java, libjvm, *sorted(jars.iterdir())):
        with contextlib.suppress(OSError):
            st = path.stat()
            digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _finish_writing(writing: Path) -> None:
    """At exit: stop Spark and let its JVM exit (PySpark's gateway ends when its stdin
    closes), which writes the archive; then move it into place (atomic, so another process
    sees all of it or none). Kept only if the JVM exited cleanly after writing."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    written = False
    log.info("saving Spark's JVM class archive to %s (once; later sessions start faster)", writing)
    try:
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()
            written = proc.wait(timeout=WRITE_TIMEOUT_S) == 0
    except Exception:  # a cache that could not be written is no error for the job
        written = False
    with contextlib.suppress(OSError):
        if written and writing.stat().st_size >= MIN_ARCHIVE_BYTES:
            os.replace(writing, writing.with_name(writing.name.split(".")[0] + ".jsa"))
        else:
            writing.unlink()


def _spark_jars() -> Path | None:
    home = os.environ.get("SPARK_HOME")
    if home:
        jars = Path(home) / "jars"
    else:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            return None
        jars = Path(spec.origin).parent / "jars"
    return jars if jars.is_dir() else None


def _writes(directory: Path, key: str) -> list[tuple[Path, int]]:
    """Claims to write the archive (or what a process that died left of one), with the
    pid of the process that made them."""
    found = []
    with contextlib.suppress(OSError):
        for path in directory.glob(f"{key}.*.writing"):
            pid = path.name.split(".")[1]
            if pid.isdigit():
                found.append((path, int(pid)))
    return found


def _drop_abandoned(directory: Path, key: str) -> None:
    """Delete archives whose process died before adopting them: they may be partial."""
    for path, pid in _writes(directory, key):
        if not _alive(pid):
            with contextlib.suppress(OSError):
                path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
