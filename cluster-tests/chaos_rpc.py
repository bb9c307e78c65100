"""The chaos workload's Direct Reply-To requests, and their checker.

Requesters (one per node given) each hold a dynamic receiver with the capability
`rabbitmq:volatile-queue` (RabbitMQ's Direct Reply-To over AMQP 1.0): its address is the
reply-to of every request they send to a durable request queue, one request at a time, each
waiting up to REPLY_TIMEOUT for its reply. Responders consume the request queue and send
each reply to the request's reply-to through an anonymous sender, correlated by the
request's id. Every step is recorded: "request" (ok once the request queue confirmed it),
"reply-sent" (ok once the broker accepted the reply, info when the send timed out or its
connection failed: it may still arrive), "reply" (ok: a requester received
it; meta "to": the requester that sent the request), "requester-lost" (its connection or
link failed: its reply address is gone with it).

check_rpc: a reply is *received* by the requester that asked, or *dropped* (Direct
Reply-To is at most once: a reply whose requester's connection was lost, or that met no
credit or a fault on the way, is dropped and never re-sent); a reply received by another
requester, received more often than it was sent, or received for a request never sent is
a violation.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from chaos_history import FAIL, INFO, OK, History, Op
from chaos_workload import RECONNECT_DELAY, _close, queue_address
from proton import Data, Delivery, Message, Terminus, Timeout
from proton.reactor import AtMostOnce, LinkOption
from proton.utils import BlockingConnection

VOLATILE = "rabbitmq:volatile-queue"
REPLY_TIMEOUT = 5.0


class VolatileSource(LinkOption):
    """The source RabbitMQ's clients ask for Direct Reply-To."""

    def apply(self, link) -> None:
        link.source.expiry_policy = Terminus.EXPIRE_WITH_LINK
        link.source.durability = Terminus.NONDURABLE
        link.source.capabilities.put_array(False, Data.SYMBOL)
        link.source.capabilities.enter()
        link.source.capabilities.put_symbol(VOLATILE)
        link.source.capabilities.exit()


class RpcWorkload:
    def __init__(self, cluster, history: History, queue: str, requester_nodes: list[str],
                 responder_nodes: list[str], rate: float = 5.0) -> None:  # fmt: skip
        self.cluster, self.history, self.queue = cluster, history, queue
        self.requester_nodes, self.responder_nodes = list(requester_nodes), list(responder_nodes)
        self.rate = rate
        self._ids = itertools.count(1)
        self._stop_requests = threading.Event()
        self._stop_responders = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def start(self) -> None:
        for i, node in enumerate(self.responder_nodes):
            self._spawn(f"responder-{i}", self._respond, node)
        for i, node in enumerate(self.requester_nodes):
            self._spawn(f"requester-{i}", self._request, node)

    def _spawn(self, name: str, target, node: str) -> None:
        def run() -> None:
            try:
                target(name, node)
            except Exception as e:  # a bug of the harness: report it
                self.errors.append(f"{name}: {type(e).__name__}: {e}")

        t = threading.Thread(target=run, name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self, drain_timeout: float = 30.0) -> None:
        """Stop requesting, let the responders answer what is queued (until the request
        queue's node reports it empty), then stop them."""
        self._stop_requests.set()
        for t in self._threads:
            if t.name.startswith("requester-"):
                t.join(REPLY_TIMEOUT + 15)
        deadline = time.monotonic() + drain_timeout
        while not self._stop_responders.is_set() and time.monotonic() < deadline and self._depth() != 0:
            time.sleep(0.25)
        self._stop_responders.set()
        for t in self._threads:
            t.join(15)

    def _depth(self) -> int | None:
        for node in self.responder_nodes:
            try:
                return int(
                    self.cluster.http(node, "GET", f"/api/queues/%2F/{self.queue}", timeout=5).get("messages", 0)
                )
            except Exception:
                continue
        return None

    def _connect(self, node: str) -> BlockingConnection:
        return BlockingConnection(self.cluster.amqp_url(node), timeout=5, heartbeat=4, allowed_mechs="PLAIN")

    def _request(self, process: str, node: str) -> None:
        interval = 1.0 / self.rate
        while not self._stop_requests.is_set():
            conn = None
            try:
                conn = self._connect(node)
                replies = conn.create_receiver(None, dynamic=True, credit=10, options=[AtMostOnce(), VolatileSource()])
                reply_to = replies.link.remote_source.address
                sender = conn.create_sender(queue_address(self.queue))
            except Exception as e:
                self.history.record(process, "requester-lost", INFO, None, node=node, error=f"{type(e).__name__}: {e}")
                _close(conn)
                self._stop_requests.wait(RECONNECT_DELAY)
                continue
            try:
                while not self._stop_requests.wait(interval):
                    self._one_request(process, node, sender, replies, reply_to)
            except Exception as e:  # connection or link lost: the reply address is gone with it
                self.history.record(process, "requester-lost", INFO, None, node=node, error=f"{type(e).__name__}: {e}")
            _close(conn)

    def _one_request(self, process: str, node: str, sender, replies, reply_to: str) -> None:
        value = next(self._ids)
        start = self.history.now()
        delivery = sender.send(Message(body=value, id=value, reply_to=reply_to, durable=True), timeout=5,
                               error_states=[])  # fmt: skip
        confirmed = delivery.remote_state == Delivery.ACCEPTED
        self.history.record(process, "request", OK if confirmed else FAIL, value, start, node=node)
        if not confirmed:
            return
        deadline = time.monotonic() + REPLY_TIMEOUT
        while time.monotonic() < deadline:
            try:
                reply = replies.receive(timeout=max(0.05, deadline - time.monotonic()))
            except Timeout:
                return
            # no accept: the reply link is at most once (AtMostOnce), its deliveries come settled
            self.history.record(process, "reply", OK, reply.correlation_id, node=node, to=process)
            if reply.correlation_id == value:
                return

    def _respond(self, process: str, node: str) -> None:
        while not self._stop_responders.is_set():
            conn = None
            try:
                conn = self._connect(node)
                requests = conn.create_receiver(queue_address(self.queue), credit=10)
                relay = conn.create_sender(None)
            except Exception as e:
                self.history.record(process, "responder-lost", INFO, None, node=node, error=f"{type(e).__name__}: {e}")
                _close(conn)
                self._stop_responders.wait(RECONNECT_DELAY)
                continue
            try:
                while not self._stop_responders.is_set():
                    try:
                        request = requests.receive(timeout=0.5)
                    except Timeout:
                        continue
                    start = self.history.now()
                    try:
                        d = relay.send(Message(body="reply", address=request.reply_to, correlation_id=request.id),
                                       timeout=5, error_states=[])  # fmt: skip
                    except Exception as e:  # timed out or lost: the reply may still be on its way
                        self.history.record(process, "reply-sent", INFO, request.id, start, node=node,
                                            error=f"{type(e).__name__}: {e}")  # fmt: skip
                        raise
                    sent = d.remote_state == Delivery.ACCEPTED
                    self.history.record(process, "reply-sent", OK if sent else FAIL, request.id, start, node=node)
                    requests.accept()
            except Exception as e:
                self.history.record(process, "responder-lost", INFO, None, node=node, error=f"{type(e).__name__}: {e}")
            _close(conn)


@dataclass
class RpcCheck:
    requests: int = 0  # confirmed requests
    replies_sent: int = 0  # replies the broker accepted
    received: int = 0  # replies received by the requester that asked
    dropped: int = 0  # replies sent, never received
    unanswered: int = 0  # confirmed requests no responder answered (lost with the request queue?)
    misrouted: list = field(default_factory=list)  # (value, received by, asked by)
    extra: list = field(default_factory=list)  # values received more often than sent, or never asked

    @property
    def valid(self) -> bool:
        return not (self.misrouted or self.extra)

    def problems(self) -> list[str]:
        out = []
        if self.misrouted:
            out.append(f"{len(self.misrouted)} replies reached another requester: {self.misrouted[:5]}")
        if self.extra:
            out.append(f"{len(self.extra)} replies received more often than sent or never asked: {self.extra[:5]}")
        return out

    def summary(self) -> str:
        return (f"requests {self.requests}, replies sent {self.replies_sent}, received {self.received}, "
                f"dropped {self.dropped}, unanswered {self.unanswered}; "
                + ("valid" if self.valid else "INVALID: " + "; ".join(self.problems())))  # fmt: skip


def check_rpc(ops: Iterable[Op]) -> RpcCheck:
    """See the module docstring."""
    ops = list(ops)
    asked = {o.value: o.process for o in ops if o.f == "request" and o.type == OK}
    sent = Counter(o.value for o in ops if o.f == "reply-sent" and o.type == OK)
    maybe = Counter(o.value for o in ops if o.f == "reply-sent" and o.type in (OK, INFO))
    got = Counter(o.value for o in ops if o.f == "reply" and o.type == OK)
    result = RpcCheck(requests=len(asked), replies_sent=sum(sent.values()))
    for o in ops:
        if o.f == "reply" and o.type == OK and o.value in asked and o.process != asked[o.value]:
            result.misrouted.append((o.value, o.process, asked[o.value]))
    result.extra = sorted(v for v, n in got.items() if v not in asked or n > maybe.get(v, 0))
    result.received = sum(min(n, maybe.get(v, 0)) for v, n in got.items() if v in asked)
    result.dropped = sum(max(0, n - got.get(v, 0)) for v, n in sent.items())
    result.unanswered = sum(1 for v in asked if v not in maybe)
    return result


__all__ = ["RpcWorkload", "RpcCheck", "check_rpc", "FAIL"]
