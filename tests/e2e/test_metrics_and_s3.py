"""/metrics reports the traffic a broker served, and a broker runs on S3 (moto over HTTP)."""

from __future__ import annotations

import urllib.request

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, wait_until

from tests.support.s3 import ACCESS_KEY, SECRET_KEY, make_bucket, s3_client


def _produce_and_consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []

    def drained() -> bool:
        for message in consumer.consume(1000, 0.5):
            if not message.error():
                values.append(message.value())
        return len(values) >= count

    wait_until(drained, 30, "consume everything produced")
    consumer.close()
    return values


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_endpoint_counts_traffic(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(metrics=True)
    create_topic(broker.bootstrap, "metered", 1)
    values = _produce_and_consume(broker.bootstrap, "metered", 200)
    assert values == [b"v%d" % i for i in range(200)]
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    assert _metric(text, 'lakelog_requests_total{api="produce"') > 0
    assert _metric(text, 'lakelog_requests_total{api="fetch"') > 0
    assert _metric(text, "lakelog_bytes_in_total") > 0
    assert _metric(text, "lakelog_bytes_out_total") > 0
    # Each sealed buffer was PUT as an object or committed inline (produce_inline).
    puts = _metric(text, 'lakelog_object_requests_total{op="put"')
    assert puts + _metric(text, "lakelog_wal_inline_files_total") >= 1
    assert _metric(text, 'lakelog_coordinator_latency_seconds_count{method="commit_file"') >= 1
    assert _metric(text, "lakelog_cache_hits_total") > 0  # tail reads come from the cache
    assert "lakelog_wal_buffer_bytes" in text
    assert 'lakelog_request_latency_seconds_bucket{api="produce"' in text
    assert _metric(text, "lakelog_event_loop_lag_seconds_count") > 0  # sampled every 100 ms


def test_broker_on_s3(broker_factory: BrokerFactory, s3_endpoint: str) -> None:
    bucket = make_bucket(s3_endpoint)
    url = (
        f"s3://{bucket}/cluster-a?endpoint={s3_endpoint}&region=us-east-1"
        f"&access_key_id={ACCESS_KEY}&secret_access_key={SECRET_KEY}"
    )
    # The object path: these light writes would otherwise stay inline in the coordinator.
    broker = broker_factory({"STORAGE_URL": url, "PRODUCE_INLINE": False})
    create_topic(broker.bootstrap, "on-s3", 1)
    values = _produce_and_consume(broker.bootstrap, "on-s3", 300)
    assert values == [b"v%d" % i for i in range(300)]
    listing = s3_client(s3_endpoint).list_objects_v2(Bucket=bucket)  # type: ignore[attr-defined]
    keys = [o["Key"] for o in listing.get("Contents", [])]
    assert keys and all(k.startswith("cluster-a/wal/") for k in keys)
    assert not broker.wal_dir.exists()  # nothing went to the local data dir


def test_group_metrics(broker_factory: BrokerFactory) -> None:
    from kafka import KafkaConsumer

    broker = broker_factory(
        {"GROUP_INITIAL_REBALANCE_DELAY_MS": 100, "GROUP_LAG_INTERVAL_MS": 200}, metrics=True
    )
    create_topic(broker.bootstrap, "lagging", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(100):
        producer.produce("lagging", value=b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = KafkaConsumer(
        "lagging",
        bootstrap_servers=broker.bootstrap,
        group_id="metered",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=30,
    )
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    try:
        got = 0
        while got == 0:
            got = sum(len(v) for v in consumer.poll(1000).values())
        consumer.commit()  # some records stay unread: lag > 0

        def reported() -> bool:
            text = urllib.request.urlopen(url, timeout=5).read().decode()
            return (
                _metric(text, 'lakelog_groups{state="Stable"}') == 1
                and _metric(text, 'lakelog_group_lag{group="metered"') > 0
                and _metric(text, "lakelog_offset_commits_total") >= 1
                and _metric(text, "lakelog_group_rebalances_total") >= 1
            )

        wait_until(reported, 20, "group metrics")
    finally:
        consumer.close()
