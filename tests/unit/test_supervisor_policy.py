"""The supervisor's pure parts: how a death is described, the restart backoff, each
broker's arguments; and the default /metrics address."""

from __future__ import annotations

import signal

import pytest

from lakelog.server.cluster.supervisor import RestartPolicy, child_args, describe_exit
from lakelog.server.metrics_server import default_metrics_listen


def test_exit_descriptions_name_the_signal() -> None:
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"
    assert describe_exit(-signal.SIGSEGV) == "was killed by SIGSEGV"
    assert describe_exit(3) == "exited with status 3"
    assert describe_exit(0) == "exited with status 0"


def test_backoff_doubles_up_to_its_max() -> None:
    policy = RestartPolicy(
        backoff_s=1.0, backoff_max_s=5.0, limit=5, interval_s=300, stop_timeout_s=80
    )
    assert [policy.delay_s(n) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_children_count_ports_up_and_keep_an_empty_metrics_listen() -> None:
    flags = {"listen": "127.0.0.1:9092", "metrics_listen": "", "broker_id": None}
    args = child_args(2, flags)
    assert args[args.index("--listen") + 1] == "127.0.0.1:9094"
    assert args[args.index("--metrics-listen") + 1] == ""
    assert args[args.index("--broker-id") + 1] == "2"
    unset = child_args(1, {"listen": "127.0.0.1:9092", "metrics_listen": None})
    assert "--metrics-listen" not in unset  # each broker takes its own default


@pytest.mark.parametrize(
    ("listen", "metrics"),
    [
        ("127.0.0.1:9092", "127.0.0.1:10092"),
        ("0.0.0.0:9092", "127.0.0.1:10092"),
        ("127.0.0.1:0", "127.0.0.1:0"),
        ("127.0.0.1:65000", "127.0.0.1:0"),
    ],
)
def test_default_metrics_address(listen: str, metrics: str) -> None:
    assert default_metrics_listen(listen) == metrics
