"""Issue 14, rows 2 and 11: password guessing must not stall the node.

PBKDF2 runs in the node's login threads (node/client/login.py), so while
logins wait for it the event loop keeps serving everyone else; failed logins
make the next one from the same address wait."""

from __future__ import annotations

import hashlib
import socket
import threading
import time

import pytest
from mgmt_client import Api
from raw_client import RawClient

from amqp import definitions as d
from amqp import events as ev
from amqp.connection import CLIENT, Connection
from amqp.message import Message as WireMessage

FLOOD = 20


@pytest.fixture
def gate_hashing(monkeypatch):
    """From the call on, PBKDF2 waits for the test's go-ahead (the returned
    event): logins stay in flight for as long as the test needs, whatever the
    machine's speed."""
    gate = threading.Event()
    real = hashlib.pbkdf2_hmac

    def gated(name: str, password: bytes, salt: bytes, iterations: int, *rest) -> bytes:
        assert gate.wait(30), "the test never opened the gate"
        return real(name, password, salt, iterations, *rest)

    def install() -> threading.Event:
        monkeypatch.setattr(hashlib, "pbkdf2_hmac", gated)
        return gate

    yield install
    gate.set()


class SaslOnly:
    """A client that sends its SASL PLAIN init and reads the outcome."""

    def __init__(self, port: int, user: str, password: str):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.engine = Connection(CLIENT)
        self.engine.start(sasl=True)
        self.engine.sasl_init("PLAIN", b"\0" + user.encode() + b"\0" + password.encode())
        self.sock.sendall(self.engine.data_to_send())

    def outcome(self) -> int:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            data = self.sock.recv(65536)
            assert data, "the broker hung up before the SASL outcome"
            for e in self.engine.receive_data(data):
                if type(e) is ev.SaslOutcomeReceived:
                    return e.code
        raise AssertionError("no SASL outcome")

    def close(self) -> None:
        self.sock.close()


def wait_until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_a_login_flood_does_not_stop_other_clients(broker_factory, gate_hashing):
    b = broker_factory(login_workers=1)
    b.add_user("alice", "secret")
    b.declare_queue("q")
    worker = RawClient(b.port)  # ANONYMOUS: no hash to compute
    worker.connect()
    session = worker.begin()
    sender = worker.sender(session, "/queues/q")
    worker.receiver(session, "/queues/q", credit=100)
    gate = gate_hashing()

    flood = [SaslOnly(b.port, "alice", f"guess-{i}") for i in range(FLOOD)]
    try:
        wait_until(lambda: b.call(lambda: b.broker.logins.hashing) == FLOOD)
        # every guess is waiting for PBKDF2, and the loop still serves the worker
        for i in range(50):
            delivery = worker.send(sender, WireMessage.build(body=f"m{i}".encode()).payload)
            worker.wait_for(lambda e, dl=delivery: type(e) is ev.DeliveriesUpdated and dl in e.deliveries)
            assert type(delivery.state) is d.Accepted and delivery.remote_settled
        assert [WireMessage.from_bytes(x.payload).body for x in worker.receive(50)] == [f"m{i}".encode()
                                                                                     for i in range(50)]
        assert b.call(lambda: b.broker.logins.hashing) == FLOOD
        gate.set()
        assert [c.outcome() for c in flood] == [d.SASL_AUTH] * FLOOD
    finally:
        for c in flood:
            c.close()
        worker.close()


def test_a_right_password_is_checked_off_the_loop_too(broker_factory, gate_hashing):
    b = broker_factory(login_workers=1)
    b.add_user("alice", "secret")
    gate = gate_hashing()
    client = SaslOnly(b.port, "alice", "secret")
    try:
        wait_until(lambda: b.call(lambda: b.broker.logins.hashing) == 1)
        gate.set()
        assert client.outcome() == d.SASL_OK
    finally:
        client.close()


def test_logins_beyond_max_pending_are_refused_for_now(broker_factory, gate_hashing):
    b = broker_factory(login_workers=1, login_max_pending=2)
    b.add_user("alice", "secret")
    gate = gate_hashing()
    waiting = [SaslOnly(b.port, "alice", "secret") for _ in range(2)]
    try:
        wait_until(lambda: b.call(lambda: b.broker.logins.pending) == 2)
        third = SaslOnly(b.port, "alice", "secret")
        assert third.outcome() == d.SASL_SYS_TEMP  # at once, without waiting for the others
        third.close()
        gate.set()
        assert [c.outcome() for c in waiting] == [d.SASL_OK, d.SASL_OK]
    finally:
        for c in waiting:
            c.close()


def test_pipelined_frames_behind_the_sasl_init_are_read_after_the_outcome(broker):
    """The outcome now comes later than the init's own turn of the loop: the
    AMQP header and OPEN written with the init must still be answered."""
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    client = Connection(CLIENT)
    client.start(sasl=True)
    client.sasl_init("PLAIN", b"\0guest\0guest")
    client.sasl_done = True  # what the client assumes: header and OPEN follow at once
    client.out.append(b"AMQP\x00\x01\x00\x00")
    client.open()
    sock.sendall(client.data_to_send())
    raw = b""
    deadline = time.monotonic() + 10
    try:
        while b"\x00\x53\x10" not in raw[8:]:  # the broker's OPEN performative
            assert time.monotonic() < deadline, raw
            data = sock.recv(65536)
            assert data, raw
            raw += data
    finally:
        sock.close()


def test_failed_logins_delay_the_next_from_the_same_address(broker_factory):
    b = broker_factory(login_failure_delay=0.05, login_failure_delay_max=0.2)
    b.add_user("alice", "secret")
    first = SaslOnly(b.port, "alice", "wrong")
    assert first.outcome() == d.SASL_AUTH
    first.close()
    assert b.call(lambda: b.broker.logins.delayed) == 0
    second = SaslOnly(b.port, "alice", "secret")
    assert second.outcome() == d.SASL_OK  # allowed, once it has waited its turn
    second.close()
    assert b.call(lambda: b.broker.logins.delayed) == 1


def test_a_login_the_cache_answers_is_not_delayed(broker_factory):
    b = broker_factory(login_failure_delay=0.05, login_failure_delay_max=0.2)
    b.add_user("alice", "secret")
    ok = SaslOnly(b.port, "alice", "secret")
    assert ok.outcome() == d.SASL_OK
    ok.close()
    wrong = SaslOnly(b.port, "alice", "wrong")
    assert wrong.outcome() == d.SASL_AUTH
    wrong.close()
    again = SaslOnly(b.port, "alice", "secret")
    assert again.outcome() == d.SASL_OK
    again.close()
    assert b.call(lambda: b.broker.logins.delayed) == 0


def test_http_basic_auth_takes_the_same_path(broker_factory):
    b = broker_factory(http_port=0, login_failure_delay=0.05, login_failure_delay_max=0.2)
    api = Api(b.broker.http_port)
    assert api.as_user("guest", "wrong").get("/api/overview").status == 401
    assert api.get("/api/overview").status == 200
    assert b.call(lambda: b.broker.logins.delayed) == 1
