"""Classic queues: one node, FIFO, durable or transient messages.

    queue.py        ClassicQueue: the queue interface, publishing, settlement, dispatch
    messages.py     ReadyMessages: the returned heap, the ready deque, the paged tail
    paging.py       PagedTail, Positions: ready messages behind the memory window, on disk
    flow.py         CreditFlow: consumer links and their credit (API v2)
    retention.py    Retention: dead-lettering, x-max-length, TTL, x-expires
    config.py       ClassicQueueConfig (the x-arguments), ClassicQueueCounters
    persistence.py  Persistence, StorePersistence (MessageStore envelope), MemoryPersistence
    priority_messages.py, priority_queue.py   x-max-priority: one level of ready messages per priority
"""

from .config import (
    DROP_HEAD,
    REJECT_PUBLISH,
    REJECT_PUBLISH_DLX,
    ClassicQueueConfig,
    ClassicQueueCounters,
    QueueArgumentError,
)
from .flow import MAX_CREDIT
from .persistence import (
    ENVELOPE_VERSION,
    FLAG_ACQUIRED,
    FLAG_NOT_DURABLE,
    FLAG_PAGE_COPY,
    MemoryPersistence,
    Persistence,
    StorePersistence,
    decode_record,
    encode_record,
    payload_size,
    store_key,
)
from .priority_queue import PriorityClassicQueue
from .queue import ClassicQueue


def classic_queue(vhost: str, name: str, durable: bool, exclusive_owner: object, auto_delete: bool, arguments: dict,
                  **kwargs: object) -> ClassicQueue:  # fmt: skip
    """A classic queue for these arguments: a priority queue with x-max-priority 1..255."""
    config = ClassicQueueConfig.from_arguments(arguments)  # raises QueueArgumentError
    cls = PriorityClassicQueue if config.max_priority else ClassicQueue
    return cls(vhost, name, durable, exclusive_owner, auto_delete, arguments, **kwargs)  # type: ignore[arg-type]


__all__ = [
    "DROP_HEAD",
    "ENVELOPE_VERSION",
    "FLAG_ACQUIRED",
    "FLAG_NOT_DURABLE",
    "FLAG_PAGE_COPY",
    "MAX_CREDIT",
    "REJECT_PUBLISH",
    "REJECT_PUBLISH_DLX",
    "ClassicQueue",
    "ClassicQueueConfig",
    "ClassicQueueCounters",
    "MemoryPersistence",
    "PriorityClassicQueue",
    "Persistence",
    "QueueArgumentError",
    "StorePersistence",
    "classic_queue",
    "decode_record",
    "encode_record",
    "payload_size",
    "store_key",
]
