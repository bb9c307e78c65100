"""Which node runs which shovel, and the shovels this node runs.

Every node reads the same `shovel` parameters from the metadata and the same
members; each shovel goes to the member that ranks highest for it by
rendezvous hashing (BLAKE2b of vhost, name and member) among the members this
node reaches. All nodes that reach each other so agree without a message,
and when the chosen node stops or is cut off, the others stop reaching it
and the next in rank takes over on the next check (every CHECK_INTERVAL s).
A node that reaches no more than half of the members runs none: it is the
one cut off, and the majority side runs its shovels.

The status of shovels running elsewhere is asked of their node over the
cluster's node calls (SHOVEL_STATUS_CALL); a restart likewise.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from metadata import commands as mc
from metadata import effects as fx
from node.shovel import definition as shovel_definition
from node.shovel.runner import ShovelPorts, ShovelRunner
from node.tasks import BackgroundTasks

__all__ = ["ShovelManager", "owner_of"]

log = logging.getLogger("warren.shovel")
COMPONENT = "shovel"
CHECK_INTERVAL = 1.0  # seconds between placement checks (a member lost shows up here)
SHOVEL_STATUS_CALL, SHOVEL_RESTART_CALL = "shovel.status", "shovel.restart"
CALL_TIMEOUT = 3.0
HANDOVER_TIMEOUT = 10.0  # seconds a shovel moving away may take to finish what it has in flight


class ShovelNode(ShovelPorts, Protocol):
    """What the manager needs of its node beyond what a shovel does."""

    def shovel_parameters(self) -> dict[tuple[str, str], str]: ...  # (vhost, name) -> JSON text

    def members(self) -> list[str]: ...

    def is_reachable(self, member: str) -> bool: ...

    async def propose(self, command: Any) -> Any: ...

    async def call(self, peer: str, method: str, args: dict, timeout: float) -> dict: ...


def owner_of(vhost: str, name: str, members: Iterable[str]) -> str | None:
    """The member that runs shovel `name` of `vhost` among `members` (rendezvous hashing)."""

    def rank(member: str) -> bytes:
        return hashlib.blake2b(f"{vhost}\0{name}\0{member}".encode(), digest_size=16).digest()

    return max(members, key=rank, default=None)


class _Running:
    def __init__(self, runner: ShovelRunner, value: str) -> None:
        self.runner, self.value = runner, value
        self.task: asyncio.Task | None = None


class ShovelManager:
    def __init__(self, node: ShovelNode, loop: asyncio.AbstractEventLoop) -> None:
        self.node = node
        self.loop = loop
        self._running: dict[tuple[str, str], _Running] = {}
        self._tasks = BackgroundTasks(loop, log)
        self._timer: asyncio.TimerHandle | None = None
        self._stopped = True

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._stopped = False
        self._check()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        for key in list(self._running):
            self._stop_one(key)
        self._tasks.cancel()

    def on_applied(self, command: Any, result: Any, effects: tuple, index: int) -> None:
        """A metadata listener: a shovel set, changed or cleared, or a member change, is acted on at once."""
        if not self._stopped and any(isinstance(e, (fx.ParameterSet, fx.ParameterCleared, fx.MemberAdded,
                                                     fx.MemberRemoved)) for e in effects):  # fmt: skip
            self.loop.call_soon_threadsafe(self.reconcile)

    def on_restored(self, state: Any) -> None:
        if not self._stopped:
            self.loop.call_soon_threadsafe(self.reconcile)

    def _check(self) -> None:
        self._timer = None
        if self._stopped:
            return
        try:
            self.reconcile()
        except Exception:
            log.exception("shovel placement check failed")
        self._timer = self.loop.call_later(CHECK_INTERVAL, self._check)

    # ------------------------------------------------------------ placement

    def live_members(self) -> list[str]:
        """The members this node reaches, or [] when it reaches no majority (it is cut off)."""
        members = self.node.members() or [self.node.node_id]
        live = [m for m in members if self.node.is_reachable(m)]
        return live if len(live) * 2 > len(members) else []

    def owner(self, vhost: str, name: str) -> str | None:
        return owner_of(vhost, name, self.live_members())

    def reconcile(self) -> None:
        if self._stopped:
            return
        wanted = self.node.shovel_parameters()
        live = self.live_members()
        me = self.node.node_id
        for key in list(self._running):
            value = wanted.get(key)
            if value is None or self._running[key].value != value:
                self._stop_one(key)
            elif owner_of(*key, live) != me:
                self._stop_one(key, hand_over=True)
        for key, value in wanted.items():
            if key not in self._running and owner_of(*key, live) == me:
                self._start_one(key, value)

    def _start_one(self, key: tuple[str, str], value: str) -> None:
        vhost, name = key
        try:
            definition = shovel_definition.parse(json.loads(value))
        except (ValueError, shovel_definition.DefinitionError) as e:  # stored by a newer member: not ours to run
            log.warning("shovel %s/%s not started: %s", vhost, name, e)
            return
        running = _Running(ShovelRunner(vhost, name, definition, self.node, lambda: self._done(key, value)), value)
        self._running[key] = running
        running.task = self.loop.create_task(running.runner.run(), name=f"shovel {vhost}/{name}")
        running.task.add_done_callback(lambda task: self._ended(key, running, task))
        log.info("shovel %s/%s started on %s", vhost, name, self.node.node_id)

    def _ended(self, key: tuple[str, str], running: _Running, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("shovel %s/%s failed", *key, exc_info=task.exception())
        # a finished shovel stays listed (terminated) until its parameter is gone

    def _stop_one(self, key: tuple[str, str], hand_over: bool = False) -> None:
        """Stops a shovel here at once (deleted, changed, this node stopping) or, when it
        moves to another node, once what it has in flight is finished, HANDOVER_TIMEOUT at most."""
        running = self._running.pop(key, None)
        if running is not None and running.task is not None:
            if hand_over:
                running.runner.hand_over()
                self.loop.call_later(HANDOVER_TIMEOUT, running.task.cancel)
            else:
                running.task.cancel()
            log.info("shovel %s/%s stopped on %s%s", *key, self.node.node_id, " (handed over)" if hand_over else "")

    async def _done(self, key: tuple[str, str], value: str) -> None:
        """src-delete-after reached: the shovel deletes its parameter, as RabbitMQ's does."""
        if self.node.shovel_parameters().get(key) == value:
            try:
                await self.node.propose(mc.ClearParameter(f"shovel-done/{key[0]}/{key[1]}/{time.time_ns()}",
                                                          key[0], COMPONENT, key[1]))  # fmt: skip
            except Exception as e:
                log.warning("shovel %s/%s is done but its parameter stays: %s", *key, e)

    # ------------------------------------------------------------ status

    def local_status(self) -> list[dict]:
        out = []
        for (vhost, name), running in sorted(self._running.items()):
            runner, status = running.runner, running.runner.status
            src, dest = runner.definition.source, runner.definition.dest
            remaining = runner._limit - status.transferred if runner._limit is not None else "unlimited"
            row: dict[str, Any] = {
                "node": self.node.node_id, "timestamp": time.strftime("%Y-%m-%d %H:%M:%S",
                                                                      time.localtime(status.timestamp)),
                "name": name, "vhost": vhost, "type": "dynamic", "state": status.state,
                "src_uri": src.masked_uri(), "src_protocol": src.protocol,
                "dest_uri": dest.masked_uri(), "dest_protocol": dest.protocol,
                "forwarded": status.transferred, "remaining": remaining, "reason": status.reason,
            }  # fmt: skip
            row["src_queue" if src.protocol == "local" else "src_address"] = src.queue or src.address
            row["dest_queue" if dest.protocol == "local" else "dest_address"] = dest.queue or dest.address
            out.append(row)
        return out

    async def status(self) -> list[dict]:
        """Every shovel's status: this node's, and each reachable member's by a node call."""
        rows = self.local_status()
        me = self.node.node_id
        peers = [m for m in self.live_members() if m != me]
        answers = await asyncio.gather(*(self.node.call(p, SHOVEL_STATUS_CALL, {}, CALL_TIMEOUT) for p in peers),
                                       return_exceptions=True)  # fmt: skip
        for peer, answer in zip(peers, answers, strict=True):
            if isinstance(answer, BaseException):
                log.info("no shovel status from %s: %s", peer, answer)
            else:
                rows.extend(answer.get("shovels", []))
        known = {(r["vhost"], r["name"]) for r in rows}
        for vhost, name in sorted(set(self.node.shovel_parameters()) - known):  # placed but not reporting yet
            rows.append({"node": self.owner(vhost, name) or "", "name": name, "vhost": vhost, "type": "dynamic",
                         "state": "starting", "timestamp": time.strftime("%Y-%m-%d %H:%M:%S")})  # fmt: skip
        return sorted(rows, key=lambda r: (r["vhost"], r["name"]))

    async def restart(self, vhost: str, name: str) -> bool:
        """Restarts the shovel where it runs; False when no node runs it."""
        key = (vhost, name)
        if key in self._running:
            value = self._running[key].value
            self._stop_one(key)
            self._start_one(key, value)
            return True
        owner = self.owner(vhost, name)
        if owner is None or owner == self.node.node_id:
            return False
        answer = await self.node.call(owner, SHOVEL_RESTART_CALL, {"vhost": vhost, "name": name}, CALL_TIMEOUT)
        return bool(answer.get("restarted"))

    # ------------------------------------------------------------ node calls

    def calls(self) -> dict[str, Callable[[str, dict], Awaitable[dict]]]:
        async def status(peer: str, args: dict) -> dict:
            return {"shovels": self.local_status()}

        async def restart(peer: str, args: dict) -> dict:
            key = (str(args.get("vhost")), str(args.get("name")))
            return {"restarted": key in self._running and await self.restart(*key)}

        return {SHOVEL_STATUS_CALL: status, SHOVEL_RESTART_CALL: restart}
