"""The messages of stream replication between nodes (node message channel
"stream.repl"), typed and versioned: each is an AMQP list

    [kind, version, vhost, stream, epoch, ...fields]

so a node meeting a kind or version it does not know drops the message
(and says so) rather than guessing. Chunks travel as binary values holding
the leader's bytes unchanged; the replica checks each one's CRC.

    fetch     replica -> leader: "my log ends at `end`, its last chunk starts at
              `last_first` with CRC `last_crc`, I have verified it against epoch
              `log_epoch` and know the committed end `committed`": the request for
              what follows and the report of what is durable, in one.
    chunks    leader -> replica: chunks from the replica's end (at most
              BATCH_BYTES, one batch in flight per replica) and the committed end.
              A new leader's announcement is one without chunks and with committed
              ANNOUNCED (-1): "fetch from me", not an answer to a fetch it checked.
    committed leader -> replica: the committed end moved while the replica's fetch waits
              at the leader, which keeps it (flag stream_commit_notices): no new fetch.
              Without the flag, a `chunks` without chunks tells it and ends the fetch.
    truncate  leader -> replica: drop every chunk ending past `offset`, then fetch again.
    stop      candidate -> replica: stop following `epoch` (fenced) and report the log.
    status    replica -> candidate: the answer to `stop` (log epoch and end; end -1:
              not stopped, it has no copy or still reaches the leader).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from amqp import codec

__all__ = ["ANNOUNCED", "BATCH_BYTES", "Chunks", "Committed", "Fetch", "Status", "Stop", "Truncate", "WireError", "decode", "encode"]

VERSION = 1
BATCH_BYTES = 4 << 20  # chunk bytes in one `chunks` message: bounds what is in flight per replica
# the committed end of a leader's announcement; a build before it takes an announcement as an
# answer to a fetch (a committed end this low moves nothing there)
ANNOUNCED = -1


class WireError(ValueError):
    """Bytes that are not a stream replication message this build knows."""


@dataclass(frozen=True, slots=True)
class Fetch:
    vhost: str
    name: str
    epoch: int
    end: int
    last_first: int
    last_crc: int
    log_epoch: int
    committed: int  # the committed end the replica knows: an answer is due when the leader's is further


@dataclass(frozen=True, slots=True)
class Chunks:
    vhost: str
    name: str
    epoch: int
    committed: int
    chunks: list[bytes]


@dataclass(frozen=True, slots=True)
class Committed:
    vhost: str
    name: str
    epoch: int
    committed: int


@dataclass(frozen=True, slots=True)
class Truncate:
    vhost: str
    name: str
    epoch: int
    offset: int


@dataclass(frozen=True, slots=True)
class Stop:
    vhost: str
    name: str
    epoch: int
    request: int


@dataclass(frozen=True, slots=True)
class Status:
    vhost: str
    name: str
    epoch: int
    request: int
    log_epoch: int
    end: int


_KINDS: dict[str, type] = {"fetch": Fetch, "chunks": Chunks, "committed": Committed, "truncate": Truncate, "stop": Stop,
                           "status": Status}  # fmt: skip
_NAMES = {cls: name for name, cls in _KINDS.items()}


def encode(message: object) -> bytes:
    values = [getattr(message, f.name) for f in fields(message)]  # type: ignore[arg-type]
    return codec.dumps([_NAMES[type(message)], VERSION, *values])


def decode(payload: bytes) -> object:
    try:
        value = codec.loads(payload)
    except Exception as e:  # codec.DecodeError and friends
        raise WireError(f"not an AMQP value: {e}") from None
    if not isinstance(value, list) or len(value) < 2:
        raise WireError("not a stream replication message")
    kind, version, *values = value
    cls = _KINDS.get(kind)
    if cls is None or version != VERSION:
        raise WireError(f"unknown message {kind!r} version {version!r}")
    names = [f.name for f in fields(cls)]
    if len(values) != len(names):
        raise WireError(f"{kind}: {len(values)} fields, expected {len(names)}")
    if cls is Chunks:
        values[-1] = [bytes(c) for c in values[-1]]
    return cls(*values)
