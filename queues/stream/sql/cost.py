"""What evaluating an expression costs per message, in the unit of a stream
reader's per-turn budget (bytes of chunks read: queues/stream/readers.py),
so a costly expression examines fewer messages per loop turn.

Rough calibration on this machine's Python: decoding a small message's
sections is worth 1 KiB of reading (queues/stream/spec.py), one node of the
tree about 32 bytes (a closure call, ~0.3 us), and one character through a
LIKE NFA about 32 bytes per 64 pattern states. A value a LIKE reads is at
most as long as the message, so that part is charged per message byte.
"""

from __future__ import annotations

from typing import NamedTuple

from queues.stream.sql.nodes import Like, Node
from queues.stream.sql.parser import children

__all__ = ["Cost", "estimate"]

NODE_COST = 32
NFA_STEP_COST = 32


class Cost(NamedTuple):
    per_message: int
    per_byte: int


def estimate(tree: Node) -> Cost:
    nodes = per_byte = 0
    stack = [tree]
    while stack:
        node = stack.pop()
        nodes += 1
        if isinstance(node, Like):
            per_byte += node.pattern.words * NFA_STEP_COST
        stack.extend(children(node))
    return Cost(nodes * NODE_COST, per_byte)
