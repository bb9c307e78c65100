"""`warren migrate`: moves a RabbitMQ into Warren, over both HTTP APIs.

    warren migrate --from http://user:pass@rabbit:15672 [--amqp amqp://...] [--follow]
                   [--skip SECTION:NAME ...] [--queue-type quorum] [ctl's --host/--port/--user/...]
    warren migrate --stop

1. RabbitMQ's definitions (GET /api/definitions) are imported into Warren
   (POST /api/definitions). What Warren refuses stops the migration there,
   named, before any message moves; --skip leaves a named item out, and
   each item left out is printed.
2. A shovel (a `shovel` parameter named migrate-QUEUE) is made from every
   non-empty RabbitMQ queue (with --follow every queue: producers still
   publish to them) to the Warren queue of the same name, AMQP 1.0 from
   RabbitMQ's plugin, ack-mode on-confirm: a message leaves RabbitMQ only
   once Warren has it.
3. Progress is shown until RabbitMQ's queues are drained; then the shovels
   are deleted and the exit code is 0. With --follow the shovels keep
   running until Ctrl-C, which leaves them running (and says so);
   `warren migrate --stop` deletes them later.

Warren is reached with ctl's options and WARREN_CTL_* variables.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any
from urllib.parse import quote

from node.ops import ctl, migrate_source
from node.ops.ctl_kit import EX_DATAERR, EX_UNAVAILABLE, EX_USAGE, Client, CtlError
from node.ops.migrate_progress import Display, QueueProgress
from node.shovel.definition import amqp10_to_local

PREFIX = "migrate-"  # the shovels this command makes, so that --stop finds them
STATS_LAG = 15.0  # seconds: RabbitMQ's queue statistics come every 5 s by default


def _q(name: str) -> str:
    return quote(name, safe="")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("migrate", parents=[ctl.common_options()], help="move a RabbitMQ into Warren",
                       description=__doc__.split("\n\n")[0])  # fmt: skip
    p.add_argument("--from", dest="source", help="RabbitMQ's management API, http(s)://user:password@host:port")
    p.add_argument("--from-cacert", default="", help="https --from: the CA file of its certificate")
    p.add_argument("--amqp", help="RabbitMQ's AMQP URI for the shovels (default: --from's host, 5672)")
    p.add_argument("--follow", action="store_true", help="keep the shovels running while producers move")
    p.add_argument("--stop", action="store_true", help="delete the shovels an earlier migrate left running")
    p.add_argument("--skip", action="append", default=[], metavar="SECTION:NAME",
                   help="leave this definitions item out (e.g. policies:ha-all); repeatable")  # fmt: skip
    p.add_argument("--queue-type", help="declare RabbitMQ's classic queues as this type in Warren (e.g. quorum)")
    p.add_argument("--prefetch", type=int, default=1000, help="each shovel's src-prefetch-count (1000)")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between progress reports (2)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        ctl.settings(args)
        warren = Client(args.host, args.port, args.user, args.password, args.timeout, args.cacert)
        if args.json:
            raise CtlError("migrate has no --json: when stdout is not a terminal it writes plain lines", EX_USAGE)
        if args.stop:
            return _stop(warren)
        if not args.source:
            raise CtlError("give --from http(s)://user:password@host:port (or --stop)", EX_USAGE)
        return Migration(args, warren, Display(sys.stdout)).run()
    except KeyboardInterrupt:  # before the watch (which has its own): during the import or the shovels' making
        print("interrupted: what was imported stays, and so do any shovels made; `warren migrate --stop` "
              "deletes those", file=sys.stderr)  # fmt: skip
        return 130
    except CtlError as e:
        print(f"Error: {e}", file=sys.stderr)
        return e.code


def _stop(warren: Client) -> int:
    mine = [s for s in warren.get("/api/shovels") if s["name"].startswith(PREFIX)]
    for s in mine:
        warren.delete(f"/api/parameters/shovel/{_q(s['vhost'])}/{_q(s['name'])}")
        print(f"deleted shovel {s['name']} in vhost '{s['vhost']}'")
    if not mine:
        print("no migrate shovels are running")
    return 0


class Migration:
    def __init__(self, args: argparse.Namespace, warren: Client, display: Display):
        self.args, self.warren, self.display = args, warren, display
        self.source = migrate_source.source_client(args.source, args.timeout, args.from_cacert)
        self.amqp = migrate_source.amqp_uri(args.source, args.amqp)
        self.skip = migrate_source.parse_skip(args.skip)
        self.queues: list[QueueProgress] = []
        self._empty_since: dict[str, float] = {}

    def run(self) -> int:
        version = migrate_source.source_version(self.source)
        self.display.say(f"RabbitMQ {version} at {self.source.base}")
        imported = {(q.get("vhost", "/"), q["name"]) for q in self._import().get("queues") or []}
        backlog = migrate_source.source_queues(self.source)
        for (vhost, name), messages in sorted(backlog.items()):
            if (vhost, name) not in imported:  # exclusive (not in definitions) or --skip: no queue to fill
                self.display.say(f"not moved: queue '{name}' in vhost '{vhost}' ({messages} messages) is not "
                                 "in the imported definitions")  # fmt: skip
            elif messages > 0 or self.args.follow:
                self._shovel(vhost, name, migrate_source.queue_address(version, name))
                self.queues.append(QueueProgress(vhost, name, messages))
        if not self.queues:
            self.display.say("no messages to move: every queue imported is empty in RabbitMQ")
            return 0
        self.display.say(f"shovels made for {len(self.queues)} queue(s), ack-mode on-confirm")
        try:
            return self._watch()
        except KeyboardInterrupt:
            self.display.say("interrupted: the shovels keep running; `warren migrate --stop` deletes them")
            return 0

    def _import(self) -> dict:
        doc, skipped = migrate_source.prepare(self.source.get("/api/definitions"), self.skip, self.args.queue_type)
        for line in skipped:
            self.display.say(line)
        try:
            self.warren.post("/api/definitions", doc)
        except CtlError as e:
            if e.status not in (400, 404, 409):
                raise
            raise CtlError(f"Warren refuses RabbitMQ's definitions: {e}. Nothing was moved; --skip SECTION:NAME "
                           "leaves an item out", EX_DATAERR) from None  # fmt: skip
        counts = ", ".join(f"{len(doc.get(k) or [])} {k}" for k in ("vhosts", "users", "queues", "exchanges",
                                                                     "bindings", "policies"))  # fmt: skip
        self.display.say(f"definitions imported: {counts}")
        return doc

    def _shovel(self, vhost: str, name: str, address: str) -> None:
        value = amqp10_to_local(migrate_source.vhost_uri(self.amqp, vhost), address, name,
                                prefetch=self.args.prefetch)  # fmt: skip
        self.warren.put(f"/api/parameters/shovel/{_q(vhost)}/{_q(PREFIX + name)}", {"value": value})

    def _drained(self, p: QueueProgress) -> bool:
        """RabbitMQ holds none of the queue's messages (ready or unacknowledged),
        and Warren confirmed at least what was there, or RabbitMQ has said 0
        for longer than its statistics lag (a consumer still on RabbitMQ may
        have taken some)."""
        if p.left:
            self._empty_since.pop(p.label, None)
            return False
        since = self._empty_since.setdefault(p.label, time.monotonic())
        return p.moved >= p.initial or time.monotonic() - since >= STATS_LAG

    def _watch(self) -> int:
        while True:
            try:
                left = migrate_source.source_queues(self.source)
                status = {(s["vhost"], s["name"]): s for s in self.warren.get("/api/shovels")}
            except CtlError as e:
                if e.code != EX_UNAVAILABLE:
                    raise
                # a node restarting or a cluster electing: the shovels live in
                # Warren's metadata and go on; this only watches them
                self.display.say(f"unreachable, retrying: {e}")
                time.sleep(self.args.interval)
                continue
            for p in self.queues:
                s = status.get((p.vhost, PREFIX + p.name), {})
                p.update(left.get((p.vhost, p.name), 0), int(s.get("forwarded") or 0), s.get("state", "absent"),
                         s.get("reason") or "")  # fmt: skip
            self.display.report(self.queues)
            if not self.args.follow and all(self._drained(p) for p in self.queues):
                break
            time.sleep(self.args.interval)  # the APIs have no event to wait on
        for p in self.queues:
            self.warren.delete(f"/api/parameters/shovel/{_q(p.vhost)}/{_q(PREFIX + p.name)}")
        moved = sum(p.moved for p in self.queues)
        self.display.say(f"done: {moved} messages moved from {len(self.queues)} queue(s); shovels deleted")
        return 0
