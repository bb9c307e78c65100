"""Codec budget: TRANSFER frames encoded and decoded per second.

Decoding means what the broker does for every published message: parse the
frame, decode the TRANSFER performative, find the message's sections and read
its header and properties (the body stays undecoded). Encoding means what it
does for every delivery: encode a TRANSFER performative and frame it with the
message bytes.

    .venv/bin/python bench/codec.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amqp.definitions import Transfer  # noqa: E402
from amqp.framing import FrameParser, encode_frame  # noqa: E402
from amqp.message import Message  # noqa: E402


def sample_message(body_size: int) -> bytes:
    return bytes(
        Message.build(
            body=b"x" * body_size,
            header={"durable": True},
            properties={"message_id": "msg-000001", "to": "/queues/bench", "subject": "bench"},
        )
    )


def rate(fn, seconds: float) -> float:
    n, batch = 0, 1000
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            fn()
        n += batch
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def bench(body_size: int, seconds: float) -> dict:
    payload = sample_message(body_size)
    transfer = Transfer(handle=1, delivery_id=123456, delivery_tag=b"\x00\x00\x00\x01", message_format=0,
                        settled=False)  # fmt: skip
    frame = encode_frame(1, transfer, payload)

    parser = FrameParser()
    parser.expect_header = False

    def decode() -> None:
        parser.feed(frame)
        f = parser.next()
        m = Message.from_bytes(f.payload)
        m.header  # noqa: B018 - the router reads these
        m.properties  # noqa: B018

    def encode() -> None:
        encode_frame(1, Transfer(handle=1, delivery_id=123456, delivery_tag=b"\x00\x00\x00\x01",
                                 message_format=0, settled=False), payload)  # fmt: skip

    d, e = rate(decode, seconds), rate(encode, seconds)
    return {"body": body_size, "frame": len(frame), "decode_per_s": d, "decode_us": 1e6 / d,
            "encode_per_s": e, "encode_us": 1e6 / e}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    print("| body | frame bytes | decoded/s | µs per decode | encoded/s | µs per encode |")
    print("|---|---|---|---|---|---|")
    for size in (12, 1024):
        r = bench(size, args.seconds)
        print(f"| {r['body']} B | {r['frame']} | {r['decode_per_s']:,.0f} | {r['decode_us']:.2f} | "
              f"{r['encode_per_s']:,.0f} | {r['encode_us']:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
