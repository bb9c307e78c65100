"""A blocking proton publisher for the kill and partition tests: it sends
durable messages numbered from 0 until told to stop, reconnecting after any
failure, and lists the numbers the broker confirmed."""

from __future__ import annotations

import threading
import time

from proton import Message
from proton.utils import BlockingConnection


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
