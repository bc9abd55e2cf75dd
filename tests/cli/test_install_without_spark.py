"""The broker installs and serves without Spark; the pipeline says in one line what it lacks.

`pip install lakelog` must give the broker, the CLI and the console without PySpark (the
`spark` extra adds the pipeline and the Spark source), and a pipeline command run without
PySpark or without Java must end with one line saying what to install, recorded as a failed
run (the console's Pipeline page shows it), never an ImportError or a JVM stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from e2e_harness import api_versions_roundtrip, wait_until
from serve_support import HOST, LAKELOG, clean_env, free_ports, serving

REPO = Path(__file__).resolve().parents[2]
SPARK_PACKAGES = {"pyspark", "pandas", "numpy", "py4j", "pyarrow"}
INSTALL_S = 600.0
"""pip installing the broker's dependencies (from pip's cache when warm, ~20 s)."""


@pytest.fixture(scope="module")
def serve_only_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with `pip install <repo>`, no extras."""
    venv = tmp_path_factory.mktemp("serve-only") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(REPO)],
        capture_output=True,
        text=True,
        timeout=INSTALL_S,
        env=clean_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def installed(venv: Path) -> set[str]:
    listed = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format", "json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return {entry["name"].lower() for entry in json.loads(listed.stdout)}


def test_pip_install_brings_no_spark(serve_only_venv: Path) -> None:
    names = installed(serve_only_venv)
    assert "lakelog" in names
    assert not names & SPARK_PACKAGES, sorted(names & SPARK_PACKAGES)


def wait_answering(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until `serve` answers ApiVersions on `port` (failing with its log if it exits)."""

    def up() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            api_versions_roundtrip(port)
            return True
        except OSError:
            return False

    wait_until(up, 60, f"serve to answer on {port}", interval=0.3)


def pipeline_runs(metrics_port: int) -> list[dict[str, object]]:
    url = f"http://{HOST}:{metrics_port}/pipeline-runs"
    with urllib.request.urlopen(url, timeout=10) as response:
        return list(json.loads(response.read()))


def test_a_broker_without_spark_serves_clients_and_the_pipeline_says_what_to_install(
    serve_only_venv: Path, tmp_path: Path
) -> None:
    port = free_ports(1, also=1000)
    lakelog = str(serve_only_venv / "bin" / "lakelog")
    data = tmp_path / "data"
    args = ["--listen", f"{HOST}:{port}", "--data-dir", str(data)]
    with serving(args, tmp_path, tmp_path / "serve.log", lakelog=lakelog) as proc:
        wait_answering(port, proc, tmp_path / "serve.log")
        bootstrap = f"{HOST}:{port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        for n in range(20):
            producer.produce("no-spark", f"record-{n}".encode())
        assert producer.flush(60) == 0
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["no-spark"])
        got: list[bytes] = []

        def read_all() -> bool:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
            return len(got) == 20

        wait_until(read_all, 60, "20 records back")
        consumer.close()
        assert got == [f"record-{n}".encode() for n in range(20)]

        job = subprocess.run(
            [lakelog, "pipeline", "gc", "--data-dir", str(data)],
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(),
            check=False,
        )
        assert job.returncode == 1
        lines = job.stderr.strip().splitlines()
        assert lines == [
            "error: the pipeline runs on Spark, and PySpark is not installed: "
            "pip install 'lakelog[spark]' (Java 17+ is needed too)"
        ], job.stderr
        runs = pipeline_runs(port + 1000)
        assert runs[0]["job"] == "gc" and runs[0]["outcome"] == "failed"
        assert "lakelog[spark]" in json.loads(str(runs[0]["figures"]))["error"]


def test_a_pipeline_job_without_java_says_so_in_one_line(tmp_path: Path) -> None:
    port = free_ports(1, also=1000)
    data = tmp_path / "data"
    args = ["--listen", f"{HOST}:{port}", "--data-dir", str(data)]
    with serving(args, tmp_path, tmp_path / "serve.log") as proc:
        wait_answering(port, proc, tmp_path / "serve.log")
        for java_home, expected in (
            (str(tmp_path / "no-jdk"), "no java was found on JAVA_HOME"),
            (None, "no java was found on PATH"),
        ):
            env = clean_env()
            if java_home is None:
                env.pop("JAVA_HOME", None)
                env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), "/nowhere"])
            else:
                env["JAVA_HOME"] = java_home
            job = subprocess.run(
                [LAKELOG, "pipeline", "merge", "--data-dir", str(data)],
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
                check=False,
            )
            assert job.returncode == 1
            lines = job.stderr.strip().splitlines()
            assert len(lines) == 1 and expected in lines[0], job.stderr
            assert "Java 17+" in lines[0]
        runs = pipeline_runs(port + 1000)
        assert [r["outcome"] for r in runs[:2]] == ["failed", "failed"]
        assert "Java 17+" in json.loads(str(runs[0]["figures"]))["error"]
