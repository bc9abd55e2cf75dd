"""`lakelog.spark.get_or_create`: the JVM class archive (`jvm_cache`), written once by a
session's JVM as it exits, mapped by the sessions after it, and never the reason a session
fails to start; and Python workers, planning steps included, that import the installed
pyspark (`python_launcher`). Sessions run in fresh interpreters: a JVM runs once per
process, and the archive is written when it exits."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lakelog.spark import jvm_cache, python_launcher

SESSION = """
    import os
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceReader
    from lakelog.spark import get_or_create

    def origin():
        import pyspark
        return "zipped" if ".zip" in (pyspark.__file__ or "") else "installed"

    class Origin(DataSource):  # the schema step runs in a planning process
        @classmethod
        def name(cls):
            return "origin"
        def schema(self):
            return origin() + " string"
        def reader(self, schema):
            return OriginReader()

    class OriginReader(DataSourceReader):  # and this in a task worker
        def read(self, partition):
            yield (origin(),)

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.extraJavaOptions", "-Dlakelog.test=kept"))
    spark = get_or_create(builder)
    print("options:", spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", ""))
    print("count:", spark.range(10).count())
    spark.dataSource.register(Origin)
    df = spark.read.format("origin").load()
    print("planning:", df.columns[0], "tasks:", df.first()[0])
"""


def _session(cache: Path) -> str:
    env = os.environ | {jvm_cache.ENV: str(cache), "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SESSION)],
        cwd=cache.parent,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "count: 10" in done.stdout, done.stdout
    return done.stdout


def test_first_session_writes_the_archive_later_ones_map_it_a_damaged_one_is_dropped(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    first = _session(cache)
    assert "-XX:ArchiveClassesAtExit=" in first
    assert "planning: installed tasks: installed" in first
    archives = list((cache / "spark-jvm").iterdir())
    assert [p.suffix for p in archives] == [".jsa"], archives  # nothing half-written left
    archive = archives[0]
    assert archive.stat().st_size > jvm_cache.MIN_ARCHIVE_BYTES

    second = _session(cache)
    assert f"-XX:SharedArchiveFile={archive}" in second
    assert "-Dlakelog.test=kept" in second  # the caller's own JVM options stay

    # A truncated archive crashes a JVM that maps it (SIGBUS): the session must still
    # start, without the archive, and the archive must go.
    with archive.open("r+b") as f:
        f.truncate(jvm_cache.MIN_ARCHIVE_BYTES)
    _session(cache)
    assert not archive.exists()
    assert not list(tmp_path.glob("hs_err*")), "the JVM's crash report belongs in the cache"


def test_off_leaves_the_jvm_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jvm_cache.ENV, "off")
    assert jvm_cache.cache_dir() is None
    assert jvm_cache.java_options() == jvm_cache.JvmOptions()


def _fake_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Java and a Spark install the key can be computed from, and a cache dir."""
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("")
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_text("1")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    monkeypatch.setenv(jvm_cache.ENV, str(tmp_path / "cache"))
    return jars


def test_key_follows_the_jars_and_the_jvm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jars = _fake_install(tmp_path, monkeypatch)
    key = jvm_cache.archive_key()
    assert key is not None and key == jvm_cache.archive_key()
    (jars / "extra.jar").write_text("2")
    added = jvm_cache.archive_key()
    assert added != key
    libjvm = tmp_path / "jdk" / "lib" / "server" / "libjvm.so"
    libjvm.parent.mkdir(parents=True)
    libjvm.write_text("new build")
    assert jvm_cache.archive_key() not in (key, added)


def test_one_writer_at_a_time_and_abandoned_writes_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_install(tmp_path, monkeypatch)
    archive = jvm_cache.archive_path()
    assert archive is not None
    first = jvm_cache.java_options()
    assert first.writing == archive.parent / f"{archive.stem}.{os.getpid()}.writing"
    assert first.options.startswith(f"-XX:ArchiveClassesAtExit={first.writing} ")

    # This process is alive and has claimed the write (an empty file the JVM writes over
    # as it exits): nobody else writes meanwhile.
    assert first.writing.is_file()
    assert jvm_cache.java_options() == jvm_cache.JvmOptions()

    # A writer that died without adopting its archive leaves a file that may be partial.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True, check=True).stdout.strip()  # fmt: skip
    first.writing.unlink()
    abandoned = archive.parent / f"{archive.stem}.{dead}.writing"
    abandoned.write_bytes(b"partial")
    again = jvm_cache.java_options()
    assert not abandoned.exists()
    assert again.writing == first.writing

    archive.write_bytes(b"x")
    mapped = jvm_cache.java_options()
    assert mapped.mapped == archive and mapped.writing is None
    assert mapped.options.startswith(f"-XX:SharedArchiveFile={archive} ")


def test_launcher_drops_only_the_installed_pyspark_zips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(jvm_cache.ENV, str(tmp_path / "cache"))
    path = python_launcher.launcher()
    assert path is not None and python_launcher.launcher() == path  # written once
    zips = python_launcher.redundant_zips()
    assert Path(zips[0]).name == "pyspark.zip"
    odd = str(tmp_path / "a dir with * and 'quotes'")
    kept = [odd, "/elsewhere/pyspark.zip", ""]
    env = os.environ | {"PYTHONPATH": ":".join([zips[0], odd, *zips[1:], *kept[1:]])}
    code = "import os, sys; print(os.environ['PYTHONPATH']); print(sys.executable)"
    out = subprocess.run(
        [str(path), "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == ":".join(kept[:2])
    assert os.path.realpath(out[1]) == os.path.realpath(sys.executable)

    monkeypatch.setenv(jvm_cache.ENV, "off")
    assert python_launcher.launcher() is None
