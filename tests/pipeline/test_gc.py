"""GC on local Spark: brokers killed between upload and commit leave orphans; gc finds
them and deletes them only once past the grace period, deletes files marked for deletion
past theirs, and never deletes an object the coordinator still uses: afterwards the store
holds exactly the coordinator's live objects and every record is still readable."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, kafka_admin, make_records, now_ms, wait_until
from pipeline_clients import as_produced, consume, produce
from pyspark.sql import SparkSession

from lakelog.coordinator.pipeline_types import FileInfo
from lakelog.pipeline.gc import run_gc
from pipeline_jobs import run_job, stored_objects, with_coordinator

PARTITIONS = 2
BROKER_ENV = {
    "FILE_DELETE_GRACE_MS": 3_600_000,  # the broker's cleaner leaves marked files
    "PRODUCE_INLINE": False,  # the object path: the tests watch uploads and WAL objects
}

pytestmark = pytest.mark.timeout(300)


def files(broker: BrokerProcess) -> dict[str, FileInfo]:
    infos = with_coordinator(broker, lambda c: c.list_file_infos("", "", 100_000))
    return {f.object_key: f for f in infos}


def orphan_by_crash(broker: BrokerProcess, topic: str) -> set[str]:
    """Restart the broker so it waits a minute between upload and commit, produce, and
    SIGKILL it once the object is uploaded: the object is never committed."""
    broker.terminate()
    broker.env["FAULT_COMMIT_DELAY_MS"] = 60_000
    broker.start()
    before = broker.wal_objects()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for p in range(PARTITIONS):
        producer.produce(topic, key=b"lost", value=b"never acknowledged", partition=p)
    producer.poll(0)
    uploaded = wait_until(lambda: broker.wal_objects() - before, 30, "the upload")
    broker.kill()
    producer.purge()
    del broker.env["FAULT_COMMIT_DELAY_MS"]
    return uploaded


def test_gc_deletes_orphans_after_grace_and_marked_files(
    broker_factory: BrokerFactory, spark: SparkSession, topic_name: str
) -> None:
    broker = broker_factory(env=BROKER_ENV)
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    base = now_ms() - 60_000
    first = make_records(100, PARTITIONS, base, tag="first")
    produce(broker.bootstrap, topic_name, first)
    first_objects = broker.wal_objects()

    orphans = orphan_by_crash(broker, topic_name) | orphan_by_crash(broker, topic_name)
    broker.start()
    second = make_records(100, PARTITIONS, base + 1000, tag="second")
    offsets = produce(broker.bootstrap, topic_name, second)
    # Everything of the first phase below the log start: its objects get marked.
    from kafka import TopicPartition

    with kafka_admin(broker.bootstrap) as admin:
        admin.delete_records(  # type: ignore[attr-defined]
            {
                TopicPartition(topic_name, p): min(
                    o for o, r in zip(offsets, second, strict=True) if r.partition == p
                )
                for p in range(PARTITIONS)
            }
        )

    known = files(broker)
    before = stored_objects(broker)
    assert orphans and not orphans & set(known)
    assert orphans <= before
    marked = {k for k, f in known.items() if f.state == "deleting"}
    assert marked == first_objects

    dry = run_job(broker, spark, run_gc, dry_run=True, file_delete_grace_ms=0)
    assert (dry.objects_deleted, dry.details["marked files due"]) == (0, len(marked))
    assert stored_objects(broker) == before

    # Orphans younger than the grace period stay; marked files past theirs go.
    young = run_job(broker, spark, run_gc, file_delete_grace_ms=0)
    assert young.details["orphans found"] == 0
    assert young.objects_deleted == len(marked)
    after_first = stored_objects(broker)
    assert after_first == before - marked
    assert not marked & set(files(broker))  # forgotten by the coordinator too

    time.sleep(1.5)
    old = run_job(broker, spark, run_gc, gc_orphan_grace_ms=1000, file_delete_grace_ms=0)
    assert old.details["orphans found"] == len(orphans)
    assert old.objects_deleted == len(orphans)
    after = stored_objects(broker)
    known = files(broker)
    assert after == after_first - orphans
    assert not after - set(known), "orphans left"
    live = {k for k, f in known.items() if f.state == "committed"}
    assert live <= after, "a committed object was deleted"
    print(
        f"\ngc: {old.objects_listed} objects listed, {old.objects_deleted} deleted "
        f"in {old.seconds:.2f} s"
    )

    rows = consume(broker.bootstrap, topic_name, PARTITIONS, len(second))
    assert rows == as_produced(second, offsets)
