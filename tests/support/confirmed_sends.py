"""Blocking proton publishers: `send_numbered` sends n durable messages numbered from 0,
each confirmed; for the kill and partition tests, `publish_until_stopped` sends them until
told to stop, reconnecting after any failure, and lists the numbers the broker confirmed."""

from __future__ import annotations

import threading
import time

from proton import Message
from proton.utils import BlockingConnection


def send_numbered(url: str, address: str, n: int) -> None:
    conn = BlockingConnection(url, timeout=10)
    sender = conn.create_sender(address)
    for i in range(n):
        sender.send(Message(id=i, body=f"m{i}", durable=True))  # returns once accepted
    conn.close()


def publish_until_stopped(url: str, address: str, stop: threading.Event, confirmed: list[int]) -> None:
    n = 0
    while not stop.is_set():
        try:
            conn = BlockingConnection(url, timeout=5)
            sender = conn.create_sender(address)
            while not stop.is_set():
                sender.send(Message(id=n, body=f"m{n}", durable=True))  # returns once accepted
                confirmed.append(n)
                n += 1
            conn.close()
        except Exception:
            n += 1  # its outcome is unknown: never counted as confirmed
            time.sleep(0.2)
