"""Limits that keep one client from taking a broker down (issue 12), on a real broker:

- a CreateTopics asking for 16,777,216 partitions is refused at once with POLICY_VIOLATION
  (it used to take 82 s, a 436 MB Metadata answer and 4 GiB), and the partition caps per
  topic, per request and per cluster hold for CreateTopics, CreatePartitions and
  auto-creation;
- connections announcing 100 MiB frames and sending a few bytes cost almost no memory and
  are closed after `request_read_timeout_ms`, while a normal client is served;
- `connections_max_idle_ms` closes an idle connection, not a busy one;
- `max_connections_per_ip` refuses the extra connection with a log line.

Deadlines are generous (the machine is shared); the assertions are on outcomes.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_fixtures import BrokerFactory, running_broker
from e2e_harness import (
    HOST,
    BrokerProcess,
    api_versions_roundtrip,
    create_topic,
    now_ms,
    wait_until,
)
from e2e_wire import (
    WireClient,
    api_versions_v0,
    fetch_v4,
    parse_batch_header,
    parse_records,
    produce_errors,
    produce_v7,
    record_batch,
    request_class,
)

pytestmark = pytest.mark.timeout(180)

MiB = 1024 * 1024
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
POLICY_VIOLATION = 44
EXCESSIVE = "Excessively large number of partitions per request."
HUGE = 16_777_216


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def pid_of(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    return broker.proc.pid


def served(broker: BrokerProcess, topic: str) -> None:
    """Alive, answers ApiVersions on a new connection, and round-trips a record."""
    assert broker.alive(), f"broker died: exit codes {broker.exit_codes}"
    api_versions_roundtrip(broker.port, timeout=10)
    value = f"alive-{now_ms()}".encode()
    with WireClient(broker.port, timeout=30) as client:
        response = client.request(0, 7, produce_v7({topic: {0: record_batch([value], now_ms())}}))
        error, offset = produce_errors(response)[topic, 0]
        assert error == NONE and offset >= 0, (error, offset)
        fetched = client.request(1, 4, fetch_v4(topic, 0, offset))
        (part,) = fetched.responses[0].partitions
        data = bytes(part.records or b"")
        header = parse_batch_header(data)
        assert [r.value for r in parse_records(data[: header.size])][-1:] == [value]


# ------------------------------------------------------------------- admin requests


def create_topics(
    client: WireClient, topics: dict[str, int], validate_only: bool = False
) -> dict[str, tuple[int, str | None]]:
    m = request_class(19, 5)
    body = m.CreateTopicsRequest(
        topics=tuple(
            m.CreatableTopic(
                name=name, num_partitions=count, replication_factor=1, assignments=(), configs=()
            )
            for name, count in topics.items()
        ),
        timeout=datetime.timedelta(seconds=30),
        validate_only=validate_only,
    )
    response = client.request(19, 5, body)
    return {str(t.name): (int(t.error_code), t.error_message) for t in response.topics}


def create_partitions(client: WireClient, topics: dict[str, int]) -> dict[str, tuple[int, str]]:
    m = request_class(37, 2)
    body = m.CreatePartitionsRequest(
        topics=tuple(
            m.CreatePartitionsTopic(name=name, count=count, assignments=None)
            for name, count in topics.items()
        ),
        timeout=datetime.timedelta(seconds=30),
        validate_only=False,
    )
    response = client.request(37, 2, body)
    return {str(r.name): (int(r.error_code), r.error_message) for r in response.results}


def partition_counts(client: WireClient, names: list[str]) -> dict[str, int | str]:
    """Partitions per topic from Metadata v12 (no auto-creation); 'unknown' if none."""
    m = request_class(3, 12)
    body = m.MetadataRequest(
        topics=tuple(m.MetadataRequestTopic(topic_id=None, name=n) for n in names),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    response = client.request(3, 12, body)
    return {
        str(t.name): len(t.partitions) if int(t.error_code) == NONE else "unknown"
        for t in response.topics
    }


def test_huge_create_topics_is_refused_fast(broker: BrokerProcess) -> None:
    """The fuzzer's request on default settings: POLICY_VIOLATION in well under a second
    (generous bound: 10 s), nothing created, the broker serving others throughout."""
    create_topic(broker.bootstrap, "served", partitions=1)
    rss_before = rss_mib(pid_of(broker))
    with WireClient(broker.port, timeout=60) as client:
        started = time.monotonic()
        answer = create_topics(client, {"huge": HUGE})
        took = time.monotonic() - started
        error, message = answer["huge"]
        assert error == POLICY_VIOLATION, answer
        assert message and EXCESSIVE in message, message
        assert took < 10, f"refusal took {took:.1f} s"
        # Kafka's per-request cap: several topics together past it, each under the per-topic
        # cap, are all refused; none is created.
        answer = create_topics(client, {"many-a": 4000, "many-b": 4000, "many-c": 4000})
        assert {e for e, _ in answer.values()} == {POLICY_VIOLATION}, answer
        # One topic past the per-topic cap (5,000).
        error, message = create_topics(client, {"wide": 5001})["wide"]
        assert error == POLICY_VIOLATION and "max_partitions_per_topic" in str(message)
        # Growing an existing topic the same way.
        error, message = create_partitions(client, {"served": HUGE})["served"]
        assert error == POLICY_VIOLATION, (error, message)
        counts = partition_counts(client, ["huge", "many-a", "wide", "served"])
        assert counts == {"huge": "unknown", "many-a": "unknown", "wide": "unknown", "served": 1}
    served(broker, "served")
    grew = rss_mib(pid_of(broker)) - rss_before
    assert grew < 100, f"broker RSS grew {grew:.0f} MiB"


@pytest.fixture(scope="module")
def capped_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(
        Path(tmp_path_factory.mktemp("limits")) / "data",
        {"MAX_PARTITIONS_PER_TOPIC": 50, "MAX_PARTITIONS_PER_REQUEST": 80, "MAX_PARTITIONS": 120},
        "capped",
    ) as proc:
        yield proc


def test_partition_caps_per_topic_request_and_cluster(capped_broker: BrokerProcess) -> None:
    with WireClient(capped_broker.port, timeout=30) as client:
        assert create_topics(client, {"t1": 51})["t1"][0] == POLICY_VIOLATION
        assert create_topics(client, {"t1": 50})["t1"][0] == NONE  # cluster: 50
        # Per request (80): 41 + 40 refuses both, validate_only or not.
        for validate_only in (True, False):
            answer = create_topics(client, {"t2": 41, "t3": 40}, validate_only)
            assert answer["t2"] == answer["t3"], answer
            assert answer["t2"][0] == POLICY_VIOLATION and EXCESSIVE in str(answer["t2"][1])
        # Cluster (120): 40 fits (90), the next 40 would make 130.
        answer = create_topics(client, {"t2": 40, "t3": 40})
        assert answer["t2"][0] == NONE, answer
        assert answer["t3"][0] == POLICY_VIOLATION and "max_partitions" in str(answer["t3"][1])
        # CreatePartitions: per topic, then the cluster.
        assert create_partitions(client, {"t2": 51})["t2"][0] == POLICY_VIOLATION
        assert create_partitions(client, {"t2": 50})["t2"][0] == NONE  # cluster: 100
        assert create_topics(client, {"t4": 21})["t4"][0] == POLICY_VIOLATION
        assert create_topics(client, {"t4": 20})["t4"][0] == NONE  # cluster: 120, full
        assert create_partitions(client, {"t4": 21})["t4"][0] == POLICY_VIOLATION
        counts = partition_counts(client, ["t1", "t2", "t3", "t4"])
        assert counts == {"t1": 50, "t2": 50, "t3": "unknown", "t4": 20}
        # Auto-creation obeys the cluster cap too: the topic stays unknown.
        m = request_class(3, 12)
        response = client.request(
            3,
            12,
            m.MetadataRequest(
                topics=(m.MetadataRequestTopic(topic_id=None, name="auto-topic"),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            ),
        )
        (topic,) = response.topics
        assert int(topic.error_code) == UNKNOWN_TOPIC_OR_PARTITION
    served(capped_broker, "t1")


# ------------------------------------------------------------------- connections


def open_socket(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection((HOST, broker.port), timeout=30)


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True once the broker closes `sock` (EOF or reset) within `seconds`."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1 << 16) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_big_frame_headers_pin_no_memory_and_time_out(broker_factory: BrokerFactory) -> None:
    """Twelve connections each announce a 100 MiB request (the largest allowed) and send
    a few bytes; one more trickles a byte now and then. The broker's RSS stays low (it
    grew by 800 MiB for eight such connections when buffers were allocated up front), a
    normal client is served meanwhile, and every one of them is closed once
    `request_read_timeout_ms` has passed, with a log line."""
    broker = broker_factory({"REQUEST_READ_TIMEOUT_MS": 4000})
    create_topic(broker.bootstrap, "served", partitions=1)
    served(broker, "served")
    rss_before = rss_mib(pid_of(broker))
    hostile = []
    for _ in range(12):
        sock = open_socket(broker)
        sock.sendall(struct.pack(">i", 100 * MiB) + b"\x00\x03\x00\x0c" + b"z" * 200)
        hostile.append(sock)
    trickler = open_socket(broker)
    trickler.sendall(struct.pack(">i", 100 * MiB))
    started = time.monotonic()
    time.sleep(1.0)
    grew = rss_mib(pid_of(broker)) - rss_before
    assert grew < 100, f"broker RSS grew {grew:.0f} MiB for 12 announced 100 MiB frames"
    served(broker, "served")
    # Trickle a byte every 0.5 s: activity must not extend a frame's deadline.
    trickle_closed = False
    while time.monotonic() - started < 60 and not trickle_closed:
        try:
            trickler.sendall(b"t")
        except OSError:
            trickle_closed = True
            break
        time.sleep(0.5)
    assert trickle_closed or closed_within(trickler, 30), "the trickling client was never closed"
    for sock in hostile:
        assert closed_within(sock, 60), "a stalled 100 MiB frame was never closed"
        sock.close()
    trickler.close()
    assert time.monotonic() - started >= 3.5, "closed before the read timeout"
    assert "request_read_timeout_ms" in broker.log_text()
    grew = rss_mib(pid_of(broker)) - rss_before
    assert grew < 100, f"broker RSS grew {grew:.0f} MiB"
    served(broker, "served")


def test_bytes_in_partly_read_requests_are_bounded(broker_factory: BrokerFactory) -> None:
    """Eight connections each send 6 MiB of an announced 100 MiB request and stall, against
    a 16 MiB `queued_max_request_bytes`: the broker holds about the bound (plus at most one
    request past it), not 8 x 6 MiB; a normal client is served; the stalled ones are closed
    by the read timeout."""
    broker = broker_factory({"QUEUED_MAX_REQUEST_BYTES": 16 * MiB, "REQUEST_READ_TIMEOUT_MS": 8000})
    create_topic(broker.bootstrap, "served", partitions=1)
    served(broker, "served")
    rss_before = rss_mib(pid_of(broker))
    chunk = b"\x00\x03\x00\x0c" + b"q" * (6 * MiB - 4)
    stalled = []
    for _ in range(8):
        sock = open_socket(broker)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        sock.sendall(struct.pack(">i", 100 * MiB))
        sock.settimeout(0.5)
        with contextlib.suppress(TimeoutError):
            sock.sendall(chunk)  # blocks once the broker stops reading: that is the bound
        stalled.append(sock)
    time.sleep(1.0)
    served(broker, "served")
    grew = rss_mib(pid_of(broker)) - rss_before
    # 16 MiB bound + one request allowed past it (<= 2 x 6 MiB buffer) + socket buffers.
    assert grew < 60, f"broker RSS grew {grew:.0f} MiB with 48 MiB sent in partial requests"
    assert "queued_max_request_bytes" in broker.log_text(), "the bound was never reached"
    for sock in stalled:
        assert closed_within(sock, 90), "a stalled request was never closed"
        sock.close()
    served(broker, "served")


def test_idle_connection_is_closed(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({"CONNECTIONS_MAX_IDLE_MS": 2000})
    with WireClient(broker.port, timeout=60) as idle, WireClient(broker.port, timeout=60) as busy:
        idle.request(18, 0, api_versions_v0())
        started = time.monotonic()
        # The busy connection asks every 0.3 s for longer than the idle time.
        while time.monotonic() - started < 5:
            busy.request(18, 0, api_versions_v0())
            time.sleep(0.3)
        assert idle.closed_by_peer(timeout=30)
        busy.request(18, 0, api_versions_v0())
    api_versions_roundtrip(broker.port, timeout=10)


def test_connections_per_ip_are_capped(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({"MAX_CONNECTIONS_PER_IP": 4})
    clients = [WireClient(broker.port, timeout=30) for _ in range(4)]
    try:
        for client in clients:
            client.request(18, 0, api_versions_v0())
        with WireClient(broker.port, timeout=30) as extra:
            assert extra.closed_by_peer(timeout=30)
        wait_until(
            lambda: "max_connections_per_ip 4" in broker.log_text(), 30, "the refusal's log line"
        )
        for client in clients:
            client.request(18, 0, api_versions_v0())
        clients.pop().close()

        def admitted() -> bool:
            with WireClient(broker.port, timeout=5) as again:
                again.request(18, 0, api_versions_v0())
                return True

        wait_until(admitted, 30, "a connection once another closed")
    finally:
        for client in clients:
            client.close()
    # Kafka tools see the limits among the broker's configs, under Kafka's names.
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["max.connections.per.ip"].value == "4"
    assert configs["connections.max.idle.ms"].value == "600000"
    assert configs["queued.max.request.bytes"].value == str(256 * MiB)
