"""SCRAM users kept in the batch coordinator (KIP-554) against real clients:
confluent-kafka's AdminClient creates a user, who then logs in (SCRAM only: PLAIN knows
the users file, as in Kafka), describe shows mechanisms and iterations (also through
kafka-python's admin), Kafka's error codes for bad alterations, and a deleted user cannot
log in afterwards. Debian's kcat (librdkafka 2.0.2) logs in with PLAIN and SCRAM and
produces and consumes."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from cluster_support import CLUSTER_ENV
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from e2e_fixtures import BrokerFactory, broker_factory
from e2e_harness import BrokerProcess, wait_until
from kafka.admin import KafkaAdminClient
from security_support import USERS, SecureFactory, secure_broker, write_users

from lakelog.admin.client import AdminClient as LakelogAdmin
from lakelog.admin.wire import KafkaError as LakelogError
from lakelog.security.client_config import ClientSecurity
from lakelog.util.errors import ErrorCode

__all__ = ["broker_factory", "secure_broker"]  # the fixtures, used by name

KCAT = shutil.which("kcat")


@pytest.fixture
def secure_users(tmp_path: Path) -> Path:
    return write_users(tmp_path / "users.txt")


def _sasl(broker: BrokerProcess, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient(_sasl(broker, "PLAIN", "alice", USERS["alice"]))


def _alter(admin: AdminClient, alterations: list[Any]) -> dict[str, BaseException | None]:
    futures = admin.alter_user_scram_credentials(alterations, request_timeout=30)
    out: dict[str, BaseException | None] = {}
    for user, future in futures.items():
        try:
            future.result(30)
            out[user] = None
        except KafkaException as exc:
            out[user] = exc
    return out


def _error_code(exc: BaseException | None) -> int | None:
    if exc is None:
        return None
    assert isinstance(exc, KafkaException)
    return int(exc.args[0].code())


def _logs_in(broker: BrokerProcess, topic: str, mechanism: str, user: str, password: str) -> bool:
    """One produce as `user`: True once delivered, False on an authentication error."""
    errors: list[KafkaError] = []
    producer = Producer(
        {
            **_sasl(broker, mechanism, user, password),
            "error_cb": errors.append,
            "message.timeout.ms": 10_000,
            "reconnect.backoff.ms": 500,
        }
    )
    delivered: list[bool] = []
    producer.produce(topic, value=b"hello", on_delivery=lambda e, _m: delivered.append(e is None))
    deadline = time.monotonic() + 20
    while not delivered and time.monotonic() < deadline:
        producer.poll(0.2)
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            producer.purge()
            producer.flush(1)
            return False
    producer.flush(5)
    return bool(delivered and delivered[0])


def test_admin_created_scram_users_log_in_until_deleted(
    secure_broker: SecureFactory, topic_name: str
) -> None:
    broker, _, _ = secure_broker("SASL_PLAINTEXT")
    admin = _admin(broker)
    create_topic_sasl(admin, topic_name)
    assert not _logs_in(broker, topic_name, "SCRAM-SHA-256", "carol", "carol-secret")

    done = _alter(
        admin,
        [
            UserScramCredentialUpsertion(
                "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"carol-secret"
            ),
            UserScramCredentialUpsertion(
                "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"dave-secret"
            ),
        ],
    )
    assert done == {"carol": None, "dave": None}
    assert _logs_in(broker, topic_name, "SCRAM-SHA-256", "carol", "carol-secret")
    assert _logs_in(broker, topic_name, "SCRAM-SHA-512", "dave", "dave-secret")
    assert not _logs_in(broker, topic_name, "SCRAM-SHA-256", "carol", "wrong")
    assert not _logs_in(broker, topic_name, "PLAIN", "carol", "carol-secret")

    described = {
        user: future.result(30)
        for user, future in admin.describe_user_scram_credentials(["carol", "dave"]).items()
    }
    assert [(i.mechanism, i.iterations) for i in described["carol"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]
    assert [(i.mechanism, i.iterations) for i in described["dave"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)
    ]
    everyone = admin.describe_user_scram_credentials().result(30)
    assert set(everyone) == {"carol", "dave"}

    k_admin = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
    )
    try:
        k_described = k_admin.describe_user_scram_credentials(["carol", "nobody"])
    finally:
        k_admin.close()
    assert [i["iterations"] for i in k_described["carol"]["credential_infos"]] == [8192]
    assert k_described["nobody"]["error"] is not None

    done = _alter(admin, [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])
    assert done == {"carol": None}
    wait_until(
        lambda: not _logs_in(broker, topic_name, "SCRAM-SHA-256", "carol", "carol-secret"),
        30,
        "carol refused after the delete",
    )
    assert _logs_in(broker, topic_name, "SCRAM-SHA-512", "dave", "dave-secret")
    assert "SASL SCRAM-SHA-256 authentication failed for user 'carol'" in broker.log_text()


def create_topic_sasl(admin: AdminClient, topic: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, 1)])[topic].result(30)


def test_bad_alterations_get_kafkas_errors(secure_broker: SecureFactory) -> None:
    broker, _, _ = secure_broker("SASL_PLAINTEXT")
    admin = _admin(broker)
    few = UserScramCredentialUpsertion(
        "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw"
    )
    many = UserScramCredentialUpsertion(
        "frank", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 20000), b"pw"
    )
    gone = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)
    twice = [
        UserScramCredentialUpsertion(
            "gina", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw"
        ),
        UserScramCredentialUpsertion(
            "gina", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"pw"
        ),
    ]
    for alterations, user, code in [
        ([few], "erin", KafkaError.UNACCEPTABLE_CREDENTIAL),
        ([many], "frank", KafkaError.UNACCEPTABLE_CREDENTIAL),
        ([gone], "nobody", KafkaError.RESOURCE_NOT_FOUND),
        (twice, "gina", KafkaError.DUPLICATE_RESOURCE),
    ]:
        done = _alter(admin, alterations)
        assert _error_code(done[user]) == code, (user, done)
    with pytest.raises(KafkaException) as info:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(30)
    assert info.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    assert admin.describe_user_scram_credentials().result(30) == {}


def kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None
    return subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=60, check=False)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_logs_in_with_plain_and_scram(secure_broker: SecureFactory, topic_name: str) -> None:
    broker, _, _ = secure_broker("SASL_PLAINTEXT")
    admin = _admin(broker)
    create_topic_sasl(admin, topic_name)
    assert _alter(
        admin,
        [
            UserScramCredentialUpsertion(
                "kc", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"kc-secret"
            )
        ],
    ) == {"kc": None}
    logins = [
        ("PLAIN", "alice", USERS["alice"]),
        ("SCRAM-SHA-256", "alice", USERS["alice"]),
        ("SCRAM-SHA-512", "kc", "kc-secret"),
    ]
    want: list[str] = []
    for mechanism, user, password in logins:
        auth = [
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            f"sasl.mechanisms={mechanism}",
            "-X",
            f"sasl.username={user}",
            "-X",
            f"sasl.password={password}",
        ]
        lines = [f"{mechanism}-{i}" for i in range(5)]
        want += lines
        done = kcat(
            "-b",
            broker.bootstrap,
            *auth,
            "-P",
            "-t",
            topic_name,
            "-p",
            "0",
            stdin="".join(f"{v}\n" for v in lines).encode(),
        )
        assert done.returncode == 0, done.stderr.decode()
        done = kcat("-b", broker.bootstrap, *auth, "-C", "-t", topic_name, "-e", "-o", "beginning")
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().splitlines() == want
    wrong = kcat(
        "-b",
        broker.bootstrap,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-256",
        "-X",
        "sasl.username=alice",
        "-X",
        "sasl.password=wrong",
        "-L",
        "-m",
        "5",
    )
    assert wrong.returncode != 0
    assert b"Authentication failed" in wrong.stderr or b"authentication" in wrong.stderr.lower()


def _connects(bootstrap: str, mechanism: str, user: str, password: str) -> bool:
    """One SASL login (Lakelog's own admin client): True if the broker accepts it."""
    security = ClientSecurity.from_configs(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
    )

    async def attempt() -> bool:
        try:
            client = await LakelogAdmin.connect(bootstrap, timeout=10, security=security)
        except LakelogError as exc:
            assert exc.error == ErrorCode.sasl_authentication_failed, exc
            return False
        await client.close()
        return True

    return asyncio.run(attempt())


def test_every_broker_of_a_cluster_sees_users_come_and_go(
    broker_factory: BrokerFactory, tmp_path: Path, secure_users: Path
) -> None:
    env = {
        **CLUSTER_ENV,
        "LISTENER_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "SASL_USERS": secure_users,
    }
    one, two = (
        broker_factory({**env, "BROKER_ID": i}, data_dir=tmp_path / "cluster") for i in (1, 2)
    )
    assert not _connects(two.bootstrap, "SCRAM-SHA-256", "erin", "erin-secret")  # now cached
    admin = _admin(one)
    alteration = UserScramCredentialUpsertion(
        "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"erin-secret"
    )
    assert _alter(admin, [alteration]) == {"erin": None}
    assert _connects(one.bootstrap, "SCRAM-SHA-256", "erin", "erin-secret")
    wait_until(
        lambda: _connects(two.bootstrap, "SCRAM-SHA-256", "erin", "erin-secret"),
        10,
        "the other broker to know erin",
    )
    deletion = UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)
    assert _alter(_admin(two), [deletion]) == {"erin": None}
    wait_until(
        lambda: not _connects(one.bootstrap, "SCRAM-SHA-256", "erin", "erin-secret"),
        10,
        "the other broker to refuse erin",
    )
