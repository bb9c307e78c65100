#!/usr/bin/env python3
"""One side of a proton pair, plain AMQP or AMQPS, for bench/tls.py (arrow has
no TLS). Prints one JSON line when done: {"role", "count", "first", "last"}
(wall-clock seconds of the first and last message sent-and-accepted or
received).

    bench/tls_client.py send|recv URL ADDRESS COUNT [--body 12] [--ca FILE] [--window 1000]
    bench/tls_client.py logins URL COUNT [--ca FILE]   # connect, log in, open, close; COUNT times
"""

from __future__ import annotations

import argparse
import json
import time

from proton import Message, SSLDomain
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection


def ssl_domain(url: str, ca: str | None) -> SSLDomain | None:
    if not url.startswith("amqps://"):
        return None
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(ca)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    return domain


class Side(MessagingHandler):
    def __init__(self, args):
        super().__init__(prefetch=args.window if args.role == "recv" else 0, auto_accept=True)
        self.args, self.done, self.first, self.last = args, 0, 0.0, 0.0
        self.sent = 0
        self.body = b"x" * args.body

    def on_start(self, event):
        conn = event.container.connect(self.args.url, ssl_domain=ssl_domain(self.args.url, self.args.ca),
                                       user="guest", password="guest", allowed_mechs="PLAIN")
        if self.args.role == "send":
            event.container.create_sender(conn, self.args.address)
        else:
            event.container.create_receiver(conn, self.args.address)

    def on_sendable(self, event):
        sender = event.sender
        while sender.credit and self.sent < self.args.count:
            if not self.first:
                self.first = time.time()
            sender.send(Message(body=self.body, durable=True))
            self.sent += 1

    def on_accepted(self, event):
        self._count(event)

    def on_message(self, event):
        if not self.first:
            self.first = time.time()
        self._count(event)

    def _count(self, event):
        self.done += 1
        if self.done == self.args.count:
            self.last = time.time()
            event.connection.close()


def logins(args) -> dict:
    domain = ssl_domain(args.url, args.ca)
    first = time.time()
    for _ in range(args.count):
        BlockingConnection(args.url, ssl_domain=domain, user="guest", password="guest",
                           allowed_mechs="PLAIN", timeout=30).close()
    return {"role": "logins", "count": args.count, "first": first, "last": time.time()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=("send", "recv", "logins"))
    ap.add_argument("url")
    ap.add_argument("rest", nargs="+")
    ap.add_argument("--body", type=int, default=12)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--ca")
    args = ap.parse_args()
    if args.role == "logins":
        args.count = int(args.rest[0])
        print(json.dumps(logins(args)), flush=True)
        return
    args.address, args.count = args.rest[0], int(args.rest[1])
    side = Side(args)
    Container(side).run()
    print(json.dumps({"role": args.role, "count": side.done, "first": side.first, "last": side.last}), flush=True)


if __name__ == "__main__":
    main()
