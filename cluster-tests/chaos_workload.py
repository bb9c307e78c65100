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

`MetadataWorkload` changes metadata meanwhile, a few times a second, each change through a
random node's HTTP API (any node not paused: cut-off ones too), every change recorded with
its outcome for check_metadata (chaos_checker.py):

    m = MetadataWorkload(cluster, history); m.start()
    ... faults ...
    m.stop(); views = m.read_all()    # each node's exchanges and bindings, once converged
"""

from __future__ import annotations

import errno
import itertools
import random
import secrets
import threading
import time
import urllib.parse

from chaos_checker import (
    ADD_USER,
    ADD_VHOST,
    BIND,
    CLEAR_PERMISSION,
    CLEAR_POLICY,
    CREATES,
    DECLARE_EXCHANGE,
    DECLARE_QUEUE,
    DELETE_EXCHANGE,
    DELETE_QUEUE,
    DELETE_USER,
    DELETE_VHOST,
    REMOVE,
    SET_PERMISSION,
    SET_POLICY,
    UNBIND,
)
from chaos_cluster import ClusterError, ComposeCluster, HttpError
from chaos_history import FAIL, INFO, OK, History, Op
from proton import Delivery, Message, Timeout
from proton.utils import BlockingConnection

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
                 prefetch: int = 20, consume_queue: str | None = None) -> None:  # fmt: skip
        """`rate`: messages per second per publisher (at most: each waits for its confirm).
        `consume_queue`: where the consumers read, when not `queue` (its dead-letter target)."""
        self.cluster, self.history = cluster, history
        self.queue, self.queue_node = queue, queue_node
        self.consume_queue = consume_queue or queue
        self.publish_nodes, self.consume_nodes = list(publish_nodes), list(consume_nodes)
        self.rate, self.send_timeout, self.prefetch = rate, send_timeout, prefetch
        self.connect_timeout, self.heartbeat = connect_timeout, heartbeat
        self._ids = itertools.count(1)  # next() is atomic under the GIL
        self._stop_publishing = threading.Event()
        self._stop_consuming = threading.Event()
        self._last_delivery = time.monotonic()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []  # unexpected exceptions in the clients' own code
        self.undrained: str | None = None  # why `finish_all` found it not drained (drain_state)

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
        return drain_all([self], quiet, timeout)[0]

    def drained(self, quiet: float) -> bool:
        return time.monotonic() - self._last_delivery >= quiet and self.consumed_all()

    def drain_state(self) -> str:
        """Why it is not drained, as seen now: what its node reports of each queue read
        (`q_details`) and how long since the last delivery."""
        parts = [f"{queue} on {self.queue_node}: {q_details(self.cluster, self.queue_node, queue)}"
                 for queue in dict.fromkeys((self.queue, self.consume_queue))]  # fmt: skip
        return "; ".join(parts) + f"; last delivery {time.monotonic() - self._last_delivery:.1f}s ago"

    def stop(self) -> None:
        self._stop_publishing.set()
        self._stop_consuming.set()
        for t in self._threads:
            t.join(15)

    def finish(self, quiet: float = 2.0, drain_timeout: float = 60.0) -> bool:
        """Stop publishing, drain, stop consuming; returns whether the drain completed."""
        return finish_all([self], quiet, drain_timeout)[0]

    def consumed_all(self) -> bool:
        """Whether the consumers have everything the queue holds: its node reports it empty
        (and the queue they read, when another)."""
        return self.queue_depth() == 0 and (
            self.consume_queue == self.queue or self.queue_depth(self.consume_queue) == 0
        )

    def queue_depth(self, queue: str | None = None) -> int | None:
        """Messages in the queue (ready and unacknowledged) as its node reports, or None."""
        name = urllib.parse.quote(queue or self.queue, safe="")
        try:
            q = self.cluster.http(self.queue_node, "GET", f"/api/queues/%2F/{name}")
        except Exception:
            return None
        return int(q.get("messages", 0)) if isinstance(q, dict) else None

    # -- what a queue type changes (chaos_stream.py) ----------------------------------------------

    def source_options(self, process: str):
        """Link options of a consumer's (re)attach: none for a queue."""
        return None

    def delivered(self, process: str, message: Message) -> None:
        """Called with each message a consumer receives, before it is recorded."""

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
                    receiver = conn.create_receiver(queue_address(self.consume_queue), credit=self.prefetch,
                                                    options=self.source_options(process))  # fmt: skip
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
            self.delivered(process, message)
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


def q_details(cluster: ComposeCluster, node: str, queue: str) -> object:
    """What `node` reports of a queue (leader, ready, unacknowledged, its consumers), or the error."""
    try:
        q = cluster.http(node, "GET", f"/api/queues/%2F/{urllib.parse.quote(queue, safe='')}", timeout=5)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return {k: q.get(k) for k in ("leader", "messages_ready", "messages_unacknowledged", "consumer_details")}


def declare_queue(cluster: ComposeCluster, node: str, queue: str, queue_type: str,
                  arguments: dict | None = None) -> None:  # fmt: skip
    """Declare a durable queue of `queue_type` (with more `arguments`) through `node`'s management API."""
    cluster.http(node, "PUT", f"/api/queues/%2F/{urllib.parse.quote(queue, safe='')}",
                 {"durable": True, "auto_delete": False,
                  "arguments": {"x-queue-type": queue_type, **(arguments or {})}})  # fmt: skip


# ---------------------------------------------------------------- metadata

BINDING_SOURCE = "amq.direct"  # the source of the workload's bindings (to an exchange of its own)
_NOT_SENT = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)


def exchange_key(name: str) -> str:
    """An exchange as check_metadata names it."""
    return f"exchange {name}"


def binding_key(source: str, destination: str, routing_key: str) -> str:
    """An exchange-to-exchange binding (no arguments) as check_metadata names it."""
    return f"binding {source} -> {destination} {routing_key}"


def change_outcome(e: BaseException) -> tuple[str, int]:
    """(op type, HTTP status or 0) of a metadata change that raised `e`. `fail` when it
    certainly changed nothing: a refusal (4xx: 404 says the node knew no such object and did
    nothing), a 503 "no majority" (which Warren promises changed nothing), a connection never
    made. `info` otherwise: another 503 (not committed in time: it may commit later), a
    timeout or a connection lost after the request went out."""
    if isinstance(e, HttpError):
        if e.status == 503:
            return (FAIL if "no majority" in str(e.body) else INFO), e.status
        return (FAIL if e.status < 500 else INFO), e.status
    if isinstance(e, ClusterError):  # no address: the node is down, nothing was sent
        return FAIL, 0
    reason = getattr(e, "reason", e)  # urllib wraps errors before the request went out in URLError
    if isinstance(reason, OSError) and reason.errno in _NOT_SENT:
        return FAIL, 0
    return INFO, 0


def metadata_change(cluster: ComposeCluster, history: History, process: str, f: str, node: str, name: str,
                    source: str = BINDING_SOURCE, routing_key: str = "", timeout: float = 10.0) -> Op:  # fmt: skip
    """One metadata change through `node`'s HTTP API, recorded in `history` with its outcome
    and returned (meta: the HTTP status). `f` is one of chaos_checker's CREATES or REMOVES:
    declare-exchange or delete-exchange (the durable direct exchange `name`), bind or unbind
    (`source` to the exchange `name` with `routing_key`), declare-queue or delete-queue (a
    durable classic queue `name`), add-user or delete-user, add-vhost or delete-vhost,
    set-policy or clear-policy (on "/", matching nothing the workloads use), set-permission or
    clear-permission (of the user `routing_key` in the vhost `name`)."""
    key, method, path, body = _change_request(f, name, source, routing_key)
    start = history.now()
    try:
        cluster.http(node, method, path, body, timeout=timeout)
    except Exception as e:
        type_, status = change_outcome(e)
        return history.record(process, f, type_, key, start, node=node, error=f"{type(e).__name__}: {e}"[:300],
                              status=status)  # fmt: skip
    return history.record(process, f, OK, key, start, node=node, status=204 if method == "DELETE" else 201)


def _change_request(f: str, name: str, source: str, routing_key: str) -> tuple[str, str, str, object]:
    """(object key, HTTP method, path, body) of the change `f`."""
    q = lambda v: urllib.parse.quote(v, safe="")  # noqa: E731
    if f in (DECLARE_EXCHANGE, DELETE_EXCHANGE):
        body = {"type": "direct", "durable": True} if f == DECLARE_EXCHANGE else None
        return exchange_key(name), "PUT" if body else "DELETE", f"/api/exchanges/%2F/{q(name)}", body
    if f in (BIND, UNBIND):
        path = f"/api/bindings/%2F/e/{q(source)}/e/{q(name)}"
        if f == BIND:
            return binding_key(source, name, routing_key), "POST", path, {"routing_key": routing_key}
        # the binding's properties key (no arguments)
        return binding_key(source, name, routing_key), "DELETE", path + "/" + (q(routing_key) or "~"), None
    if f in (DECLARE_QUEUE, DELETE_QUEUE):
        body = {"durable": True, "auto_delete": False, "arguments": {"x-queue-type": "classic"}}
        return f"queue {name}", "PUT" if f == DECLARE_QUEUE else "DELETE", f"/api/queues/%2F/{q(name)}", (
            body if f == DECLARE_QUEUE else None)  # fmt: skip
    if f in (ADD_USER, DELETE_USER):
        body = {"password": "chaos-" + name, "tags": ""} if f == ADD_USER else None
        return f"user {name}", "PUT" if body else "DELETE", f"/api/users/{q(name)}", body
    if f in (ADD_VHOST, DELETE_VHOST):
        return f"vhost {name}", "PUT" if f == ADD_VHOST else "DELETE", f"/api/vhosts/{q(name)}", (
            {} if f == ADD_VHOST else None)  # fmt: skip
    if f in (SET_POLICY, CLEAR_POLICY):
        body = {"pattern": f"^{name}-matches-nothing$", "definition": {"max-length": 1000}, "apply-to": "queues"}
        return f"policy {name}", "PUT" if f == SET_POLICY else "DELETE", f"/api/policies/%2F/{q(name)}", (
            body if f == SET_POLICY else None)  # fmt: skip
    if f in (SET_PERMISSION, CLEAR_PERMISSION):
        body = {"configure": ".*", "write": ".*", "read": ".*"} if f == SET_PERMISSION else None
        return permission_key(name, routing_key), "PUT" if body else "DELETE", (
            f"/api/permissions/{q(name)}/{q(routing_key)}"), body  # fmt: skip
    raise ValueError(f"unknown metadata change {f!r}")


def permission_key(vhost: str, user: str) -> str:
    return f"permission {user} in {vhost}"


def metadata_view(cluster: ComposeCluster, node: str, timeout: float = 10.0) -> set[str]:
    """The node's exchanges, exchange-to-exchange bindings, queues and policies in "/", its
    users, vhosts and permissions, keyed as check_metadata names them (see _change_request)."""
    get = lambda path: cluster.http(node, "GET", path, timeout=timeout)  # noqa: E731
    view = {exchange_key(x["name"]) for x in get("/api/exchanges/%2F")}
    for b in get("/api/bindings/%2F"):
        if b.get("destination_type") == "exchange":
            view.add(binding_key(b["source"], b["destination"], b["routing_key"]))
    view |= {f"queue {x['name']}" for x in get("/api/queues/%2F")}
    view |= {f"user {x['name']}" for x in get("/api/users")}
    view |= {f"vhost {x['name']}" for x in get("/api/vhosts")}
    view |= {f"policy {x['name']}" for x in get("/api/policies/%2F")}
    view |= {permission_key(x["vhost"], x["user"]) for x in get("/api/permissions")}
    return view


class MetadataWorkload:
    """One thread that, `rate` times a second, makes a uniquely named object or removes one
    made earlier, each through a random node that is not paused. The objects, in turn: an
    exchange, a binding of amq.direct to the workload's own exchange with a unique key, a
    classic queue, a user, a vhost, a policy, a permission of the workload's own user in one
    of the workload's own vhosts (made at the start, never removed: a removed user or vhost
    takes its permissions along). An object is never touched again after an unknown outcome;
    a refused create is tried again (through a random node) half the time, a refused delete
    later."""

    def __init__(self, cluster: ComposeCluster, history: History, rate: float = 3.0, timeout: float = 10.0,
                 process: str = "metadata-0", seed: int | None = None) -> None:  # fmt: skip
        self.cluster, self.history, self.process = cluster, history, process
        self.rate, self.timeout = rate, timeout
        self.prefix = f"chaos-md-{secrets.token_hex(3)}-"
        self.anchor = self.prefix + "anchor"  # the destination of every binding
        self.anchor_user = self.prefix + "user"  # the user of every permission
        self.permission_vhosts = [f"{self.prefix}pv{i}" for i in range(4)]  # the vhosts of the permissions
        self._rng = random.Random(seed)
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    def start(self) -> None:
        def run() -> None:
            try:
                self._run()
            except Exception as e:  # a bug of the harness: report it
                self.errors.append(f"{self.process}: {type(e).__name__}: {e}")

        self._thread = threading.Thread(target=run, name=self.process, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout + 5)

    def _node(self) -> str:
        up = [n for n in self.cluster.nodes if n not in self.cluster.paused]
        return self._rng.choice(up or self.cluster.nodes)

    def _change(self, f: str, name: str, routing_key: str = "") -> str:
        op = metadata_change(self.cluster, self.history, self.process, f, self._node(), name,
                             routing_key=routing_key, timeout=self.timeout)  # fmt: skip
        return op.type

    def _new(self, n: int) -> tuple[str, str, str]:
        """The n-th new object: (create f, name, routing key or user)."""
        name = f"{self.prefix}{n}"
        kinds = [(DECLARE_EXCHANGE, name, ""), (BIND, self.anchor, name), (DECLARE_QUEUE, name, ""),
                 (ADD_USER, name, ""), (ADD_VHOST, name, ""), (SET_POLICY, name, "")]  # fmt: skip
        if self.permission_vhosts:  # one permission per vhost made at the start: unique objects
            kinds.append((SET_PERMISSION, self.permission_vhosts[n % len(self.permission_vhosts)], self.anchor_user))
        return kinds[n % len(kinds)]

    def _run(self) -> None:
        anchors = [(DECLARE_EXCHANGE, self.anchor, ""), (ADD_USER, self.anchor_user, "")]
        anchors += [(ADD_VHOST, v, "") for v in self.permission_vhosts]
        for f, name, key in anchors:  # what later changes need, made first
            while not self._stop.is_set():
                if self._change(f, name, key) == OK:
                    break
                self._stop.wait(0.5)
        permitted: set[str] = set()  # vhosts with a permission made, or unknown: not set again
        made: list[tuple[str, str, str]] = []  # (create f, name, routing key) acknowledged, to remove
        refused: list[tuple[str, str, str]] = []  # creates refused, to try again
        interval = 1.0 / self.rate
        while not self._stop.wait(interval):
            roll = self._rng.random()
            if refused and roll < 0.15:
                obj = refused.pop(0)
                remove = False
            elif made and roll < 0.45:
                obj = made.pop(self._rng.randrange(len(made)))
                remove = True
            else:
                obj = self._new(next(self._ids))
                if obj[0] == SET_PERMISSION:
                    if obj[1] in permitted:
                        continue
                    permitted.add(obj[1])
                remove = False
            create_f, name, key = obj
            f = REMOVE[create_f] if remove else create_f
            outcome = self._change(f, name, key)
            if outcome == OK and f in CREATES:
                made.append(obj)
            elif outcome == FAIL and f in CREATES and self._rng.random() < 0.5:
                refused.append(obj)
            elif outcome == FAIL and remove:
                made.append(obj)
            # else: removed, abandoned after a refusal, or unknown (never touched again)

    def read_all(self, nodes: list[str] | None = None) -> dict[str, set[str] | None]:
        """Every node's view (metadata_view), None for a node that did not answer."""
        out: dict[str, set[str] | None] = {}
        for node in nodes or self.cluster.nodes:
            try:
                out[node] = metadata_view(self.cluster, node)
            except Exception:
                out[node] = None
        return out


__all__ = ["QueueWorkload", "MetadataWorkload", "declare_queue", "queue_address", "metadata_change",
           "metadata_view", "change_outcome", "drain_all", "finish_all", "q_details", "OK", "FAIL", "INFO"]  # fmt: skip


def drain_all(workloads: list[QueueWorkload], quiet: float, timeout: float) -> list[bool]:
    """Drains several workloads at once (their quiet periods overlap): whether each drained
    within `timeout`."""
    deadline = time.monotonic() + timeout
    done = [False] * len(workloads)
    while not all(done) and time.monotonic() < deadline:
        done = [d or w.drained(quiet) for d, w in zip(done, workloads, strict=True)]
        if not all(done):
            time.sleep(0.2)
    return done


def finish_all(workloads: list[QueueWorkload], quiet: float = 2.0, drain_timeout: float = 60.0) -> list[bool]:
    """`finish` of several workloads at once: every publisher stopped, every queue drained
    together, every client stopped; whether each drained."""
    for w in workloads:
        w.stop_publishing()
    drained = drain_all(workloads, quiet, drain_timeout)
    for w, ok in zip(workloads, drained, strict=True):
        w.undrained = None if ok else w.drain_state()  # before its clients stop and change it
        w.history.record("workload", "drain", OK if ok else INFO, w.queue, error=w.undrained)
        w.stop()
    return drained
