"""A consumer's source on a stream: its filter set read as a ReadSpec
(queues/stream/spec.py). A filter set the stream cannot apply (an invalid
SQL expression among them) refuses the link with amqp:invalid-field: the
reply ATTACH has no source, so no filter is echoed, and the DETACH says why."""

from __future__ import annotations

from typing import Any

from amqp import definitions as d
from node.vhosts.stream_follower import StreamFollower
from node.vhosts.stream_proxy import StreamProxy
from queues.base import QueueArgumentError
from queues.stream.queue import StreamQueue
from queues.stream.spec import ReadSpec
from queues.stream.sql import DEFAULT_MAX_LENGTH
from routing.errors import InvalidArgument

__all__ = ["stream_read_spec"]


def stream_read_spec(queue: Any, source: Any, sql_max_length: int = DEFAULT_MAX_LENGTH) -> ReadSpec | None:
    """None for a queue that is not a stream this node serves or proxies with its filters."""
    if not isinstance(queue, StreamQueue | StreamFollower | StreamProxy):
        return None
    filters = source.filter if isinstance(source, d.Source) else None
    try:
        if isinstance(queue, StreamProxy):  # served by the leader: the filter set goes with the attach
            return queue.read_spec(filters, sql_max_length)
        return ReadSpec.from_filter_set(filters, sql_max_length)
    except QueueArgumentError as e:
        raise InvalidArgument(str(e)) from None
