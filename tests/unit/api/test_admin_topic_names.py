"""Topic name rules and CreateTopics planning, as Kafka applies them."""

from __future__ import annotations

import pytest
from kio.schema.create_topics.v7.request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
)

from lakelog.config import Settings
from lakelog.server.api.admin import TopicProblem, collides, plan_topic, topic_name_problem
from lakelog.util.errors import ErrorCode


@pytest.mark.parametrize("name", ["a", "A-b_c.d", "x" * 249, "0", "__consumer_offsets"])
def test_legal_names(name: str) -> None:
    assert topic_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        (None, "empty"),
        (".", '"." or ".."'),
        ("..", '"." or ".."'),
        ("x" * 250, "longer than 249"),
        ("with space", "character other than"),
        ("slash/name", "character other than"),
        ("ümlaut", "character other than"),
        ("tab\t", "character other than"),
    ],
)
def test_illegal_names(name: str | None, fragment: str) -> None:
    problem = topic_name_problem(name)
    assert problem is not None and fragment in problem


def test_dot_underscore_collisions() -> None:
    assert collides("a.b", ["a_b", "c"]) == "a_b"
    assert collides("a_b", ["a.b"]) == "a.b"
    assert collides("a.b", ["a.b"]) is None  # the same name: TOPIC_ALREADY_EXISTS instead
    assert collides("a.b", ["ab"]) is None


def _topic(**fields: object) -> CreatableTopic:
    base: dict[str, object] = {
        "name": "t",
        "num_partitions": -1,
        "replication_factor": -1,
        "assignments": (),
        "configs": (),
    }
    return CreatableTopic(**{**base, **fields})  # type: ignore[arg-type]


def test_defaults_come_from_settings() -> None:
    settings = Settings(num_partitions=4, default_replication_factor=2)
    plan = plan_topic(_topic(), settings)
    assert (plan.num_partitions, plan.replication_factor) == (4, 2)


def test_any_replication_factor_is_accepted() -> None:
    plan = plan_topic(_topic(num_partitions=3, replication_factor=3), Settings())
    assert (plan.num_partitions, plan.replication_factor) == (3, 3)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"num_partitions": 0}, ErrorCode.invalid_partitions),
        ({"num_partitions": -2}, ErrorCode.invalid_partitions),
        ({"replication_factor": 0}, ErrorCode.invalid_replication_factor),
        ({"name": "bad name"}, ErrorCode.invalid_topic_exception),
        (
            {"configs": (CreatableTopicConfig(name="retention.ms", value="soon"),)},
            ErrorCode.invalid_config,
        ),
        (
            {"configs": (CreatableTopicConfig(name="no.such.config", value="1"),)},
            ErrorCode.invalid_config,
        ),
        (
            {"configs": (CreatableTopicConfig(name="retention.ms", value=None),)},
            ErrorCode.invalid_config,
        ),
    ],
)
def test_refused(fields: dict[str, object], error: ErrorCode) -> None:
    with pytest.raises(TopicProblem) as info:
        plan_topic(_topic(**fields), Settings())
    assert info.value.error == error
    assert info.value.message


def test_configs_are_kept() -> None:
    configs = (
        CreatableTopicConfig(name="cleanup.policy", value="compact"),
        CreatableTopicConfig(name="retention.ms", value="1000"),
    )
    plan = plan_topic(_topic(configs=configs), Settings())
    assert plan.configs == {"cleanup.policy": "compact", "retention.ms": "1000"}


def _assign(index: int, *brokers: int) -> CreatableReplicaAssignment:
    return CreatableReplicaAssignment(partition_index=index, broker_ids=brokers)


def test_manual_assignments_give_counts() -> None:
    assignments = (_assign(1, 2, 0), _assign(0, 0, 1), _assign(2, 1, 2))
    plan = plan_topic(_topic(assignments=assignments), Settings())
    assert (plan.num_partitions, plan.replication_factor) == (3, 2)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"assignments": (_assign(0, 0),), "num_partitions": 1}, ErrorCode.invalid_request),
        ({"assignments": (_assign(0, 0), _assign(2, 0))}, ErrorCode.invalid_replica_assignment),
        ({"assignments": (_assign(0, 0, 0),)}, ErrorCode.invalid_replica_assignment),
        ({"assignments": (_assign(0),)}, ErrorCode.invalid_replica_assignment),
        ({"assignments": (_assign(0, 0), _assign(1, 0, 1))}, ErrorCode.invalid_replica_assignment),
    ],
)
def test_bad_assignments(fields: dict[str, object], error: ErrorCode) -> None:
    with pytest.raises(TopicProblem) as info:
        plan_topic(_topic(**fields), Settings())
    assert info.value.error == error
