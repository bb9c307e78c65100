"""The chaos workload on a stream: the queue workload's publishers, and consumers that read
the stream by offset.

A stream keeps what its consumers read, so two things differ from a queue:
- a consumer attaches at the first offset, and after a lost connection at the offset after
  the last one it received (`rabbitmq:stream-offset-spec`), so it reads every message once
  however often it reconnects; two consumers would each read every message, which the
  total-queue checker counts as duplicates: give a StreamWorkload one consumer;
- the stream is never empty: the consumers have read everything once each has passed the
  end of the stream as its node reports it (`messages` of its queue).

Consumers reach a stream on its own node (docs/compatibility.md: through another node they
start at `next`), so `consume_nodes` should name the node that declared it.
"""

from __future__ import annotations

from chaos_workload import QueueWorkload
from proton import Described, Message, symbol, ulong
from proton.reactor import Filter

OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")


class StreamWorkload(QueueWorkload):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.next_offset: dict[str, int] = {}  # consumer process -> the offset it reads next

    def source_options(self, process: str) -> Filter:
        start = self.next_offset.get(process)
        spec = "first" if start is None else ulong(start)
        return Filter({OFFSET_SPEC: Described(OFFSET_SPEC, spec)})

    def delivered(self, process: str, message: Message) -> None:
        offset = (message.annotations or {}).get("x-stream-offset")
        if offset is not None:
            self.next_offset[process] = int(offset) + 1

    def consumed_all(self) -> bool:
        """Every consumer past the stream's last message: offsets start at 0 and the
        workload's stream has no retention, so the last is `messages` - 1 as its node reports."""
        held = self.queue_depth()
        if held is None or not self.consume_nodes:
            return False
        return all(self.next_offset.get(f"consumer-{i}", 0) >= held for i in range(len(self.consume_nodes)))
