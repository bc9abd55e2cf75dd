"""What a pipeline job needs beyond the broker's install, checked before Spark starts.

The broker, the CLI and the console install without PySpark (`pip install lakelog`); the
pipeline and the Spark source come with the `spark` extra, and Spark needs Java 17+. A job
started without either ends with one line that says what to install (and the console's
Pipeline page shows the same line), never an ImportError or a JVM launcher's stack."""

from __future__ import annotations

import importlib.util
import os

from lakelog.util.java import find_java, java_major_version

SPARK_EXTRA = "spark"
INSTALL_SPARK = f"pip install 'lakelog[{SPARK_EXTRA}]'"
MIN_JAVA = 17


def missing_requirement() -> str | None:
    """None when PySpark imports and Java 17+ is there; else the one line to show."""
    if importlib.util.find_spec("pyspark") is None:
        return (
            "the pipeline runs on Spark, and PySpark is not installed: "
            f"{INSTALL_SPARK} (Java {MIN_JAVA}+ is needed too)"
        )
    java = find_java()
    where = "JAVA_HOME" if os.environ.get("JAVA_HOME") else "PATH"
    if java is None:
        return (
            f"the pipeline runs on Spark, which needs Java {MIN_JAVA}+, and no java was "
            f"found on {where}: install a JDK or JRE {MIN_JAVA}+ (Debian: apt-get install "
            f"openjdk-{MIN_JAVA}-jre-headless) or set JAVA_HOME"
        )
    major = java_major_version(java)
    if major is None or major < MIN_JAVA:
        found = "an unknown version" if major is None else f"Java {major}"
        return (
            f"the pipeline runs on Spark, which needs Java {MIN_JAVA}+; {java} is {found}: "
            f"install Java {MIN_JAVA}+ or point JAVA_HOME at one"
        )
    return None
