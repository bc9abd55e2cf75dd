"""Mirroring from a secured source: a SASL_SSL Lakelog cluster (SCRAM-SHA-512, its own
CA) to a PLAINTEXT destination, set up with `lakelog mirror create --source-config-file`
(a Kafka-style properties file) plus `--source-config` overrides. Records land at the
same offsets; `describe` masks the password; a wrong password is reported, not hidden."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_fixtures import BrokerFactory
from e2e_harness import wait_until
from mirror_support import FAST_MIRROR, end_offsets, mirror_cli, read_log, wait_states
from security_support import USERS, SecureFactory, secure_broker

__all__ = ["secure_broker"]  # the fixture, used by name

PARTITIONS = 2
PER_PARTITION = 40


def _properties(path: Path, ca: Path, password: str) -> Path:
    path.write_text(
        "# the source cluster, as Kafka's --command-config would say it\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="mirror" password="{password}";\n'
        f"ssl.ca.location={ca}\n"
    )
    return path


def test_mirror_from_sasl_ssl_source(
    secure_broker: SecureFactory, broker_factory: BrokerFactory, topic_name: str, tmp_path: Path
) -> None:
    source, pki, _ = secure_broker("SASL_SSL", GROUP_INITIAL_REBALANCE_DELAY_MS=100)
    dest = broker_factory(FAST_MIRROR, metrics=True)
    client = {
        "bootstrap.servers": source.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": USERS["alice"],
        "ssl.ca.location": str(pki.ca),
    }
    admin = AdminClient(client)
    for future in admin.create_topics([NewTopic(topic_name, PARTITIONS)]).values():
        future.result(30)
    producer = Producer({**client, "enable.idempotence": True, "linger.ms": 5})
    written: dict[tuple[int, int], bytes] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        written[(msg.partition(), msg.offset())] = msg.value()  # type: ignore[attr-defined]

    for i in range(PER_PARTITION * PARTITIONS):
        producer.produce(
            topic_name,
            value=f"secret-{i}".encode(),
            partition=i % PARTITIONS,
            on_delivery=delivered,
        )
    assert producer.flush(30) == 0

    props = _properties(tmp_path / "source.properties", pki.ca, USERS["mirror"])
    mirror_cli(
        dest,
        "create",
        "secure",
        "--source",
        source.bootstrap,
        "--source-config-file",
        str(props),
        "--source-config",
        "sasl.mechanism=SCRAM-SHA-512",  # the flag wins over the file
        "--topic",
        topic_name,
    )
    wait_states(dest, "secure", topic_name, {p: "MIRRORING" for p in range(PARTITIONS)})
    wait_until(
        lambda: (
            end_offsets(dest.bootstrap, topic_name, PARTITIONS)
            == {p: PER_PARTITION for p in range(PARTITIONS)}
        ),
        60,
        "the copy to catch up",
    )
    copied = read_log(dest.bootstrap, topic_name, PARTITIONS)
    assert {k: v for k, (_, v) in copied.items()} == written

    shown = mirror_cli(dest, "describe", "secure", "--json").stdout
    settings = json.loads(shown)["settings"]
    assert settings["source.security.protocol"] == "SASL_SSL"
    assert settings["source.sasl.mechanism"] == "SCRAM-SHA-512"
    assert settings["source.sasl.jaas.config"] == "********"
    assert USERS["mirror"] not in shown

    bad_props = _properties(tmp_path / "bad.properties", pki.ca, "wrong-password")
    created = mirror_cli(
        dest,
        "create",
        "wrong",
        "--source",
        source.bootstrap,
        "--source-config-file",
        str(bad_props),
        "--source-config",
        "sasl.mechanism=SCRAM-SHA-512",
        "--topic",
        topic_name,
    )
    assert "SASL_AUTHENTICATION_FAILED" in created.stdout
    assert "wrong-password" not in created.stdout
    checked = mirror_cli(dest, "validate", "wrong", check=False)
    assert checked.returncode == 1
    assert "SASL_AUTHENTICATION_FAILED" in checked.stdout


def test_create_refuses_unusable_settings(broker_factory: BrokerFactory) -> None:
    dest = broker_factory()
    done = mirror_cli(
        dest,
        "create",
        "nope",
        "--source",
        "127.0.0.1:1",
        "--source-config",
        "security.protocol=SASL_SSL",
        "--source-config",
        "sasl.password=hunter2",
        check=False,
    )
    assert done.returncode != 0
    assert "needs sasl.username" in done.stderr and "hunter2" not in done.stderr
