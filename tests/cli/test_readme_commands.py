"""Every command block of the README and of each docs/*.md, run as written, top to bottom,
against real brokers: the test fails if any command exits non-zero, so the documentation
cannot rot again. Each document runs on its own brokers, in its own directory.

What the test changes, and only that: each document starts with a broker running as `make
serve` leaves one (`lakelog serve --listen 127.0.0.1:9092 --data-dir ./lakelog-data`), since
the documents assume it; addresses and paths are mapped onto this test's (`127.0.0.1:9092`,
also the `lakelog` commands' default address, onto a free port, `DEST`/`SRC` onto clusters of
their own, the PostgreSQL/S3 URLs and the CA path onto its servers and files); the state a
block's prose assumes is made before it (`my-group` has committed offsets, the mirror's source
has `orders` and a `payments.*` topic, `server.pem`/`users.txt` exist); each `lakelog serve`
line replaces the broker the previous one started, as the documents' alternatives do. `make`
lines are not run (`make test` is this suite), nor `source .venv/bin/activate` (the test puts
the venv's commands first on PATH, which is what it does).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from e2e_backends import scale_out
from e2e_fixtures import BrokerFactory, broker_factory  # noqa: F401 (fixture)
from security_support import (  # noqa: F401 (fixture)
    USERS,
    SecureFactory,
    make_pki,
    secure_broker,
    write_users,
)

from tests.support.ports import free_ports as _free_ports

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w*)\s*$")
SHELLS = {"", "sh", "bash", "shell", "console"}


NOT_RUN = re.compile(r"^(make |(source|\.) \.venv/bin/activate\b)")
"""Lines of a command block the test does not run (see the module's docstring)."""


def readme_commands(text: str) -> list[str]:
    """The shell commands of a document's code blocks that run `lakelog` or `kcat`, in order:
    a command spans its continuation lines (`\\`) and its here-document."""
    commands: list[str] = []
    lang: str | None = None  # the open block's language (None: outside any block)
    lines: list[str] = []
    for line in text.splitlines():
        fence = FENCE.match(line)
        if fence and lang is None:
            lang, lines = fence.group(1), []
        elif fence:
            block = _split(lines) if lang in SHELLS else []
            if any(re.search(r"\b(lakelog|kcat)\b", c) for c in block):
                commands.extend(c for c in block if not NOT_RUN.match(c))
            lang = None
        elif lang is not None:
            lines.append(line)
    return commands


def _split(lines: list[str]) -> list[str]:
    commands: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = [line]
        while command[-1].endswith("\\") and i < len(lines):
            command.append(lines[i])
            i += 1
        heredoc = re.search(r"<<\s*'?(\w+)'?", command[0])
        if heredoc:
            while i < len(lines):
                command.append(lines[i])
                i += 1
                if command[-1].strip() == heredoc.group(1):
                    break
        commands.append("\n".join(command))
    return commands


def documents() -> list[Path]:
    """The README and every docs/*.md that holds a command to run (a document without one
    contributes no test)."""
    paths = [README, *sorted(DOCS.glob("*.md"))]
    return [p for p in paths if readme_commands(p.read_text())]


def test_readme_blocks_are_found() -> None:
    quickstart = readme_commands(README.read_text())
    assert any("topics" in c and "create" in c for c in quickstart), quickstart
    assert any("console-producer" in c for c in quickstart), quickstart
    everything = [c for p in documents() for c in readme_commands(p.read_text())]
    assert any("mirror" in c for c in everything) and any("kcat" in c for c in everything)
    assert any("pipeline" in c for c in everything) and any("groups" in c for c in everything)
    notation = [c for c in everything if re.search(r"\[--|\w\|\w", c.split("#")[0])]
    assert not notation, f"documented commands must be runnable shell, not notation: {notation}"


def test_documents_link_nothing_users_lack() -> None:
    """What ships points at nothing outside the repository (a relative link that leaves it)."""
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        assert "../shared" not in path.read_text(), f"{path.name} names ../shared"
        for target in re.findall(r"\]\(([^)#\s]+)", path.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = (path.parent / target).resolve()
            assert resolved.is_relative_to(REPO), f"{path.name} links outside the repo: {target}"


@dataclass
class Served:
    """The `lakelog serve` the README started last."""

    proc: subprocess.Popen[bytes] | None = None
    log: list[Path] = field(default_factory=list)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"lakelog serve exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port} after {timeout} s")


@pytest.fixture
def served() -> Iterator[Served]:
    current = Served()
    yield current
    current.stop()


def _admin(bootstrap: str) -> object:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _ensure_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    # Create rather than list first: a listing may come from a broker whose view lags.
    futures = admin.create_topics([NewTopic(n, 3) for n in names])  # type: ignore[attr-defined]
    for future in futures.values():
        try:
            future.result(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def _commit_group(bootstrap: str, group: str, topic: str) -> None:
    """`my-group`: a group with committed offsets and no active member (as after its
    consumers stopped), which `groups describe` and `reset-offsets` expect."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                offsets = [TopicPartition(topic, p, 0) for p in range(3)]
                consumer.commit(offsets=offsets, asynchronous=False)
                return
            except KafkaException:
                # A topic created a moment ago through another broker: not known yet.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def _share_group(bootstrap: str, group: str, topic: str) -> None:
    """`work`: a share group that has consumed `topic` and has no member left (as after
    its consumers stopped), which `share-groups --describe` and `--reset-offsets` expect."""
    from confluent_kafka import Producer, ShareConsumer

    producer = Producer({"bootstrap.servers": bootstrap})
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    try:
        got = 0
        while got == 0:
            producer.produce(topic, value=b"job")
            producer.flush(10)
            got = sum(1 for m in consumer.poll(1.0) or () if m.error() is None)
            if time.monotonic() > deadline:
                raise TimeoutError(f"share group {group} received nothing from {topic}")
        consumer.commit_sync()
    finally:
        consumer.close()


@pytest.mark.parametrize("document", documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_documented_command_runs(
    document: Path,
    tmp_path: Path,
    served: Served,
    broker_factory: BrokerFactory,  # noqa: F811
    secure_broker: SecureFactory,  # noqa: F811
) -> None:
    if shutil.which("kcat") is None:
        pytest.fail("kcat is not installed (`make test` installs Debian's kcat)")
    commands = readme_commands(document.read_text())
    text = "\n".join(commands)
    work = tmp_path / "work"
    work.mkdir()
    port = _free_ports(3)
    bootstrap = f"127.0.0.1:{port}"
    console, metrics = _free_ports(1), _free_ports(1)
    mapping = {
        "127.0.0.1:9092": bootstrap,
        "127.0.0.1:8080": f"127.0.0.1:{console}",  # the web console's
        "0.0.0.0:8080": f"0.0.0.0:{console}",
        "127.0.0.1:9100": f"127.0.0.1:{metrics}",  # a broker's /metrics
    }
    # The clusters and servers a document names are started only for a document naming them.
    source = broker_factory() if "SRC:9092" in text else None
    if "DEST:9092" in text:  # the mirror's DR cluster, a cluster of its own
        mapping["DEST:9092"] = broker_factory().bootstrap
    if source is not None:
        mapping["SRC:9092"] = source.bootstrap
    if "SRC:9093" in text:
        secure_source, pki, _ = secure_broker("SASL_SSL")
        mapping["SRC:9093"] = secure_source.bootstrap
    else:
        pki = make_pki(tmp_path / "doc-pki")
    if "s3://lakelog/cluster" in text or "postgresql://lakelog@" in text:
        merge_backend = scale_out(tmp_path / "merge-cluster")
        mapping["s3://lakelog/cluster"] = shlex.quote(merge_backend.storage_url)
        mapping["postgresql://lakelog@127.0.0.1:5432/lakelog"] = shlex.quote(
            merge_backend.coordinator_url
        )
    mapping |= {
        "/etc/lakelog/source-ca.pem": str(pki.ca),
        "/etc/lakelog/ca.pem": str(pki.ca),  # the SASL_SSL listener's CA (its server.pem)
        "sasl.password=...": f"sasl.password={USERS['mirror']}",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["LAKELOG_BOOTSTRAP_SERVERS"] = bootstrap  # where `lakelog` commands go without -b
    ran: list[str] = []
    if not commands[0].startswith("lakelog serve"):
        _serve(MAKE_SERVE.replace("127.0.0.1:9092", bootstrap), served, work, env, port)
    for command in commands:
        for written, here in mapping.items():
            command = command.replace(written, here)
        _prepare(command, bootstrap, source.bootstrap if source else None, work, pki, ran)
        if "lakelog serve" in command:
            _serve(command, served, work, env, port)
            ran.append(command)
            continue
        if command.startswith("lakelog console "):
            _console(command, work, env)
            ran.append(command)
            continue
        result = subprocess.run(
            ["bash", "-c", command],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, (
            f"{document.name}: command failed ({result.returncode}):\n{command}\n"
            f"stdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-2000:]}"
        )
        ran.append(command)
    assert len(ran) == len(commands)


MAKE_SERVE = "lakelog serve --listen 127.0.0.1:9092 --data-dir ./lakelog-data"
"""The broker `make serve` starts (the Makefile's `serve` target), which documents assume."""


def _serve(command: str, served: Served, work: Path, env: dict[str, str], port: int) -> None:
    """Start `command`, a `lakelog serve` line, in place of the broker started before."""
    served.stop()
    brokers = re.search(r"--brokers (\d+)", command)
    listen = {} if "--listen" in command else {"LAKELOG_LISTEN": f"127.0.0.1:{port}"}
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=work,
        env={**env, **listen},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    served.proc = proc
    for offset in range(int(brokers.group(1)) if brokers else 1):
        _wait_listening(port + offset, proc)


def _console(command: str, work: Path, env: dict[str, str]) -> None:
    """Run `command`, a `lakelog console` line (a server: it runs until stopped), until its
    first page answers, then stop it."""
    listen = re.search(r"--listen \S+:(\d+)", command)
    assert listen, f"a documented `lakelog console` names its --listen: {command}"
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_listening(int(listen.group(1)), proc)
        try:
            status = urllib.request.urlopen(
                f"http://127.0.0.1:{listen.group(1)}/", timeout=30
            ).status
        except urllib.error.HTTPError as exc:
            status = exc.code  # 401: the page asks for the console's user
        assert status in (200, 401), f"{command}: the console answered {status}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _prepare(
    command: str, bootstrap: str, source: str | None, work: Path, pki: object, ran: list[str]
) -> None:
    """Make the state a document's prose assumes for `command`."""
    words = command.split()
    if "groups" in words and "my-group" in words and not any("my-group" in c for c in ran):
        _ensure_topics(bootstrap, ["orders"])
        _commit_group(bootstrap, "my-group", "orders")
    elif (
        "orders" in command
        and "create orders" not in command
        and "lakelog serve" not in command
        and "mirror" not in words
        and not ("delete" in words and "topics" in words)
    ):
        _ensure_topics(bootstrap, ["orders"])
    if "share-groups" in words and "work" in words and not any("group work" in c for c in ran):
        _ensure_topics(bootstrap, ["jobs"])
        _share_group(bootstrap, "work", "jobs")
    if "mirror" in words and "create" in words and "dr" in words and source is not None:
        _ensure_topics(source, ["orders", "payments.eu"])
    if "LAKELOG_SSL_CERTIFICATE_LOCATION" in command:
        shutil.copy(pki.server_cert, work / "server.pem")  # type: ignore[attr-defined]
        shutil.copy(pki.server_key, work / "server.key")  # type: ignore[attr-defined]
        write_users(work / "users.txt")
