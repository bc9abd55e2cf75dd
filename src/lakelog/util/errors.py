"""Kafka error codes shared by every layer.

The coordinator answers with the same codes the wire carries so that no layer has to
translate; kio's enum is the single list.
"""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode"]
