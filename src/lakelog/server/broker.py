"""One broker process: wires the coordinator, object storage, WAL writer, fetch reader and
background loops to the network server, and runs the graceful shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import time
from uuid import UUID

from lakelog.config import Settings
from lakelog.coordinator import open_coordinator
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.topic_types import BrokerInfo
from lakelog.groups.coordinator import GroupCoordinator
from lakelog.groups.group_configs import GroupConfigs
from lakelog.groups.share.service import ShareService
from lakelog.log.fetch.cache import BatchCache
from lakelog.log.fetch.reader import BatchReader
from lakelog.log.fetch.waiter import CommitWaiter
from lakelog.log.produce.inline_policy import InlinePolicy
from lakelog.log.produce.plain_claims import PlainClaims
from lakelog.log.produce.wal_writer import CommittedObject, WalWriter
from lakelog.log.storage.inline_store import InlineAwareStorage
from lakelog.log.storage.store import ObjectStorage
from lakelog.mirror.manager import MirrorManager
from lakelog.registry.validation import SubjectIds
from lakelog.security.authorizer import Authorizer
from lakelog.security.credentials import LoginCredentials
from lakelog.security.listener import ListenerSecurity
from lakelog.server.api.dispatch import Dispatcher
from lakelog.server.background.cleaner import FileCleaner
from lakelog.server.background.compaction import CompactionLoop
from lakelog.server.background.inline_mover import InlineMover
from lakelog.server.background.loop_lag import watch_loop_lag
from lakelog.server.background.retention import RetentionLoop
from lakelog.server.background.table_status import TableStatusLoop
from lakelog.server.cluster.dynamic_broker_configs import DynamicBrokerConfigs
from lakelog.server.cluster.identity import (
    ANY_HEARTBEAT,
    hold_lock,
    lock_path,
    wait_until_id_free,
)
from lakelog.server.cluster.outage import is_outage, log_failure
from lakelog.server.cluster.zones import partition_broker, suspected, zone_brokers
from lakelog.server.listener import Server
from lakelog.server.put_budget import put_budget
from lakelog.server.topics import TopicCache
from lakelog.server.txn.expiry import TransactionTimeouts
from lakelog.util.errors import ErrorCode
from lakelog.util.single_flight import SingleFlight

log = logging.getLogger(__name__)

BROKERS_CACHE_S = 0.1
BROKERS_STALE_MAX_S = 1.0
"""How long the live broker list is reused. Short: a client that sees a broker left out
drops its connection to it (librdkafka decommissions it, resending what was in flight
elsewhere), so every broker must name a re-registered broker again at once."""

PROBE_CACHE_S = 1.0
"""How long the outcome of a connect probe to an overdue broker is reused."""
PROBE_TIMEOUT_S = 1.0
"""A probe that neither connects nor is refused within this is inconclusive."""
PROBE_WAIT_S = 0.2
"""How long a cluster-view refresh waits for a probe; a slower one counts next time."""
_GONE = frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH})


async def _connect_refused(host: str, port: int) -> bool:
    """Whether a TCP connect to host:port is refused (nothing listens: the process is
    gone) or the host is unreachable. A connect that succeeds or times out says no."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), PROBE_TIMEOUT_S)
    except OSError as exc:
        return exc.errno in _GONE or isinstance(exc, ConnectionRefusedError)
    except Exception:
        return False
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return False


class Broker:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.cluster_id = settings.cluster_id
        self.broker_epoch = -1
        self.stopping = False
        self.host, self.port = settings.advertised_host_port
        self.coordinator: BatchCoordinator = open_coordinator(
            settings.resolved_coordinator_url,
            pool_timeout_s=settings.coordinator_pool_timeout_ms / 1000,
        )
        # Reads of inline files (issue 32) come from the coordinator, whoever wrote them.
        self.storage = InlineAwareStorage(
            ObjectStorage.from_url(settings.resolved_storage_url), self.coordinator
        )
        self.inline_policy = (
            InlinePolicy(
                settings.produce_inline_max_bytes,
                settings.produce_inline_below_bytes_per_second,
                settings.produce_inline_broker_max_bytes,
                settings.produce_inline_total_max_bytes,
            )
            if settings.produce_inline
            else None
        )
        self.topics = TopicCache(self.coordinator)
        self.schema_ids = SubjectIds(self.coordinator)
        self.authorizer = Authorizer(self.coordinator, settings)
        self.group_configs = GroupConfigs(self.coordinator, settings)
        self.cache = BatchCache(settings.fetch_cache_max_bytes)
        self.reader = BatchReader(self.storage, self.cache)
        self.waiter = CommitWaiter(self.coordinator, settings.fetch_poll_interval_ms)
        self.wal = WalWriter(
            self.storage,
            self.coordinator,
            broker_id=self.broker_id,
            broker_epoch=lambda: self.broker_epoch,
            max_buffer_bytes=settings.produce_buffer_max_bytes,
            commit_interval_ms=settings.produce_commit_interval_ms,
            max_sealed_buffers=settings.produce_max_sealed_buffers,
            on_commit=self._on_commit,
            on_fenced=self._on_fenced,
            commit_delay_ms=settings.fault_commit_delay_ms,
            commit_retry_ms=settings.produce_commit_retry_ms,
            still_leads=self.still_leads,
            put_budget=put_budget(settings),
            fill_horizon_ms=settings.produce_fill_horizon_ms,
            inline=self.inline_policy,
            claims=PlainClaims(
                self.coordinator,
                broker_id=self.broker_id,
                broker_epoch=lambda: self.broker_epoch,
                still_leads=self.still_leads,
            ),
        )
        self.server = Server(
            Dispatcher(self),
            max_request_bytes=settings.socket_request_max_bytes,
            max_inflight=settings.max_inflight_requests_per_connection,
            max_inflight_bytes=settings.max_inflight_bytes_per_connection,
            max_inflight_commits=settings.max_inflight_offset_commits_per_connection,
            max_connections=settings.max_connections,
            max_connections_per_ip=settings.max_connections_per_ip,
            max_connections_per_ip_overrides=settings.connections_per_ip_overrides,
            connections_max_idle_ms=settings.connections_max_idle_ms,
            request_read_timeout_ms=settings.request_read_timeout_ms,
            queued_max_request_bytes=settings.queued_max_request_bytes,
            security=ListenerSecurity.from_settings(settings),
            reauth_ms=settings.connections_max_reauth_ms,
        )
        if self.server.sasl_users is not None:
            self.server.login_credentials = LoginCredentials(
                self.server.sasl_users, self.coordinator.scram_credential
            )
        self.groups = GroupCoordinator(self)
        self.dynamic_configs = DynamicBrokerConfigs(self)
        self.share = ShareService(self)
        self.mirrors = MirrorManager(self)
        self._background: list[asyncio.Task[None]] = []
        self._brokers_cache: tuple[float, list[BrokerInfo]] = (0.0, [])
        self._brokers_load = SingleFlight(self._load_brokers)
        self._brokers_generation = 0
        self._fenced_lately: list[BrokerInfo] = []
        self._suspects: frozenset[int] = frozenset()
        self._probes: dict[tuple[str, int], tuple[float, asyncio.Task[bool]]] = {}
        self._back_at = -1e9
        """Monotonic time when this broker last woke from a stall long enough for the
        others to suspect it (its heartbeat loop overslept `broker_zone_failover_ms`)."""
        self._stopped = asyncio.Event()
        self._registering = asyncio.Lock()
        self._coordinator_ok_since: float | None = None
        """Monotonic time since which this broker's heartbeats have all succeeded; None
        while they fail (a coordinator outage silences every broker at once)."""
        self._doubt_since_ms = int(time.time() * 1000)
        """Wall time when this broker last started, or last lost the coordinator."""
        self._lock_fd: int | None = None
        """This broker id's lock file, held while the broker runs (see `identity`)."""

    async def _leave_cluster(self) -> None:
        """Controlled shutdown: retire our epoch now, so Metadata stops naming this broker at
        once instead of after the session timeout (everything is committed by now)."""
        far_future = int(time.time() * 1000) + 86_400_000
        try:
            if await self.coordinator.fence_broker(
                self.broker_id, self.broker_epoch, far_future, left=True
            ):
                log.info("left the cluster (epoch %d retired)", self.broker_epoch)
        except Exception:
            log_failure(log, "could not leave the cluster; the others will fence us")

    # ---------------------------------------------------------------- commit listener
    def _on_commit(self, committed: CommittedObject) -> None:
        for request, _result, offset in committed.batches:
            self.cache.put((committed.object_key, offset), request.data)
        self.waiter.notify()

    # ---------------------------------------------------------------- cluster view
    async def live_brokers(self) -> list[BrokerInfo]:
        """Registered brokers with a recent heartbeat (cached for BROKERS_CACHE_S).

        A broker that missed its session is left out only once it is fenced: clients move
        its partitions elsewhere when Metadata stops naming it, and a paused zombie that
        wakes must not commit what it held after the new owner committed later records
        of the same producer (fencing refuses its commits).

        Loads are single-flight, and a view up to BROKERS_STALE_MAX_S old is served while
        the next one loads (under a flood of requests while the database was slow, every
        request queued its own query and Metadata waited 300 ms). An older view, say after
        this process was paused, is never served: requests wait for the load."""
        fetched_at, brokers = self._brokers_cache
        age = time.monotonic() - fetched_at
        if brokers and age <= BROKERS_CACHE_S:
            return brokers
        if brokers and age <= BROKERS_STALE_MAX_S:
            self._brokers_load.start()
            return brokers
        return await self._brokers_load.wait()

    def _forget_brokers(self) -> None:
        """The next `live_brokers` waits for a view loaded from now on."""
        self._brokers_cache = (0.0, [])
        self._brokers_generation += 1
        self._brokers_load.forget()

    async def _load_brokers(self) -> list[BrokerInfo]:
        generation = self._brokers_generation
        brokers = self._brokers_cache[1]
        now_ms = int(time.time() * 1000)
        since = now_ms - self.settings.broker_session_timeout_ms
        linger_since = now_ms - self.settings.broker_fenced_linger_ms
        live: list[BrokerInfo] = []
        fenced: list[BrokerInfo] = []
        try:
            listing = await self.coordinator.list_brokers(ANY_HEARTBEAT)
            unfenced: set[int] = set()
            for b in listing:
                if 0 <= b.last_heartbeat < since:
                    if await self._fence_if_silent(b, since):
                        fenced.append(b)
                    else:
                        unfenced.add(b.broker_id)
            if unfenced:
                # It heartbeated meanwhile, we may not fence yet, or another broker fenced
                # it first. Only a fresh row tells which: kept live on a stale one, a dead
                # broker went on leading partitions here after the others had moved them,
                # and a client that sent there waited for it until its timeout.
                listing = await self.coordinator.list_brokers(ANY_HEARTBEAT)
            fenced_ids = {b.broker_id for b in fenced}
            for b in listing:
                if b.broker_id in fenced_ids:
                    continue
                if b.last_heartbeat >= 0:
                    live.append(b)  # heartbeating, or silent and not fenced by us
                elif b.last_heartbeat < -1 and -b.last_heartbeat >= linger_since:
                    fenced.append(b)
        except Exception as exc:
            if is_outage(exc):
                self._lost_coordinator()
            if not brokers or not is_outage(exc):
                raise
            # Database down: the brokers we last saw still serve (Metadata and
            # FindCoordinator keep answering); ask again in a second.
            if generation == self._brokers_generation:
                self._brokers_cache = (time.monotonic(), brokers)
            return brokers
        brokers = live
        if not any(b.broker_id == self.broker_id for b in brokers):
            brokers = [*brokers, self.self_info()]
        brokers.sort(key=lambda b: b.broker_id)
        suspects = await self._find_suspects(brokers, now_ms)
        if generation == self._brokers_generation:
            self._fenced_lately = [f for f in fenced if f.broker_id != self.broker_id]
            self._set_suspects(suspects, brokers)
            self._brokers_cache = (time.monotonic(), brokers)
        return brokers

    def serving(self, brokers: list[BrokerInfo], zone: str | None) -> list[BrokerInfo]:
        """The brokers (of `live_brokers()`) that serve clients of `zone`: Metadata leads
        partitions over these and `still_leads` asks the same question."""
        return zone_brokers(brokers, zone, self._suspects)

    async def _find_suspects(self, brokers: list[BrokerInfo], now_ms: int) -> frozenset[int]:
        """Brokers whose heartbeat is `broker_zone_failover_ms` old, or 1.5 heartbeat
        intervals old with their advertised port refusing connections (a crashed process;
        a paused one still accepts). See `lakelog.server.cluster.zones.suspected`."""
        settings = self.settings
        if settings.broker_zone_failover_ms <= 0:
            return frozenset()
        overdue_ms = settings.broker_heartbeat_interval_ms * 3 // 2
        late_ms = max(settings.broker_zone_failover_ms, overdue_ms)
        ok_since = self._coordinator_ok_since
        trust_age = ok_since is not None and time.monotonic() - ok_since >= late_ms / 1000
        probe = [
            b
            for b in brokers
            if b.broker_id != self.broker_id
            and b.last_heartbeat < now_ms - overdue_ms
            and not (trust_age and b.last_heartbeat < now_ms - late_ms)
        ]
        refused: set[int] = set()
        if probe:
            answers = await asyncio.gather(*(self._refused(b.host, b.port) for b in probe))
            refused = {b.broker_id for b, gone in zip(probe, answers, strict=True) if gone}
        return suspected(
            brokers,
            now_ms,
            late_ms=late_ms,
            overdue_ms=overdue_ms,
            trust_age=trust_age,
            refused=refused,
        )

    async def _refused(self, host: str, port: int) -> bool:
        """A connect probe's answer, shared and reused for PROBE_CACHE_S."""
        key = (host, port)
        now = time.monotonic()
        cached = self._probes.get(key)
        if cached is None or now - cached[0] > PROBE_CACHE_S:
            task = asyncio.get_running_loop().create_task(_connect_refused(host, port))
            cached = self._probes[key] = (now, task)
        try:
            return await asyncio.wait_for(asyncio.shield(cached[1]), PROBE_WAIT_S)
        except Exception:
            return False

    def _set_suspects(self, suspects: frozenset[int], brokers: list[BrokerInfo]) -> None:
        if suspects == self._suspects:
            return
        racks = {b.broker_id: b.rack for b in brokers}

        def name(broker_id: int) -> str:
            rack = racks.get(broker_id)
            return f"broker {broker_id}" + (f" (zone {rack})" if rack else "")

        for broker_id in sorted(suspects - self._suspects):
            log.warning("%s looks gone: the other brokers lead its partitions", name(broker_id))
        for broker_id in sorted(self._suspects - suspects):
            if broker_id in racks:  # not when it left the list: fenced, and logged so
                log.info("%s leads partitions again", name(broker_id))
        self._suspects = suspects

    async def still_leads(self, topic_id: UUID, partition: int, zone: str | None) -> bool:
        """Whether Metadata names this broker the partition's leader for clients of that
        zone (True when the cluster view cannot be had: an outage refuses nothing)."""
        try:
            live = await self.live_brokers()
        except Exception:
            return True
        if len(live) > 1 and time.monotonic() - self._back_at < self._stall_grace_s():
            # Just back from a stall the others took for a crash: clients were sent
            # elsewhere meanwhile, and batches held through it (our heartbeat may be fresh
            # again already) must not commit behind what they sent there since. (Alone,
            # nobody else led anything: a laptop waking from sleep refuses nothing.)
            return False
        brokers = self.serving(live, zone)
        return partition_broker(brokers, topic_id, partition) == self.broker_id

    def _stall_grace_s(self) -> float:
        return self.settings.broker_heartbeat_interval_ms / 1000

    def fenced_lately(self) -> list[BrokerInfo]:
        """Brokers fenced for silence within `broker_fenced_linger_ms`, as of the last
        `live_brokers` call. Metadata still names them (leading no partition): a client
        drops its connection to a broker Metadata stops naming and resends what was in
        flight there elsewhere without counting a retry (librdkafka does), which
        duplicates a batch the paused broker had already committed. Named, the requests
        stay in flight until their answer or their timeout. A broker that left on a
        controlled shutdown had answered everything, so it is dropped at once."""
        return self._fenced_lately

    def self_info(self) -> BrokerInfo:
        return BrokerInfo(
            self.broker_id,
            self.broker_epoch,
            self.settings.rack,
            self.host,
            self.port,
            int(time.time() * 1000),
        )

    # ---------------------------------------------------------------- lifecycle
    async def _claim_identity(self) -> None:
        """Refuse to run as a broker id another live process is (BrokerIdInUseError):
        the two would fence each other every heartbeat. Before listening, so a registered
        address of ours that refuses connections proves the earlier process gone."""
        path = lock_path(self.settings)
        if path is not None:
            self._lock_fd = hold_lock(path, self.broker_id)
        try:
            await self.coordinator.start()
            await wait_until_id_free(self.coordinator, self.settings, _connect_refused)
        except BaseException:
            await self.coordinator.close()
            self._release_lock()
            raise

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def start(self) -> tuple[str, int]:
        await self._claim_identity()
        try:
            await self.dynamic_configs.refresh()
        except Exception:
            log_failure(log, "reading dynamic broker configs failed; starting with the static ones")
        if self.authorizer.enabled:
            await self.authorizer.refresh()  # the ACLs hold from the first request
        listen_host, listen_port = self.settings.listen_host_port
        host, port = await self.server.start(listen_host, listen_port)
        if self.port == 0:
            self.port = port
        self.broker_epoch = await self.coordinator.register_broker(
            self.broker_id, self.settings.rack, self.host, self.port
        )
        loop = asyncio.get_running_loop()
        self._background = [
            loop.create_task(self._heartbeat_loop(), name="heartbeat"),
            loop.create_task(RetentionLoop(self).run(), name="retention"),
            loop.create_task(FileCleaner(self).run(), name="cleaner"),
            loop.create_task(CompactionLoop(self).run(), name="compaction"),
            loop.create_task(TableStatusLoop(self).run(), name="table-status"),
            # Always, even with the path off here: it finishes other brokers' moves.
            loop.create_task(
                InlineMover(self, append_rate=self.wal.append_rate).run(), name="inline-mover"
            ),
            loop.create_task(TransactionTimeouts(self).run(), name="txn-timeouts"),
            loop.create_task(watch_loop_lag(), name="loop-lag"),
            loop.create_task(self.dynamic_configs.run(), name="dynamic-configs"),
        ]
        if self.authorizer.enabled:
            self._background.append(loop.create_task(self.authorizer.run(), name="acls"))
        self.groups.start()
        self.mirrors.start()
        log.info(
            "broker %d (epoch %d) listening on %s:%d, advertised %s:%d",
            self.broker_id,
            self.broker_epoch,
            host,
            port,
            self.host,
            self.port,
        )
        return host, port

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.broker_heartbeat_interval_ms / 1000
        # Slept this long: the others may have suspected us (their age counts from our
        # last heartbeat, a little before this sleep began).
        stalled_s = max(self.settings.broker_zone_failover_ms / 1000 - interval, 1.5 * interval)
        while True:
            slept_from = time.monotonic()
            await asyncio.sleep(interval)
            if self.settings.broker_zone_failover_ms > 0 and (
                time.monotonic() - slept_from > stalled_s
            ):
                self._back_at = time.monotonic()
                if len(self._brokers_cache[1]) > 1:
                    log.warning(
                        "woke from a %.1fs stall: refusing plain producers' batches for %.1fs",
                        time.monotonic() - slept_from,
                        self._stall_grace_s(),
                    )
            try:
                error = await self.coordinator.heartbeat_broker(self.broker_id, self.broker_epoch)
                if self._coordinator_ok_since is None:
                    self._coordinator_ok_since = time.monotonic()
                if error != ErrorCode.none:
                    await self.reregister(f"heartbeat answered {error.name}")
                await self._fence_silent_brokers()
            except Exception:
                self._lost_coordinator()
                log_failure(log, "broker heartbeat failed")

    async def _fence_silent_brokers(self) -> None:
        """Declare brokers that missed their session dead, so a paused zombie can never
        commit again under its old epoch (every broker checks; the first one wins)."""
        silent_since = int(time.time() * 1000) - self.settings.broker_session_timeout_ms
        fenced = False
        for other in await self.coordinator.list_brokers(0):
            if other.last_heartbeat < silent_since:
                fenced = await self._fence_if_silent(other, silent_since) or fenced
        if fenced:
            self._forget_brokers()  # Metadata stops naming it as a leader now

    async def _fence_if_silent(self, other: BrokerInfo, silent_since: int) -> bool:
        """Fence `other` if it is still silent under that epoch; True when it is fenced
        now (False: it heartbeated meanwhile, someone fenced it first, or our own view is
        not to be trusted yet).

        After a coordinator outage every broker looks silent, and fencing them all would
        refuse every commit held through the outage and move every partition. So until
        this broker's own heartbeats have succeeded for a whole session (also after it
        starts), it fences only brokers that were silent before its doubt began."""
        if other.broker_id == self.broker_id:
            return False
        session_ms = self.settings.broker_session_timeout_ms
        ok_since = self._coordinator_ok_since
        trusted = ok_since is not None and time.monotonic() - ok_since >= session_ms / 1000
        if not trusted and other.last_heartbeat >= self._doubt_since_ms - session_ms:
            return False
        fenced = await self.coordinator.fence_broker(
            other.broker_id, other.broker_epoch, silent_since
        )
        if fenced:
            log.warning(
                "fenced broker %d (epoch %d): no heartbeat for %d ms",
                other.broker_id,
                other.broker_epoch,
                self.settings.broker_session_timeout_ms,
            )
        return fenced

    def _lost_coordinator(self) -> None:
        if self._coordinator_ok_since is not None:
            self._doubt_since_ms = int(time.time() * 1000)
        self._coordinator_ok_since = None

    async def reregister(self, why: str) -> None:
        """This broker was fenced: take a new epoch before committing anything again."""
        async with self._registering:
            old = self.broker_epoch
            # Requests still unread in our sockets may be older than records their
            # producers sent to other brokers while we were fenced; under a new epoch they
            # would commit behind those. So the connections read nothing more and close
            # once they have answered what they read (all of it under the old epoch, so
            # refused or committed before the fence); clients reconnect and see a
            # transport error for the rest, a counted retry.
            if self.server.connections:
                log.warning(
                    "fenced: %d client connections close after answering what they read",
                    len(self.server.connections),
                )
                self.server.retire_all()
            self.broker_epoch = await self.coordinator.register_broker(
                self.broker_id, self.settings.rack, self.host, self.port
            )
            self._forget_brokers()
            log.warning("re-registered with epoch %d (was %d): %s", self.broker_epoch, old, why)

    def _on_fenced(self, epoch: int) -> None:
        """A commit under `epoch` was refused. Re-register unless that already happened
        (the heartbeat may have): a second time would fence our own newer epoch and
        refuse the objects sealed under it."""
        if epoch != self.broker_epoch:
            return
        if not self._registering.locked():
            task = asyncio.get_running_loop().create_task(
                self.reregister("a commit was refused with STALE_BROKER_EPOCH")
            )
            self._background.append(task)

    async def stop(self, drain_timeout: float = 30.0) -> None:
        """Stop accepting, seal and commit the WAL, answer in-flight requests, close."""
        log.info("shutting down: no new connections or requests")
        self.stopping = True
        self.server.stop_accepting()
        self.waiter.notify()  # waiting fetches answer now with what they have
        await self.mirrors.stop()
        try:
            await asyncio.wait_for(self.wal.flush(), drain_timeout)
        except TimeoutError:
            log.error("WAL flush did not finish within %.0fs", drain_timeout)
        await self.server.drain(drain_timeout)
        self.server.close_all()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._leave_cluster()
        await self.wal.close()
        await self.groups.stop()
        await self.waiter.close()
        await self.coordinator.close()
        self._release_lock()
        log.info("broker stopped")
        self._stopped.set()
