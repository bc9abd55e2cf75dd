"""The admin client's connection: bootstrap, TLS and SASL, ApiVersions negotiation, one
request at a time, a second connection per other broker, and the Metadata every
operation routes by.

The operations (`admin.topics`, `admin.groups`, `admin.acls`) are mixins over this class;
`admin.client.AdminClient` puts them together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Self

from kio.index import load_response_schema
from kio.serial import entity_reader
from kio.static.constants import EntityType

from lakelog.admin.results import Node
from lakelog.admin.wire import (
    API_VERSIONS,
    API_VERSIONS_REQUEST_VERSION,
    CLIENT_VERSIONS,
    METADATA,
    KafkaError,
    encode_request,
    payload_module,
)
from lakelog.config import split_host_port
from lakelog.log.protocol.bounded import OutOfBounds, check_body
from lakelog.log.protocol.kio_build import build
from lakelog.log.protocol.varint import skip_tagged_fields
from lakelog.security.client_config import ClientSecurity
from lakelog.security.sasl_client import SaslFailed, authenticate
from lakelog.util.errors import ErrorCode


class AdminConnection:
    """One connection to one broker, and through `client_for`, to the others."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
        timeout: float,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._timeout = timeout
        self._correlation_id = 0
        self._versions: dict[int, tuple[int, int]] = {}
        self.address = ""
        self._peers: dict[str, Self] = {}
        self._security: ClientSecurity | None = None

    @classmethod
    async def connect(
        cls,
        bootstrap: str,
        client_id: str = "lakelog-admin",
        timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> Self:
        """`bootstrap`: HOST:PORT[,HOST:PORT...], tried in turn until one answers.
        `security`: TLS and/or SASL (after ApiVersions, as Kafka clients do)."""
        addresses = [entry.strip() for entry in bootstrap.split(",") if entry.strip()]
        if not addresses:
            raise ValueError("empty bootstrap server list")
        last: BaseException | None = None
        for address in addresses:
            try:
                return await cls._connect_one(address, client_id, timeout, security)
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                last = exc
        assert last is not None
        raise last

    @classmethod
    async def _connect_one(
        cls, address: str, client_id: str, timeout: float, security: ClientSecurity | None
    ) -> Self:
        host, port = split_host_port(address)
        tls = security.ssl_context if security is not None else None
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None),
            timeout,
        )
        client = cls(reader, writer, client_id, timeout)
        client.address = f"{host}:{port}"
        client._security = security
        try:
            await client._negotiate()
            if security is not None and security.uses_sasl:
                try:
                    await authenticate(client._roundtrip, security)
                except SaslFailed as exc:
                    raise KafkaError(exc.error, str(exc)) from exc
        except BaseException:
            await client.close()
            raise
        return client

    async def close(self) -> None:
        peers, self._peers = list(self._peers.values()), {}
        for peer in peers:
            await peer.close()
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def client_for(self, node: Node) -> Self:
        """A connection to `node`: this one when it is the same address, else a second one
        kept until `close()`."""
        if node.address == self.address:
            return self
        peer = self._peers.get(node.address)
        if peer is None:
            peer = await type(self).connect(
                node.address, self._client_id, self._timeout, self._security
            )
            self._peers[node.address] = peer
        return peer

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------- transport

    async def _roundtrip(
        self, api_key: int, version: int, request: Any, response_version: int | None = None
    ) -> Any:
        self._correlation_id += 1
        correlation_id = self._correlation_id
        self._writer.write(
            encode_request(api_key, version, correlation_id, self._client_id, request)
        )
        await self._writer.drain()
        size = int.from_bytes(
            await asyncio.wait_for(self._reader.readexactly(4), self._timeout), "big"
        )
        data = await asyncio.wait_for(self._reader.readexactly(size), self._timeout)
        if int.from_bytes(data[:4], "big", signed=True) != correlation_id:
            raise ConnectionError("response correlation id does not match the request")
        response_version = version if response_version is None else response_version
        cls = load_response_schema(api_key, response_version)
        pos = 4
        if cls.__flexible__ and api_key != API_VERSIONS:
            pos = skip_tagged_fields(data, pos)
        try:
            check_body(cls, data, pos)  # kio aborts the process on a huge length
        except OutOfBounds as exc:
            raise ConnectionError(f"malformed response: {exc}") from exc
        response, _ = entity_reader(cls)(data, pos)
        return response

    async def _negotiate(self) -> None:
        m = payload_module(API_VERSIONS, API_VERSIONS_REQUEST_VERSION, EntityType.request)
        request = m.ApiVersionsRequest(
            client_software_name="lakelog-admin", client_software_version="1"
        )
        try:
            response = await self._roundtrip(API_VERSIONS, API_VERSIONS_REQUEST_VERSION, request)
        except Exception:  # an old broker's v0 answer does not parse as v3
            response = None
        if response is None or response.error_code != ErrorCode.none:
            # KIP-511: an older broker answers in v0; ask again in v0.
            request = payload_module(API_VERSIONS, 0, EntityType.request).ApiVersionsRequest()
            response = await self._roundtrip(API_VERSIONS, 0, request)
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, "ApiVersions failed")
        self._versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    def version_for(self, api_key: int, ours: tuple[int, int] | None = None) -> int:
        """The highest version both this client (or the caller's range `ours`) and the
        broker support."""
        ours = ours or CLIENT_VERSIONS[api_key]
        theirs = self._versions.get(api_key)
        if theirs is None:
            raise KafkaError(ErrorCode.unsupported_version, f"broker lacks API {api_key}")
        low, high = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        if low > high:
            raise KafkaError(ErrorCode.unsupported_version, f"no common version for API {api_key}")
        return high

    async def _call(
        self, api_key: int, build_request: Callable[[ModuleType, int], Any]
    ) -> tuple[Any, int]:
        version = self.version_for(api_key)
        m = payload_module(api_key, version, EntityType.request)
        return await self._roundtrip(api_key, version, build_request(m, version)), version

    # ---------------------------------------------------------------- cluster

    async def _metadata(self, names: Sequence[str] | None) -> Any:
        """The raw Metadata response: every topic with None, no topic with ()."""

        def make(m: ModuleType, version: int) -> Any:
            topics = None
            if names is not None:
                topics = tuple(build(m.MetadataRequestTopic, name=n, topic_id=None) for n in names)
            return build(
                m.MetadataRequest,
                topics=topics,
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )

        response, _ = await self._call(METADATA, make)
        return response

    async def brokers(self) -> list[Node]:
        """The cluster's brokers, by node id."""
        response = await self._metadata(())
        return sorted(
            (
                Node(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
                for b in response.brokers
            ),
            key=lambda n: n.node_id,
        )

    async def controller_id(self) -> int:
        return int(getattr(await self._metadata(()), "controller_id", -1))
