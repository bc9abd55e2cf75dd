"""Answers for well-formed requests of a Kafka API, or an API version, not served here.

Apache Kafka closes the connection on a request its ApiVersions did not offer. A closed
connection tells the client nothing and loses every request pipelined behind it, so
Lakelog answers instead: the API's own response at the requested version, with a typed
error in its error fields (each entry of the request echoed with the error where the
response reports per entry). The code is UNSUPPORTED_VERSION unless Kafka has a more
precise one for a feature that is switched off (`CODES`). Which APIs and versions are not
served, and why, is the "Kafka APIs not served" list in docs/clients.md; a test keeps that
list, this broker's ApiVersions and the message specs of Kafka 4.1 in step.

Only (API, version) pairs kio has a schema for get an answer: anything else is not a
well-formed request of a known API, and the connection is closed as before.
"""

from __future__ import annotations

from typing import Any

from lakelog.server.api.outage import (
    PLANS,
    Echo,
    Plan,
    build_plan_response,
    has_top_level_error,
)
from lakelog.util.errors import ErrorCode

CODES: dict[int, ErrorCode] = {
    # SaslHandshake/SaslAuthenticate on a listener without SASL: Kafka's KafkaApis
    # answers both ILLEGAL_SASL_STATE.
    17: ErrorCode.illegal_sasl_state,
    36: ErrorCode.illegal_sasl_state,
    # Delegation tokens: Kafka's answer when the token feature is not enabled.
    38: ErrorCode.delegation_token_auth_disabled,
    39: ErrorCode.delegation_token_auth_disabled,
    40: ErrorCode.delegation_token_auth_disabled,
    41: ErrorCode.delegation_token_auth_disabled,
}

_BY_PARTITION = Echo("partitions", "partitions", (("partition", "partition"),))
_SHARE_STATE = (Echo("topics", "results", (("topic_id", "topic_id"),), children=(_BY_PARTITION,)),)

ECHOES: dict[int, tuple[Echo, ...]] = {
    27: (  # WriteTxnMarkers: per marker, topic and partition
        Echo(
            "markers",
            "markers",
            (("producer_id", "producer_id"),),
            children=(
                Echo(
                    "topics",
                    "topics",
                    (("name", "name"),),
                    children=(Echo("partition_indexes", "partitions", key="partition_index"),),
                ),
            ),
        ),
    ),
    49: (Echo("entries", "entries", (("entity", "entity"),)),),  # AlterClientQuotas
    83: _SHARE_STATE,  # InitializeShareGroupState
    84: _SHARE_STATE,  # ReadShareGroupState
    85: _SHARE_STATE,  # WriteShareGroupState
    86: _SHARE_STATE,  # DeleteShareGroupState
    87: _SHARE_STATE,  # ReadShareGroupStateSummary
    89: (Echo("group_ids", "groups", key="group_id"),),  # StreamsGroupDescribe
}


def unserved_code(api_key: int) -> ErrorCode:
    return CODES.get(api_key, ErrorCode.unsupported_version)


def unserved_response(
    api_key: int, version: int, request: Any, cluster_id: str | None = None
) -> Any | None:
    """The typed-error answer to `request`, or None when the response has nowhere to
    carry an error (no error field of its own and no entries to echo)."""
    echoes = ECHOES.get(api_key) or (PLANS[api_key].echoes if api_key in PLANS else ())
    if not echoes and not has_top_level_error(api_key, version):
        return None
    code = unserved_code(api_key)
    message = f"API {api_key} v{version} is not served by Lakelog (see docs/clients.md)"
    return build_plan_response(api_key, version, request, Plan(code, echoes), message, cluster_id)
