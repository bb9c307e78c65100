"""`/metrics/memory-breakdown`: what the node holds, by part, as the memory
alarm counts it (node/ops/memory.py), under the names of RabbitMQ's
breakdown where a part has one:

- classic queues' messages: rabbitmq_memory_classic_queue_erlang_process_bytes;
- quorum replicas' bodies and index: rabbitmq_memory_quorum_queue_erlang_process_bytes;
- what connections hold to send: rabbitmq_memory_client_connection_writer_bytes;
- the interpreter's baseline (code, libraries, threads):
  rabbitmq_memory_other_system_bytes.

The RocksDB caches of the message store and of the Raft log have no
RabbitMQ counterpart: warren_memory_stores_bytes. RabbitMQ's other parts
(atom table, ETS tables, binary heap, plugins, Erlang allocators, ...)
describe the Erlang runtime and have no meaning here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from node.http.management_node import ScrapedNode

# the memory account's parts (MemoryAccount.breakdown) -> (name, help)
PARTS = {
    "classic_queues": ("rabbitmq_memory_classic_queue_erlang_process_bytes", "Classic queue processes footprint in "
                       "bytes (the messages classic queues hold)"),
    "quorum_queues": ("rabbitmq_memory_quorum_queue_erlang_process_bytes", "Quorum queue processes footprint in "
                      "bytes (the bodies and index quorum replicas hold)"),
    "connections": ("rabbitmq_memory_client_connection_writer_bytes", "Client connection writer processes "
                    "footprint in bytes (what connections hold to send)"),
    "baseline": ("rabbitmq_memory_other_system_bytes", "Other runtime footprint in bytes (the interpreter's "
                 "baseline: code, libraries, threads)"),
    "stores": ("warren_memory_stores_bytes", "RocksDB table readers and block caches of the message store and "
               "of the Raft log, in bytes"),
}  # fmt: skip


def memory_families(node: ScrapedNode) -> Iterator[Metric]:
    for part, value in node.memory.breakdown().items():
        name, doc = PARTS[part]
        yield GaugeMetricFamily(name, doc, value)
