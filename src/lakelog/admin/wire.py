"""What the admin client puts on the wire: API keys, the versions it can build, request
framing, and the error a Kafka error code becomes.

Kept apart from the client so that the mirror and `admin.tools`, which frame their own
requests, share the same framing and version table without the connection class.
"""

from __future__ import annotations

import io
import struct
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.serial import entity_writer
from kio.static.constants import EntityType

from lakelog.util.errors import ErrorCode

API_VERSIONS, METADATA, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS = 18, 3, 19, 20, 32
CREATE_PARTITIONS, LIST_OFFSETS, FIND_COORDINATOR, LIST_GROUPS = 37, 2, 10, 16
DESCRIBE_GROUPS, OFFSET_FETCH, OFFSET_COMMIT, DELETE_GROUPS = 15, 9, 8, 42
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_KEY_TYPE = 0
EARLIEST, LATEST = -2, -1
"""ListOffsets' special timestamps: the log start and the log end."""
# The versions this client can build: (min, max) per API key. OffsetFetch and OffsetCommit
# stop below v10, where topics are named by id only.
CLIENT_VERSIONS = {
    METADATA: (1, 12),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    DESCRIBE_CONFIGS: (1, 4),
    CREATE_PARTITIONS: (0, 3),
    LIST_OFFSETS: (1, 10),
    FIND_COORDINATOR: (0, 6),
    LIST_GROUPS: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    OFFSET_FETCH: (2, 9),
    OFFSET_COMMIT: (2, 9),
    DELETE_GROUPS: (0, 2),
    DESCRIBE_ACLS: (1, 3),
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
    77: (1, 1),  # ShareGroupDescribe
    90: (0, 1),  # DescribeShareGroupOffsets
    91: (0, 0),  # AlterShareGroupOffsets
    92: (0, 0),  # DeleteShareGroupOffsets
}
API_VERSIONS_REQUEST_VERSION = 3
_HEADER = struct.Struct(">hhi")


class KafkaError(Exception):
    """A request answered with a Kafka error code."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(f"{error.name.upper()}: {message}" if message else error.name.upper())
        self.error = error
        self.message = message


def payload_module(api_key: int, version: int, kind: EntityType) -> ModuleType:
    """kio's request or response classes of one API version."""
    return load_payload_module(api_key, version, kind)


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str, request: Any
) -> bytes:
    """A whole request frame: size, header v1 (or v2 for flexible versions), body."""
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(_HEADER.pack(api_key, version, correlation_id))
    raw_id = client_id.encode()
    out.write(len(raw_id).to_bytes(2, "big") + raw_id)
    if type(request).__flexible__:
        out.write(b"\0")
    entity_writer(type(request))(out, request)
    data = out.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    del data
    return out.getvalue()
