"""The hostile and careless clients of issue 14's table, for bench/hostile.py.

One attack runs per process (its own GIL and file descriptors, so it slows
the measuring side no more than any other client would):

    .venv/bin/python bench/hostile_attacks.py ROW --port AMQP --http-port HTTP

It sets itself up (connects, fills its queue, ...), prints one JSON line
{"ready": {...}}, waits for "go" on its standard input, attacks until "stop"
(or end of input, or `--cap` seconds), then prints {"done": {...}} with its
counts and exits. Every attack is bounded in count and time and talks to
loopback only.

Rows of the table left out because they are not load: 8 (a handshake that
hangs one client), 10 (how publishers are held during an alarm), 13 (how an
IPv4-mapped loopback address is classified).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import secrets
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))  # raw_client.py: Warren's engine in the client role

from raw_client import RawClient  # noqa: E402

from amqp import definitions as d  # noqa: E402
from amqp import events as ev  # noqa: E402
from amqp import serial  # noqa: E402
from amqp.framing import FRAME_SASL, encode_frame  # noqa: E402

ARROW = HERE / "arrow"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
BIG_WINDOW = 0x7FFFFFFF  # a session incoming window that never holds the node back


# ------------------------------------------------------------------ helpers


class Stop:
    """Set by the driver's "stop" (or by the attack's cap)."""

    def __init__(self, cap: float):
        self.event = threading.Event()
        self.cap = cap
        self.deadline = float("inf")

    def start(self) -> None:
        self.deadline = time.monotonic() + self.cap

    def __bool__(self) -> bool:
        return self.event.is_set() or time.monotonic() >= self.deadline


class Http:
    """The management API as the default administrator (guest)."""

    def __init__(self, port: int, user: str = "guest", password: str = "guest"):
        self.base = f"http://127.0.0.1:{port}"
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def put(self, path: str, body: dict) -> int:
        req = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode(),
            method="PUT",
            headers={"Authorization": self.auth, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status
        except urllib.error.HTTPError as e:
            return e.code

    def declare_queue(self, name: str) -> int:
        return self.put(f"/api/queues/%2F/{urllib.parse.quote(name, safe='')}", {"durable": False})


def raise_fd_limit(want: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, want), hard))


def fill(port: int, address: str, count: int, body: int) -> None:
    """Publishes count messages of body bytes with arrow (flat out)."""
    out = subprocess.run([str(ARROW), "send", "-H", "127.0.0.1", "-P", str(port), "-a", address, "-c", str(count),
                          "-b", str(body), "-C", "1000", "-w", "1000", "-t", "60"],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result.get("done", 0) < count:
        raise RuntimeError(f"filling {address}: {result}")


def open_sockets(port: int, count: int, first_bytes: Callable[[int], bytes], timeout: float = 5.0) -> list:
    """count TCP connections opened at once (non-blocking connects, so a node that stops
    accepting costs `timeout` once, not per socket); each then sends first_bytes(i)."""
    sel = selectors.DefaultSelector()
    pending = []
    for i in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE, i)
        pending.append(s)
    opened: list[tuple[int, socket.socket]] = []
    deadline = time.monotonic() + timeout
    while len(sel.get_map()) and time.monotonic() < deadline:
        for key, _ in sel.select(deadline - time.monotonic()):
            s = key.fileobj
            sel.unregister(s)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                opened.append((key.data, s))
            else:
                s.close()
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    sel.close()
    for i, s in opened:
        data = first_bytes(i)
        if data:
            s.send(data)
    return [s for _, s in opened]


def still_open(sockets: list) -> int:
    """How many of the sockets the node has not closed (drains what it sent)."""
    alive = 0
    for s in sockets:
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
        except BlockingIOError:
            alive += 1  # nothing more to read and no EOF: open
        except OSError:
            pass
    return alive


def sasl_login(port: int, mechanism: str, response: bytes, timeout: float = 30.0) -> tuple[RawClient, bool]:
    """A RawClient through SASL; returns it and whether the node said ok."""
    client = RawClient(port)
    client.engine.start(sasl=True)
    client.wait_event(ev.SaslMechanismsReceived, timeout)
    client.engine.sasl_init(mechanism, response)
    outcome = client.wait_event(ev.SaslOutcomeReceived, timeout)
    return client, outcome.code == d.SASL_OK


def open_client(port: int, user: str | None = None, password: str = "") -> RawClient:
    """Logged in (PLAIN, or ANONYMOUS without a user) and OPENed."""
    if user is None:
        client, ok = sasl_login(port, "ANONYMOUS", b"hostile-bench")
    else:
        client, ok = sasl_login(port, "PLAIN", f"\0{user}\0{password}".encode())
    if not ok:
        raise RuntimeError(f"login refused for {user or 'ANONYMOUS'}")
    client.engine.open(hostname="localhost")
    client.wait_event(ev.ConnectionOpened)
    return client


def begin_wide(client: RawClient):
    """A session whose incoming window never stops the node sending."""
    session = client.engine.create_session()
    session.begin(incoming_window=BIG_WINDOW)
    client.wait_event(ev.SessionBegun, session=session)
    return session


# ------------------------------------------------------------------ the attacks
# Each is a class: __init__ sets up (before "ready"), run(stop) attacks, stats() reports.


class IdleSockets:
    """Row 1: 500 sockets that never finish the handshake, 100 of each kind."""

    KINDS = ("silent", "3 header bytes", "SASL header only", "SASL login, no OPEN", "1 byte/s")

    def __init__(self, args):
        raise_fd_limit(4096)
        self.trickle = SASL_HEADER + encode_frame(0, d.SaslInit(mechanism="ANONYMOUS", initial_response=b"x"),
                                                  type_=FRAME_SASL) + AMQP_HEADER + encode_frame(
            0, d.Open(container_id="trickle", hostname="localhost"))  # fmt: skip
        login = SASL_HEADER + encode_frame(0, d.SaslInit(mechanism="ANONYMOUS", initial_response=b"x"),
                                           type_=FRAME_SASL)  # fmt: skip
        firsts = [b"", b"AMQ", SASL_HEADER, login, self.trickle[:1]]
        per = args.sockets // len(firsts)
        self.sockets = open_sockets(args.port, per * len(firsts), lambda i: firsts[i // per])
        self.slow = [s for i, s in enumerate(self.sockets) if i // per == len(firsts) - 1]
        self.sent = 1

    def ready(self) -> dict:
        return {"sockets": len(self.sockets)}

    def run(self, stop: Stop) -> None:
        while not stop and self.sent < len(self.trickle):
            stop.event.wait(1.0)
            for s in self.slow:
                try:
                    s.send(self.trickle[self.sent : self.sent + 1])
                except OSError:
                    pass
            self.sent += 1

    def stats(self) -> dict:
        return {"sockets": len(self.sockets), "still_open": still_open(self.sockets),
                "trickled_bytes": self.sent}  # fmt: skip


class FdExhaustion(IdleSockets):
    """Row 3: 1,100 silent sockets against a node limited to 1,024 descriptors."""

    def __init__(self, args):
        raise_fd_limit(4096)
        self.port, self.count = args.port, args.sockets
        self.sockets: list = []

    def ready(self) -> dict:
        return {}

    def run(self, stop: Stop) -> None:
        # opened on "go": the driver sends it once the pair is connected
        self.sockets = open_sockets(self.port, self.count, lambda i: b"")

    def stats(self) -> dict:
        return {"sockets": len(self.sockets), "still_open": still_open(self.sockets)}


class Guessing:
    """Rows 2 and 11: clients logging in with SASL PLAIN as fast as they can,
    as a known user with wrong passwords, or as unknown users."""

    def __init__(self, args, known_user: str | None, clients: int):
        self.port, self.user, self.clients = args.port, known_user, clients
        self.tries = self.refused = self.errors = 0
        self.lock = threading.Lock()
        self.elapsed = 0.0

    def ready(self) -> dict:
        return {"clients": self.clients, "user": self.user or "(unknown users)"}

    def one(self) -> None:
        name = self.user or "nobody-" + secrets.token_hex(4)
        password = secrets.token_hex(8)  # never the same twice: no cache answers
        try:
            client, ok = sasl_login(self.port, "PLAIN", f"\0{name}\0{password}".encode())
            client.close()
            with self.lock:
                self.tries += 1
                self.refused += not ok
        except (OSError, AssertionError):
            with self.lock:
                self.errors += 1

    def run(self, stop: Stop) -> None:
        began = time.monotonic()

        def loop():
            while not stop:
                self.one()

        threads = [threading.Thread(target=loop) for _ in range(self.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.elapsed = time.monotonic() - began

    def stats(self) -> dict:
        return {"tries": self.tries, "refused": self.refused, "errors": self.errors,
                "tries_per_s": round(self.tries / self.elapsed, 1) if self.elapsed else 0}  # fmt: skip


class SlowReader:
    """Row 4: a consumer that grants credit for a whole queue of 1 KB messages
    (and a session window to match) and never reads its socket."""

    def __init__(self, args):
        Http(args.http_port).declare_queue("deep")
        fill(args.port, "/queues/deep", args.messages, 1024)
        self.client = open_client(args.port)
        self.client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        session = begin_wide(self.client)
        self.client.receiver(session, "/queues/deep", credit=args.messages)
        self.client.flush()  # the FLOW granting the credit; from here on nothing is read
        self.messages = args.messages

    def ready(self) -> dict:
        return {"queued": self.messages}

    def run(self, stop: Stop) -> None:
        while not stop:
            stop.event.wait(0.5)  # not reading is the attack

    def stats(self) -> dict:
        self.client.close()
        return {"credit": self.messages}


class RangeSettlement:
    """Row 5: a consumer holding 100k unsettled deliveries settles them one at
    a time from the top, each in a DISPOSITION whose range runs 2^30 ids up
    (so it settles one delivery and names a span wider than the unsettled
    map), 500 frames per write; a FLOW with echo marks each round's end."""

    PER_ROUND = 500

    def __init__(self, args):
        Http(args.http_port).declare_queue("unsettled")
        fill(args.port, "/queues/unsettled", args.messages, 12)
        self.client = open_client(args.port)
        self.session = begin_wide(self.client)
        self.link = self.client.receiver(self.session, "/queues/unsettled", credit=args.messages)
        got = self.client.receive(args.messages, timeout=300)
        self.ids = sorted(x.id for x in got)
        self.client.events.clear()
        self.client.received.clear()
        self.rounds = self.settled = 0

    def ready(self) -> dict:
        return {"unsettled": len(self.ids)}

    def run(self, stop: Stop) -> None:
        while not stop and len(self.ids) >= self.PER_ROUND:
            frames = []
            for _ in range(self.PER_ROUND):
                top = self.ids.pop()
                frames.append(
                    encode_frame(
                        self.session.channel,
                        d.Disposition(
                            role=d.RECEIVER, first=top, last=serial.add(top, 1 << 30), settled=True, state=d.Accepted()
                        ),
                    )
                )
            self.client.sock.sendall(b"".join(frames))
            self.link.flow(link_credit=0, echo=True)
            self.client.wait_for(lambda e: type(e) is ev.LinkFlow and e.link is self.link, timeout=120)
            self.client.events.clear()
            self.client.received.clear()
            self.rounds += 1
            self.settled += self.PER_ROUND

    def stats(self) -> dict:
        self.client.close()
        return {"rounds": self.rounds, "dispositions": self.settled}


class HugeProperties:
    """Row 6: 15 MB messages carrying ~1.4M application-properties entries,
    published one after another to amq.direct (no binding matches)."""

    def __init__(self, args):
        self.entries = args.entries
        self.payload = huge_properties_message(self.entries)
        self.client = open_client(args.port)
        self.session = self.client.begin()
        self.link = self.client.sender(self.session, "/exchanges/amq.direct/x")
        self.sent = self.outcomes = 0

    def ready(self) -> dict:
        return {"message_bytes": len(self.payload), "entries": self.entries}

    def run(self, stop: Stop) -> None:
        while not stop:
            if self.link.link_credit <= 0:
                self.client.wait_for(lambda e: type(e) is ev.LinkFlow and self.link.link_credit > 0, timeout=120)
            delivery = self.client.send(self.link, self.payload)
            self.sent += 1
            self.client.wait_for(
                lambda e, sent=delivery: type(e) is ev.DeliveriesUpdated and sent in e.deliveries, timeout=120
            )
            self.outcomes += 1
            self.client.events.clear()
            self.client.received.clear()

    def stats(self) -> dict:
        self.client.close()
        return {"sent": self.sent, "outcomes": self.outcomes}


def huge_properties_message(entries: int) -> bytes:
    """application-properties {"00002a": 42 % 256, ...} (10 bytes an entry) and a 1 MB data body."""
    items = bytearray()
    for i in range(entries):
        items += b"\xa1\x06" + f"{i:06x}".encode() + b"\x50" + bytes((i & 0xFF,))
    props = b"\x00\x53\x74\xd1" + struct.pack(">II", len(items) + 4, 2 * entries) + items
    body = b"x" * (1 << 20)
    return props + b"\x00\x53\x75\xb0" + struct.pack(">I", len(body)) + body


class BacktrackingPattern:
    """Row 7: the administrator gives a user the read pattern (a+)+$; the user
    then attaches to a queue named a*25 + "!" again and again."""

    NAME = "a" * 25 + "!"

    def __init__(self, args):
        http = Http(args.http_port)
        self.user_status = http.put("/api/users/regex-victim", {"password": "regex-victim", "tags": ""})
        self.permission_status = http.put("/api/permissions/%2F/regex-victim",
                                          {"configure": ".*", "write": ".*", "read": "(a+)+$"})  # fmt: skip
        self.attempts = 0
        self.client = None
        if self.permission_status < 300:  # a node that refuses the pattern has nothing left to attack
            self.client = open_client(args.port, "regex-victim", "regex-victim")
            self.session = self.client.begin()

    def ready(self) -> dict:
        return {"user_status": self.user_status, "permission_status": self.permission_status}

    def run(self, stop: Stop) -> None:
        while self.client is not None and not stop:
            link = self.session.create_link(f"r{self.attempts}", d.RECEIVER)
            link.attach(source=d.Source(address="/queues/" + self.NAME), target=d.Target())
            # refused (unauthorized-access, or not-found once the check is quick): ATTACH then DETACH
            self.client.wait_event(ev.LinkDetached, timeout=120, link=link)
            self.attempts += 1
            self.client.events.clear()
            self.client.received.clear()

    def stats(self) -> dict:
        if self.client is not None:
            self.client.close()
        return {"user_status": self.user_status, "permission_status": self.permission_status,
                "attaches": self.attempts}  # fmt: skip


class SessionFlood:
    """Row 9: one connection pipelines 2,048 BEGINs, each followed by its
    ATTACHes (37 publisher links; 300 on the first session, past the
    255-handle limit), in one write, then drains whatever the node answers."""

    def __init__(self, args):
        Http(args.http_port).declare_queue("sink")
        self.client = open_client(args.port)
        self.sessions, self.links = args.sessions, args.links
        self.replied = 0
        self.closed = False

    def ready(self) -> dict:
        return {"sessions": self.sessions, "links_per_session": self.links}

    def frames(self) -> bytes:
        out = []
        target = d.Target(address="/queues/sink")
        for ch in range(self.sessions):
            out.append(encode_frame(ch, d.Begin(next_outgoing_id=0, incoming_window=2048, outgoing_window=2048,
                                                handle_max=0xFFFFFFFF)))  # fmt: skip
            for h in range(300 if ch == 0 else self.links):
                out.append(encode_frame(ch, d.Attach(name=f"s{ch}-l{h}", handle=h, role=d.SENDER,
                                                     snd_settle_mode=d.SND_UNSETTLED, source=d.Source(),
                                                     target=target, initial_delivery_count=0)))  # fmt: skip
        return b"".join(out)

    def run(self, stop: Stop) -> None:
        data = self.frames()
        sock = self.client.sock
        sock.settimeout(None)  # a node busy for seconds must not time out our write
        threading.Thread(target=self.drain, args=(sock,), daemon=True).start()
        threading.Thread(target=sock.sendall, args=(data,), daemon=True).start()
        while not stop:
            stop.event.wait(0.5)

    def drain(self, sock: socket.socket) -> None:
        """Counts the node's answers as raw bytes: the engine would choke on replies to frames it never sent."""
        while True:
            try:
                chunk = sock.recv(1 << 20)
            except OSError:
                return
            if not chunk:
                self.closed = True
                return
            self.replied += len(chunk)

    def stats(self) -> dict:
        self.client.close()
        return {"sessions": self.sessions, "links": 300 + (self.sessions - 1) * self.links,
                "reply_bytes": self.replied, "closed_by_node": self.closed}  # fmt: skip


class CostlyHash(Guessing):
    """Row 12: the administrator stores a password hash of 10^7 PBKDF2
    iterations for a user; a client then logs in as that user in a loop
    (wrong passwords, so no cache answers)."""

    def __init__(self, args):
        super().__init__(args, "slow-hash", 1)
        salt, digest = secrets.token_hex(16), secrets.token_hex(32)
        self.put_status = Http(args.http_port).put(
            "/api/users/slow-hash", {"password_hash": f"pbkdf2-sha256${args.iterations}${salt}${digest}", "tags": ""}
        )

    def ready(self) -> dict:
        return {"put_status": self.put_status}

    def stats(self) -> dict:
        return {"put_status": self.put_status, **super().stats()}


ATTACKS: dict[int, tuple[str, Callable]] = {
    1: ("500 half-open sockets (silent, 3 header bytes, SASL header, SASL without OPEN, 1 byte/s)", IdleSockets),
    2: ("2 clients guessing passwords of a known user", lambda a: Guessing(a, "guest", 2)),
    3: ("1,100 idle sockets, node under ulimit -n 1024", FdExhaustion),
    4: ("consumer with credit for 100k x 1 KB that never reads", SlowReader),
    5: ("500 DISPOSITIONs per round over 100k unsettled deliveries", RangeSettlement),
    6: ("15 MB messages with 1.4M application-properties to amq.direct", HugeProperties),
    7: ("read permission (a+)+$, attaches to a*25+'!'", BacktrackingPattern),
    9: ("2,048 sessions + ~76k links pipelined on one connection", SessionFlood),
    11: ("2 clients guessing unknown user names", lambda a: Guessing(a, None, 2)),
    12: ("logins as a user whose stored hash has 10^7 iterations", CostlyHash),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run one attack of issue 14's table (driven by bench/hostile.py).")
    ap.add_argument("row", type=int, choices=sorted(ATTACKS))
    ap.add_argument("--port", type=int, required=True, help="the node's AMQP port")
    ap.add_argument("--http-port", type=int, required=True)
    ap.add_argument("--cap", type=float, default=60.0, help="seconds the attack runs at most after go")
    ap.add_argument("--sockets", type=int, help="rows 1 and 3 (500, 1100)")
    ap.add_argument("--messages", type=int, default=100_000, help="rows 4 and 5: messages in the queue")
    ap.add_argument("--entries", type=int, default=1_400_000, help="row 6: application-properties entries")
    ap.add_argument("--sessions", type=int, default=2048, help="row 9")
    ap.add_argument("--links", type=int, default=37, help="row 9: links per session after the first")
    ap.add_argument("--iterations", type=int, default=10_000_000, help="row 12: PBKDF2 iterations")
    args = ap.parse_args(argv)
    if args.sockets is None:
        args.sockets = 1100 if args.row == 3 else 500
    attack = ATTACKS[args.row][1](args)
    stop = Stop(args.cap)
    print(json.dumps({"ready": attack.ready()}), flush=True)
    if sys.stdin.readline().strip() != "go":
        return 0
    stop.start()

    def watch_stdin() -> None:
        sys.stdin.readline()  # "stop" or end of input
        stop.event.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    began = time.monotonic()
    error = None
    try:
        attack.run(stop)
        stop.event.wait(max(0.0, stop.deadline - time.monotonic()))  # an attack that finished early holds its state
    except Exception as e:  # report, don't hide: the driver prints it
        error = f"{type(e).__name__}: {e}"[:300]
    done = {"seconds": round(time.monotonic() - began, 1), **attack.stats()}
    if error:
        done["error"] = error
    print(json.dumps({"done": done}), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
