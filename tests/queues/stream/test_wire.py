"""The stream.repl messages: each kind round-trips with its chunk bytes
unchanged, and a kind or version this build does not know is refused."""

from __future__ import annotations

import pytest

from amqp import codec
from queues.stream import wire

SAMPLES = [
    wire.Fetch("/", "s", 3, 100, 90, 0xDEADBEEF, 2, 80),
    wire.Chunks("/", "s", 3, 100, [b"WSC1" + bytes(range(256)), b""]),
    wire.Chunks("/", "s", 3, 100, []),
    wire.Committed("/", "s", 3, 120),
    wire.Truncate("/", "s", 3, 90),
    wire.Stop("/", "s", 3, 7),
    wire.Status("/", "s", 3, 7, 2, -1),
]


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(message):
    assert wire.decode(wire.encode(message)) == message


def test_unknown_kinds_versions_and_shapes_are_refused():
    with pytest.raises(wire.WireError, match="version 2"):
        wire.decode(codec.dumps(["fetch", 2, "/", "s", 3, 100, 90, 0, 2, 80]))
    with pytest.raises(wire.WireError, match="unknown message 'snapshot'"):
        wire.decode(codec.dumps(["snapshot", 1, "/", "s"]))
    with pytest.raises(wire.WireError, match="fields"):
        wire.decode(codec.dumps(["truncate", 1, "/", "s", 3]))
    with pytest.raises(wire.WireError):
        wire.decode(b"\x00garbage")
