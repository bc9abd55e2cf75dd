"""The Spark session the pipeline jobs run on: local mode on this machine by default, any
cluster through `--master` or spark-submit.

PySpark is imported here and only here among the job modules' import paths, lazily, so the
broker and the rest of the CLI never load it."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from lakelog.pipeline import spark_quiet

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?"
    r"|local-cluster\[\d+,\s*\d+,\s*\d+\]"
    r"|yarn"
    r"|(spark|k8s|mesos)://\S+"
)
MASTER_FORMS = (
    "local, local[N], local[*], local[N,M], spark://HOST:PORT, yarn, k8s://..., mesos://..."
)


def check_master(master: str | None) -> None:
    """ValueError unless `master` is a Spark master URL Spark accepts (None: the default),
    so a typo ends before a JVM starts."""
    if master is not None and not _MASTER.fullmatch(master.strip()):
        raise ValueError(f"unknown Spark master {master!r}: use {MASTER_FORMS}")


def resolve_master(master: str | None) -> str | None:
    """The master to set on the builder: the given one; else local[*], except under
    spark-submit (None: keep spark-submit's)."""
    if master:
        return master
    from lakelog.spark.session_start import under_spark_submit

    return None if under_spark_submit() else DEFAULT_MASTER


def build_session(
    master: str | None = None, app_name: str = "lakelog-pipeline", ship: bool = True
) -> SparkSession:
    """A SparkSession for a job (or the existing one, which `getOrCreate` returns).

    Loopback and no UI in local mode: a laptop or CI box needs no network setup and no
    port; executors run this interpreter, so they import the same lakelog. The session
    starts through `lakelog.spark.get_or_create`, which makes it start faster. Spark's
    own logging is errors only unless `lakelog --debug` (`spark_quiet`).

    On any other master the executors are other machines: with `ship`, Lakelog goes to them
    as an archive (`pack_env`), and before any job the workers are asked to import it
    (`worker_check`), so a cluster without it fails in one line, not with a JVM stack."""
    resolved = resolve_master(master)
    local = resolved is None or resolved.startswith("local")
    loopback = local or _on_loopback(resolved)  # the driver listens where the master is
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if resolved is not None:
        builder = builder.master(resolved)
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    if loopback:
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
            "spark.driver.host", "127.0.0.1"
        )
    if not local and ship and resolved is not None:
        for key, value in _ship_confs().items():
            builder = builder.config(key, value)
    from pyspark import SparkContext

    from lakelog.spark.session_start import get_or_create, under_spark_submit

    if under_spark_submit() or SparkContext._gateway is not None:
        session = get_or_create(builder)  # the JVM is started: its log set-up stays
    else:
        own = str(getattr(builder, "_options", {}).get(spark_quiet.JAVA_OPTIONS_KEY, ""))
        builder = builder.config(spark_quiet.JAVA_OPTIONS_KEY, spark_quiet.java_options(own))
        with spark_quiet.jvm_stderr_filtered():
            session = get_or_create(builder)
    session.sparkContext.setLogLevel("WARN" if spark_quiet.verbose else "ERROR")
    if not local:
        from lakelog.spark.worker_check import check_workers

        try:
            check_workers(session)
        except BaseException:
            session.stop()
            raise
    return session


def _on_loopback(master: str | None) -> bool:
    """A spark:// master on 127.0.0.1 or localhost: the whole cluster is this machine."""
    found = re.match(r"spark://(127\.0\.0\.1|localhost)[:/]", master or "")
    return found is not None


def _ship_confs() -> dict[str, str]:
    """spark.archives with Lakelog's archive (built once into the cache), unless the Spark
    defaults already ship archives (spark-defaults.conf): those are the operator's choice."""
    if _spark_defaults_set("spark.archives"):
        return {}
    from lakelog.pipeline.pack_env import cached_pack, ship_confs
    from lakelog.spark.jvm_cache import cache_root

    root = cache_root()
    cache = root / "executor-env" if root is not None else Path(tempfile.gettempdir())
    return ship_confs(cached_pack(cache))


def _spark_defaults_set(key: str) -> bool:
    home = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if "SPARK_HOME" in os.environ else ""
    )
    defaults = Path(home) / "spark-defaults.conf" if home else None
    if defaults is None or not defaults.is_file():
        return False
    return any(line.split(maxsplit=1)[:1] == [key] for line in defaults.read_text().splitlines())
