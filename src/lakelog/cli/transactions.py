"""`lakelog transactions`, Kafka's kafka-transactions.sh: list, describe, describe-producers
and find-hanging. `abort` is not offered: it writes transaction markers with WriteTxnMarkers,
which Lakelog does not serve (its coordinator writes the markers itself)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from lakelog.admin.client import AdminClient
from lakelog.admin.results import TopicPartition
from lakelog.admin.tools import (
    ListedTransaction,
    ProducerState,
    TransactionDescription,
    describe_producers,
    describe_transaction,
    list_transactions,
)
from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    UserError,
    bootstrap_of,
    group_callback,
    print_json,
    print_table,
    run_admin,
    use_command_config,
    waiting,
)

transactions_app = typer.Typer(
    help="List and describe transactions and the producers of a partition.",
    no_args_is_help=True,
)
transactions_app.callback()(group_callback)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")
STATES += ("PrepareEpochFence", "Dead")


@transactions_app.command("list")
def list_command(
    ctx: typer.Context,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only transactions in this state (repeatable)."),
    ] = None,
    producer_id: Annotated[
        list[int] | None,
        typer.Option("--producer-id", help="Only this producer id (repeatable)."),
    ] = None,
    as_json: JsonOption = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """List the transactional ids every broker coordinates."""
    use_command_config(ctx, command_config)
    for s in state or ():
        if s not in STATES:
            raise UserError(f"unknown --state {s!r}: expected one of {', '.join(STATES)}")

    async def action(client: AdminClient) -> list[ListedTransaction]:
        return await list_transactions(client, state or (), producer_id or ())

    with waiting("Listing transactions"):
        listed = run_admin(bootstrap_of(ctx, bootstrap_server), action)
    if as_json:
        print_json(
            [
                {
                    "transactional_id": t.transactional_id,
                    "coordinator": t.coordinator,
                    "producer_id": t.producer_id,
                    "state": t.state,
                }
                for t in listed
            ]
        )
        return
    print_table(
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        [[t.transactional_id, t.coordinator, t.producer_id, t.state] for t in listed],
    )


def _partitions(partitions: tuple[TopicPartition, ...]) -> str:
    return ",".join(f"{t}-{p}" for t, p in partitions)


@transactions_app.command("describe")
def describe_command(
    ctx: typer.Context,
    transactional_id: Annotated[
        str, typer.Option("--transactional-id", help="The transactional id to describe.")
    ],
    as_json: JsonOption = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Describe one transactional id: its producer, state and the partitions of the
    running transaction."""
    use_command_config(ctx, command_config)

    async def action(client: AdminClient) -> TransactionDescription:
        return await describe_transaction(client, transactional_id)

    with waiting(f"Describing {transactional_id}"):
        d = run_admin(bootstrap_of(ctx, bootstrap_server), action)
    now = int(time.time() * 1000)
    duration = now - d.start_time_ms if d.start_time_ms >= 0 else None
    if as_json:
        print_json(
            {
                "coordinator": d.coordinator,
                "transactional_id": d.transactional_id,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "state": d.state,
                "timeout_ms": d.timeout_ms,
                "start_time_ms": d.start_time_ms if d.start_time_ms >= 0 else None,
                "duration_ms": duration,
                "partitions": [{"topic": t, "partition": p} for t, p in d.partitions],
            }
        )
        return
    print_table(
        [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        [
            [
                d.coordinator,
                d.transactional_id,
                d.producer_id,
                d.producer_epoch,
                d.state,
                d.timeout_ms,
                d.start_time_ms if d.start_time_ms >= 0 else None,
                duration,
                _partitions(d.partitions),
            ]
        ],
    )


def _producer_json(s: ProducerState) -> dict[str, int | None]:
    return {
        "producer_id": s.producer_id,
        "producer_epoch": s.producer_epoch,
        "coordinator_epoch": s.coordinator_epoch,
        "last_sequence": s.last_sequence,
        "last_timestamp": s.last_timestamp,
        "current_transaction_start_offset": (
            s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None
        ),
    }


@transactions_app.command("describe-producers")
def describe_producers_command(
    ctx: typer.Context,
    topic: Annotated[str, typer.Option("--topic", help="The topic.")],
    partition: Annotated[int, typer.Option("--partition", help="The partition.", min=0)],
    broker_id: Annotated[
        int | None,
        typer.Option("--broker-id", help="Ask this broker instead of the partition's leader."),
    ] = None,
    as_json: JsonOption = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """The producers with state on one partition (idempotent and transactional)."""
    use_command_config(ctx, command_config)

    async def action(client: AdminClient) -> list[ProducerState]:
        found = await describe_producers(client, [(topic, partition)], broker_id)
        return found.get((topic, partition), [])

    with waiting(f"Describing the producers of {topic}-{partition}"):
        states = run_admin(bootstrap_of(ctx, bootstrap_server), action)
    if as_json:
        print_json([_producer_json(s) for s in states])
        return
    print_table(
        [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ],
        [
            [
                s.producer_id,
                s.producer_epoch,
                s.coordinator_epoch,
                s.last_sequence,
                s.last_timestamp,
                s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None,
            ]
            for s in states
        ],
    )


@transactions_app.command("find-hanging")
def find_hanging_command(
    ctx: typer.Context,
    broker_id: Annotated[
        int | None,
        typer.Option("--broker-id", help="Check every partition this broker leads."),
    ] = None,
    topic: Annotated[str | None, typer.Option("--topic", help="Check this topic.")] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", help="Only this partition of --topic.", min=0)
    ] = None,
    max_transaction_timeout: Annotated[
        int,
        typer.Option(
            "--max-transaction-timeout",
            help="Minutes a transaction may stay open before it counts as hanging.",
            min=1,
        ),
    ] = 15,
    as_json: JsonOption = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Find transactions open on a partition longer than --max-transaction-timeout whose
    producer's coordinator no longer has them running (kafka-transactions.sh find-hanging)."""
    use_command_config(ctx, command_config)
    if broker_id is None and topic is None:
        raise UserError("give --broker-id or --topic")
    if partition is not None and topic is None:
        raise UserError("--partition goes with --topic")
    limit_ms = max_transaction_timeout * 60_000

    async def action(client: AdminClient) -> list[dict[str, object]]:
        described = await client.describe_topics([topic] if topic is not None else None)
        partitions = [
            (t.name, p.partition)
            for t in described
            for p in t.partitions
            if (partition is None or p.partition == partition)
            and (broker_id is None or topic is not None or p.leader == broker_id)
        ]
        if not partitions:
            return []
        by_partition = await describe_producers(
            client, partitions, broker_id if topic is None else None
        )
        now = int(time.time() * 1000)
        open_long = [
            (tp, s)
            for tp, states in sorted(by_partition.items())
            for s in states
            if s.current_txn_start_offset >= 0 and now - s.last_timestamp > limit_ms
        ]
        if not open_long:
            return []
        by_producer = {
            t.producer_id: t
            for t in await list_transactions(
                client, (), sorted({s.producer_id for _, s in open_long})
            )
        }
        hanging = []
        for (t, p), s in open_long:
            listed = by_producer.get(s.producer_id)
            if listed is not None:
                d = await describe_transaction(client, listed.transactional_id)
                if (
                    d.state == "Ongoing"
                    and (t, p) in d.partitions
                    and d.producer_epoch == (s.producer_epoch)
                ):
                    continue  # still running at its coordinator: not hanging
            hanging.append(
                {
                    "topic": t,
                    "partition": p,
                    "producer_id": s.producer_id,
                    "producer_epoch": s.producer_epoch,
                    "coordinator_epoch": s.coordinator_epoch,
                    "start_offset": s.current_txn_start_offset,
                    "last_timestamp": s.last_timestamp,
                    "duration_min": (now - s.last_timestamp) // 60_000,
                }
            )
        return hanging

    with waiting("Looking for hanging transactions"):
        hanging = run_admin(bootstrap_of(ctx, bootstrap_server), action)
    if as_json:
        print_json(hanging)
        return
    columns = ["topic", "partition", "producer_id", "producer_epoch", "coordinator_epoch"]
    columns += ["start_offset", "last_timestamp", "duration_min"]
    print_table(
        [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ],
        [[h[c] for c in columns] for h in hanging],
    )
