"""Finding the Java that Spark will start: the pipeline needs Java 17+ and says so in one
line when it is missing, instead of the JVM launcher's error deep in PySpark."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def find_java() -> Path | None:
    """The `java` Spark's launcher runs: `$JAVA_HOME/bin/java` when JAVA_HOME is set (as
    spark-class does), else the first `java` on PATH; symlinks resolved."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not os.path.exists(found):
        return None
    return Path(os.path.realpath(found))


def java_major_version(java: Path) -> int | None:
    """17 for `openjdk version "17.0.15"`, 8 for `"1.8.0_392"`; None when `java -version`
    fails or prints something else."""
    try:
        done = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = _VERSION.search(done.stderr + done.stdout)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major
