"""The queue workload of the chaos scenarios: publishers of uniquely numbered messages, each
waiting for the broker's confirm (the settled outcome), and consumers, on the nodes given,
every operation recorded in the history (chaos_history.py) for the total-queue checker.

    w = QueueWorkload(cluster, history, queue="chaos-q", queue_node="warren1",
                      publish_nodes=["warren1"], consume_nodes=["warren1"])
    w.start()
    ... faults ...
    w.finish()          # stop publishing, drain the queue, stop consuming

Clients are python-qpid-proton's blocking API, one connection per thread, to the node's
address on the compose network. A client whose connection fails reconnects (every 0.5 s)
to the same node; a publish in flight when it failed is recorded `info` (it may have been
enqueued). Every message is durable and its body is its number.

A delivery is marked redelivered when the broker says so (first-acquirer false or a
delivery-count above zero): duplicates are allowed only as such.
"""

from __future__ import annotations

import itertools
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING

from chaos_history import FAIL, INFO, OK, History
from proton import Delivery, Message, Timeout
from proton.utils import BlockingConnection

if TYPE_CHECKING:
    from chaos_cluster import ComposeCluster

RECONNECT_DELAY = 0.5


def queue_address(queue: str) -> str:
    """RabbitMQ's address format v2 for a queue."""
    return "/queues/" + urllib.parse.quote(queue, safe="")


def _close(conn: BlockingConnection | None) -> None:
    if conn is None:
        return
    try:
        conn.close()
    except Exception:  # closing a dead connection may raise; it is gone either way
        pass


class QueueWorkload:
    def __init__(self, cluster: ComposeCluster, history: History, queue: str, queue_node: str,
                 publish_nodes: list[str], consume_nodes: list[str], rate: float = 50.0,
                 send_timeout: float = 5.0, connect_timeout: float = 5.0, heartbeat: float = 4.0,
                 prefetch: int = 20) -> None:  # fmt: skip
        """`rate`: messages per second per publisher (at most: each waits for its confirm)."""
        self.cluster, self.history = cluster, history
        self.queue, self.queue_node = queue, queue_node
        self.publish_nodes, self.consume_nodes = list(publish_nodes), list(consume_nodes)
        self.rate, self.send_timeout, self.prefetch = rate, send_timeout, prefetch
        self.connect_timeout, self.heartbeat = connect_timeout, heartbeat
        self._ids = itertools.count(1)  # next() is atomic under the GIL
        self._stop_publishing = threading.Event()
        self._stop_consuming = threading.Event()
        self._last_delivery = time.monotonic()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []  # unexpected exceptions in the clients' own code

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        for i, node in enumerate(self.consume_nodes):
            self._spawn(f"consumer-{i}", self._consume, node)
        for i, node in enumerate(self.publish_nodes):
            self._spawn(f"publisher-{i}", self._publish, node)

    def _spawn(self, name: str, target, node: str) -> None:
        def run() -> None:
            try:
                target(name, node)
            except Exception as e:  # a bug of the harness: report it, do not hang the run
                self.errors.append(f"{name}: {type(e).__name__}: {e}")

        t = threading.Thread(target=run, name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def stop_publishing(self) -> None:
        self._stop_publishing.set()
        for t in self._threads:
            if t.name.startswith("publisher-"):
                t.join(self.send_timeout + self.connect_timeout + 5)

    def drain(self, quiet: float = 2.0, timeout: float = 60.0) -> bool:
        """Let the consumers run until no delivery came for `quiet` seconds and the queue's node
        reports it empty; False when `timeout` passed first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if time.monotonic() - self._last_delivery >= quiet and self.queue_depth() == 0:
                return True
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        self._stop_publishing.set()
        self._stop_consuming.set()
        for t in self._threads:
            t.join(15)

    def finish(self, quiet: float = 2.0, drain_timeout: float = 60.0) -> bool:
        """Stop publishing, drain, stop consuming; returns whether the drain completed."""
        self.stop_publishing()
        drained = self.drain(quiet, drain_timeout)
        self.history.record("workload", "drain", OK if drained else INFO, self.queue)
        self.stop()
        return drained

    def queue_depth(self) -> int | None:
        """Messages in the queue (ready and unacknowledged) as its node reports, or None."""
        try:
            q = self.cluster.http(self.queue_node, "GET", f"/api/queues/%2F/{urllib.parse.quote(self.queue, safe='')}")
        except Exception:
            return None
        return int(q.get("messages", 0)) if isinstance(q, dict) else None

    # -- clients -------------------------------------------------------------------------------

    def _connect(self, process: str, node: str) -> BlockingConnection | None:
        start = self.history.now()
        try:
            url = self.cluster.amqp_url(node)
            return BlockingConnection(url, timeout=self.connect_timeout, heartbeat=self.heartbeat,
                                      allowed_mechs="PLAIN")  # fmt: skip
        except Exception as e:
            self.history.record(process, "connect", FAIL, None, start, node=node, error=f"{type(e).__name__}: {e}")
            return None

    def _publish(self, process: str, node: str) -> None:
        conn = sender = None
        interval = 1.0 / self.rate if self.rate > 0 else 0.0
        next_at = time.monotonic()
        while not self._stop_publishing.is_set():
            if sender is None:
                conn = self._connect(process, node)
                if conn is None:
                    self._stop_publishing.wait(RECONNECT_DELAY)
                    continue
                try:
                    sender = conn.create_sender(queue_address(self.queue))
                except Exception as e:
                    self.history.record(process, "attach", FAIL, None, node=node, error=f"{type(e).__name__}: {e}")
                    _close(conn)
                    conn = sender = None
                    self._stop_publishing.wait(RECONNECT_DELAY)
                    continue
            value = next(self._ids)
            start = self.history.now()
            try:
                delivery = sender.send(Message(body=value, id=value, durable=True), timeout=self.send_timeout,
                                       error_states=[])  # fmt: skip
            except Exception as e:  # timeout, connection or link lost: it may have been enqueued
                self.history.record(process, "enqueue", INFO, value, start, node=node,
                                    error=f"{type(e).__name__}: {e}")  # fmt: skip
                _close(conn)
                conn = sender = None
                continue
            if delivery.remote_state == Delivery.ACCEPTED:
                self.history.record(process, "enqueue", OK, value, start, node=node)
            else:
                self.history.record(process, "enqueue", FAIL, value, start, node=node,
                                    error=f"outcome {delivery.remote_state}")  # fmt: skip
            if interval:
                next_at = max(next_at + interval, time.monotonic() - 1.0)
                self._stop_publishing.wait(max(0.0, next_at - time.monotonic()))
        _close(conn)

    def _consume(self, process: str, node: str) -> None:
        conn = receiver = None
        while not self._stop_consuming.is_set():
            if receiver is None:
                conn = self._connect(process, node)
                if conn is None:
                    self._stop_consuming.wait(RECONNECT_DELAY)
                    continue
                try:
                    receiver = conn.create_receiver(queue_address(self.queue), credit=self.prefetch)
                except Exception as e:
                    self.history.record(process, "attach", FAIL, None, node=node, error=f"{type(e).__name__}: {e}")
                    _close(conn)
                    conn = receiver = None
                    self._stop_consuming.wait(RECONNECT_DELAY)
                    continue
            start = self.history.now()
            try:
                message = receiver.receive(timeout=0.5)
            except Timeout:
                continue
            except Exception as e:
                self.history.record(process, "consumer-lost", INFO, None, start, node=node,
                                    error=f"{type(e).__name__}: {e}")  # fmt: skip
                _close(conn)
                conn = receiver = None
                continue
            self._last_delivery = time.monotonic()
            redelivered = not message.first_acquirer or (message.delivery_count or 0) > 0
            meta = {"redelivered": redelivered, "delivery_count": message.delivery_count or 0}
            try:
                receiver.accept()
            except Exception as e:  # the client saw it; the broker may deliver it again
                self.history.record(process, "dequeue", INFO, message.body, start, node=node,
                                    error=f"{type(e).__name__}: {e}", **meta)  # fmt: skip
                _close(conn)
                conn = receiver = None
                continue
            self.history.record(process, "dequeue", OK, message.body, start, node=node, **meta)
        _close(conn)


def declare_queue(cluster: ComposeCluster, node: str, queue: str, queue_type: str) -> None:
    """Declare a durable queue of `queue_type` through `node`'s management API."""
    cluster.http(node, "PUT", f"/api/queues/%2F/{urllib.parse.quote(queue, safe='')}",
                 {"durable": True, "auto_delete": False, "arguments": {"x-queue-type": queue_type}})  # fmt: skip


__all__ = ["QueueWorkload", "declare_queue", "queue_address", "OK", "FAIL", "INFO"]
