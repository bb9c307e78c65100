"""A consumer's source on a stream: its filter set read as a ReadSpec
(queues/stream/spec.py). A filter set the stream cannot apply refuses the
link with amqp:invalid-field."""

from __future__ import annotations

from typing import Any

from amqp import definitions as d
from node.vhosts.stream_follower import StreamFollower, StreamProxy
from queues.base import QueueArgumentError
from queues.stream.queue import StreamQueue
from queues.stream.spec import ReadSpec
from routing.errors import InvalidArgument

__all__ = ["stream_read_spec"]


def stream_read_spec(queue: Any, source: Any) -> ReadSpec | None:
    """None for a queue that is not a stream this node serves or proxies with its filters."""
    if not isinstance(queue, StreamQueue | StreamFollower | StreamProxy):
        return None
    filters = source.filter if isinstance(source, d.Source) else None
    try:
        if isinstance(queue, StreamProxy):  # served by the leader: the filter set goes with the attach
            return queue.read_spec(filters)
        return ReadSpec.from_filter_set(filters)
    except QueueArgumentError as e:
        raise InvalidArgument(str(e)) from None
