"""Keeping Spark's start-up and log noise out of a pipeline job's output.

A job's driver JVM would print log4j's default-profile banner, "Setting default log level",
WARN lines (NativeCodeLoader...) and the JVM's own "WARNING: Using incubator modules" before
the job's summary. By default the JVM gets `log4j2-quiet.properties` (errors only), and its
stderr passes through a filter that drops the lines printed outside log4j (`NOISE`).
`lakelog --debug` (or the caller's own `-Dlog4j2.configurationFile`) keeps all of it."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

LOG4J2_FILE = Path(__file__).with_name("log4j2-quiet.properties")
JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"
NOISE = re.compile(
    rb"^(WARNING: Using incubator modules: "
    rb'|Setting default log level to "'
    rb"|To adjust logging level use sc\.setLogLevel)"
)
"""Lines of the JVM's stderr dropped by default, printed around logging, not through it:
the module system's, whenever Spark adds jdk.incubator.vector (no option turns it off),
and Spark's note that a shell (PySpark counts as one) logs at WARN, whatever log4j says."""

verbose = False
"""Set by `lakelog --debug`: Spark logs as it would on its own."""


def java_options(existing: str) -> str:
    """The driver's extra Java options with the quiet log4j2 configuration added, unless
    verbose or the caller chose a log4j configuration already."""
    if verbose or "log4j2.configurationFile" in existing or not LOG4J2_FILE.is_file():
        return existing
    return f"{existing} -Dlog4j2.configurationFile={LOG4J2_FILE.as_uri()}".strip()


@contextlib.contextmanager
def jvm_stderr_filtered() -> Iterator[None]:
    """While the JVM starts (it inherits this process's fd 2), fd 2 is a pipe read by a
    daemon thread that forwards every line but `NOISE` to the real stderr, for as long as
    the JVM (and the Python workers it starts) write there. Python's own stderr is restored
    on exit. Nothing changes when verbose or when fd 2 cannot be duplicated."""
    if verbose:
        yield
        return
    try:
        sys.stderr.flush()
        read_fd, write_fd = os.pipe()
        real = os.dup(2)
    except OSError:
        yield
        return
    os.dup2(write_fd, 2)
    os.close(write_fd)
    threading.Thread(target=_forward, args=(read_fd, real), name="jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(real, 2)


def _forward(read_fd: int, real: int) -> None:
    """Copy the JVM's stderr lines to the real stderr, dropping the noise, until EOF."""
    with os.fdopen(read_fd, "rb") as pipe:
        for line in iter(pipe.readline, b""):
            if NOISE.match(line):
                continue
            with contextlib.suppress(OSError):
                os.write(real, line)
