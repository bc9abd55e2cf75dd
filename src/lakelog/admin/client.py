"""A small Kafka admin client on kio and asyncio streams, for `lakelog topics` and
`lakelog groups`.

It speaks to any Kafka-protocol broker (Lakelog or Apache Kafka): ApiVersions first, then
each request at the highest version both sides know. One request at a time per connection:
enough for a command-line tool, with no dependency on a Kafka client library. Requests that
belong to another broker (a group's coordinator, a partition's leader) go over a second
connection to that broker, opened on first use.
"""

from __future__ import annotations

from lakelog.admin.acls import AclOperations
from lakelog.admin.groups import GroupOperations
from lakelog.admin.topics import TopicOperations


class AdminClient(TopicOperations, GroupOperations, AclOperations):
    """Connect with `await AdminClient.connect("host:port")`; close with `await close()`.

    The connection (`admin.connection`) and each area's operations (`admin.topics`,
    `admin.groups`, `admin.acls`) live in their own modules; this class only joins them.
    """
