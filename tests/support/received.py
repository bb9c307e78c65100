"""Reading messages with proton's BlockingReceiver in the multi-process tests."""

from __future__ import annotations


def receive_ids(receiver, n: int, timeout: float = 15) -> list[int]:
    """The ids of the next `n` messages a proton BlockingReceiver gets, each accepted;
    `timeout` seconds at most for each."""
    got = []
    for _ in range(n):
        got.append(receiver.receive(timeout=timeout).id)
        receiver.accept()
    return got
