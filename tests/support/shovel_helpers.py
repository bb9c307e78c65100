"""Publishing to and reading from a node's queues with python-qpid-proton, for the shovel tests."""

from __future__ import annotations

import time

from proton import Message
from proton.utils import BlockingConnection


def publish(url: str, address: str, bodies: list[str]) -> None:
    conn = BlockingConnection(url, timeout=10)
    try:
        sender = conn.create_sender(address)
        for body in bodies:
            sender.send(Message(body=body, durable=True))
    finally:
        conn.close()


def receive(url: str, address: str, n: int, timeout: float = 30.0) -> list[Message]:
    """The next n messages of `address`, accepted; fails past `timeout`."""
    conn = BlockingConnection(url, timeout=timeout)
    try:
        receiver = conn.create_receiver(address, credit=n)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            out.append(receiver.receive(timeout=max(0.1, deadline - time.monotonic())))
            receiver.accept()
        return out
    finally:
        conn.close()


def nothing_left(url: str, address: str, wait: float = 0.5) -> bool:
    """True when `address` gives no message within `wait` seconds."""
    conn = BlockingConnection(url, timeout=10)
    try:
        receiver = conn.create_receiver(address, credit=1)
        try:
            receiver.receive(timeout=wait)
        except Exception:  # proton's Timeout
            return True
        receiver.release()
        return False
    finally:
        conn.close()


def wait_until(predicate, timeout: float = 20.0, what: str = "a condition") -> None:
    """Polls a management read (the API has no event to await) until `predicate` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
