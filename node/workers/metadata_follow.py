"""Workers following the node's metadata without voting (issue 36,
docs/architecture.md "Metadata: one voter, workers following").

The node worker (worker 0) hosts the node's one voter of the metadata group.
Its `MetadataFeed` listens on the node's control address; each other worker's
`MetadataFollower` connects, gets the machine's snapshot, then every command
the voter applies, in order, and applies them to its own pure machine
(metadata/machine.py), so its projections (routing tables, users,
permissions) stay a local read. Items on the control link (control.py):

    worker 0 -> K  ["snapshot", index, state, extra]   the machine's state, at connect and after each
                                                  restore, with what the node adds (`extra`: a map)
                   ["applied", index, record]     a command as the voter applied it (raft/records.py bytes)
                   [notice, ...]                  anything else the node tells its workers (`notify`),
                                                  in order with the commands
                   ["ask", req, question]         what the HTTP API asks every worker (`ask`): a list
                   ["result", req, kind, condition, description]   kind: ok, created, error, none
                   ["unavailable", req, description]   the proposal could not commit (ClusterError)
    K -> worker 0  ["propose", req, record]
                   ["answer", req, value]         a worker's answer to a question (None: it had none)
                   [item, ...]                    anything else a worker tells the node (`tell`; `on_item`)

A follower's proposal is committed by worker 0 (`Cluster.propose`, leader or
not). Its answer leaves on the same link after the "applied" item of the
command it answers, both queued on the voter's loop in that order, so once
the follower reads the answer it has applied the command itself: read your
writes, as `MetadataStore.run` promises on worker 0. When the link ends, each
proposal waiting on it fails as a Raft timeout does (it may or may not have
committed; MetadataStore's idempotency keys make the retry safe), and the
follower reconnects and starts again from a fresh snapshot."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import metadata.commands  # noqa: F401  (registers the records a follower decodes)
from metadata.effects import CREATED, OK, Created, Error, Result
from metadata.machine import MetadataMachine
from node.cluster.errors import ClusterError
from node.tasks import BackgroundTasks
from raft import records

from .control import CONTROL, dial, listen
from .link import WorkerLink

__all__ = ["MetadataFeed", "MetadataFollower"]

log = logging.getLogger("warren.workers")

RECONNECT = 0.2  # seconds between a follower's attempts to reach worker 0


def _result_item(req: int, result: Any) -> list:
    if isinstance(result, Error):
        return ["result", req, "error", result.condition, result.description]
    kind = "none" if result is None else "created" if isinstance(result, Created) else "ok"
    return ["result", req, kind, "", ""]


def _result(kind: str, condition: str, description: str) -> Result | None:
    return {"ok": OK, "created": CREATED, "none": None}.get(kind) if kind != "error" else Error(condition, description)


class MetadataFeed:
    """Worker 0's side: the applied commands to every follower, and their proposals to Raft."""

    def __init__(self, loop: asyncio.AbstractEventLoop, machine: MetadataMachine,
                 propose: Callable[[Any], Awaitable[Any]], extra: Callable[[], dict] = dict,
                 on_item: Callable[[WorkerLink, list], None] | None = None,
                 on_lost: Callable[[WorkerLink], None] | None = None) -> None:  # fmt: skip
        """`on_item(link, item)` for what a follower tells; `on_lost(link)` when a follower's link ends."""
        self._loop = loop
        self._on_item = on_item
        self._on_lost = on_lost
        self._machine = machine
        self._propose = propose
        self._extra = extra
        self._followers: set[WorkerLink] = set()
        self._tasks = BackgroundTasks(loop, log)  # followers' proposals being committed
        self._server: asyncio.AbstractServer | None = None
        # a question's req -> (all answered, the answers, the links still to answer -> their place)
        self._asked: dict[int, tuple[asyncio.Future, list, dict[int, int]]] = {}
        self._reqs = itertools.count(1)
        machine.subscribe(self._applied, self._restored)

    @property
    def followers(self) -> int:
        return len(self._followers)

    async def serve(self, address: str) -> None:
        self._server = await listen(self._loop, self._accept, address)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._followers):
            link.close()
        self._tasks.cancel()

    def _accept(self) -> WorkerLink:
        link: WorkerLink = WorkerLink(self._loop, lambda items: self._on_items(link, items),
                                      lambda _reason: self._link_lost(link), CONTROL)  # fmt: skip
        link.send(self._snapshot_item())  # leaves once the socket is up, before any command after it
        self._followers.add(link)
        return link

    def _snapshot_item(self) -> list:
        return ["snapshot", self._machine.last_index, self._machine.snapshot(), self._extra()]

    def notify(self, item: list) -> None:
        """Tell every follower `item` (a list named by its first field), after what was sent before."""
        for link in self._followers:
            link.send(item)

    def _applied(self, command: Any, _result: Any, _effects: Any, index: int) -> None:
        if self._followers:
            item = ["applied", index, records.encode(command)]
            for link in self._followers:
                link.send(item)

    def _restored(self, _state: Any) -> None:
        for link in self._followers:
            link.send(self._snapshot_item())

    async def ask(self, question: list, timeout: float = 5.0) -> list:
        """Every follower's answer to `question` (None from one that had none or did not answer in time)."""
        links = list(self._followers)
        if not links:
            return []
        req = next(self._reqs)
        done, answers = self._loop.create_future(), [None] * len(links)
        pending = {id(link): i for i, link in enumerate(links)}
        self._asked[req] = (done, answers, pending)
        for link in links:
            if not link.send(["ask", req, question]):
                pending.pop(id(link), None)
        try:
            if pending:
                await asyncio.wait_for(asyncio.shield(done), timeout)
        except TimeoutError:
            pass
        finally:
            del self._asked[req]
        return answers

    def _link_lost(self, link: WorkerLink) -> None:
        """A follower gone answers none of the questions it was asked."""
        self._followers.discard(link)
        for req in list(self._asked):
            self._answered(link, req, None)
        if self._on_lost is not None:
            self._on_lost(link)

    def _answered(self, link: WorkerLink, req: int, value: Any) -> None:
        asked = self._asked.get(req)
        if asked is None:
            return
        done, answers, pending = asked
        i = pending.pop(id(link), None)
        if i is not None:
            answers[i] = value
        if not pending and not done.done():
            done.set_result(None)

    def _on_items(self, link: WorkerLink, items: list) -> None:
        for item in items:
            if item[0] == "propose" and len(item) == 3:
                self._tasks.spawn(self._commit(link, item[1], item[2]), "committing a worker's proposal")
            elif item[0] == "answer" and len(item) == 3:
                self._answered(link, item[1], item[2])
            elif self._on_item is not None:
                self._on_item(link, item)
            else:
                log.warning("a worker sent an unknown control item %r; ignored", item[0])

    async def _commit(self, link: WorkerLink, req: int, record: bytes) -> None:
        try:
            result = await self._propose(records.decode(record))
        except ClusterError as e:
            link.send(["unavailable", req, str(e) or type(e).__name__])
        except Exception as e:  # a record this build cannot read, say: that proposal fails, not the feed
            log.exception("a worker's proposal failed")
            link.send(["unavailable", req, f"the node worker could not commit it: {e}"])
        else:
            link.send(_result_item(req, result))


class MetadataFollower:
    """A worker's side: its own machine kept in step with worker 0's, and `propose` through it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, machine: MetadataMachine, address: str,
                 reconnect: float = RECONNECT, on_extra: Callable[[dict], None] | None = None,
                 on_notice: Callable[[list], None] | None = None,
                 on_ask: Callable[[list], Any] | None = None) -> None:  # fmt: skip
        """`on_extra(extra)` runs before each snapshot is applied; `on_notice(item)` for each notice;
        `on_ask(question)` answers worker 0's questions."""
        self._loop = loop
        self._on_ask = on_ask
        self._on_extra = on_extra
        self._on_notice = on_notice
        self.machine = machine
        self._address = address
        self._reconnect = reconnect
        self._link: WorkerLink | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._reqs = itertools.count(1)
        self._synced = asyncio.Event()  # set while a link is up and its snapshot applied
        self._lost = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._tasks = BackgroundTasks(loop, log)  # answers that take a while
        self.snapshots = 0  # how many snapshots were applied (each connect, each restore on worker 0)

    async def start(self, timeout: float | None = None) -> None:
        """Connect (retrying) and return once the first snapshot is applied."""
        self._task = self._loop.create_task(self._run())
        await asyncio.wait_for(self._synced.wait(), timeout)

    async def synced(self) -> None:
        await self._synced.wait()

    def close(self) -> None:
        self._tasks.cancel()
        if self._task is not None:
            self._task.cancel()
        if self._link is not None:
            self._link.close()

    def tell(self, item: list) -> None:
        """Tell worker 0 `item` (its `on_item`); dropped while the link is down, so what must
        arrive is told again (a worker's alarms: at each check, alarms.py)."""
        if self._link is not None:
            self._link.send(item)

    async def propose(self, command: Any) -> Result | None:
        """Commit `command` through worker 0; returns once this worker applied it."""
        link = self._link
        if link is None or not self._synced.is_set():
            raise ClusterError("this worker has no link to the node worker")
        req = next(self._reqs)
        done = self._loop.create_future()
        self._pending[req] = done
        try:
            if not link.send(["propose", req, records.encode(command)]):
                raise ClusterError("this worker's link to the node worker ended")
            return await done
        finally:
            self._pending.pop(req, None)

    async def _run(self) -> None:
        while True:
            self._lost.clear()
            try:
                link = await dial(self._loop, lambda: WorkerLink(self._loop, self._on_items, self._on_lost, CONTROL),
                                  self._address)  # fmt: skip
            except OSError as e:
                log.debug("the node worker is not reachable yet: %s", e)
                await asyncio.sleep(self._reconnect)
                continue
            self._link = link
            await self._lost.wait()
            await asyncio.sleep(self._reconnect)

    def _on_items(self, items: list) -> None:
        for item in items:
            kind = item[0]
            if kind == "applied":
                self.machine.apply(records.decode(item[2]), item[1])
            elif kind == "snapshot":
                if self._on_extra is not None:
                    self._on_extra(item[3])
                self.machine.restore(item[2])
                self.machine.last_index = item[1]
                self.snapshots += 1
                self._synced.set()
            elif kind == "result":
                self._answer(item[1], _result(item[2], item[3], item[4]))
            elif kind == "unavailable":
                self._answer(item[1], ClusterError(item[2]))
            elif kind == "ask":
                self._reply(item[1], item[2])
            elif self._on_notice is not None:
                self._on_notice(item)
            else:
                log.warning("the node worker sent an unknown control item %r; ignored", kind)

    def _reply(self, req: int, question: list) -> None:
        value = None
        if self._on_ask is not None:
            try:
                value = self._on_ask(question)
            except Exception:
                log.exception("answering %r failed", question[:1])
        if inspect.iscoroutine(value):  # an answer that takes a while (a lost worker's queue copied)
            task = self._tasks.spawn(value, f"answering {question[0]!r}")
            if task is not None:
                task.add_done_callback(lambda done, link=self._link: self._reply_later(link, req, done))
        elif self._link is not None:
            self._link.send(["answer", req, value])

    def _reply_later(self, link: WorkerLink | None, req: int, done: asyncio.Task) -> None:
        """The answer made by `done`, on the link that asked (one that ended since takes none)."""
        if link is not None and link is self._link and not done.cancelled():
            link.send(["answer", req, None if done.exception() is not None else done.result()])

    def _answer(self, req: int, outcome: Any) -> None:
        done = self._pending.get(req)
        if done is None or done.done():
            return
        if isinstance(outcome, Exception):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)

    def _on_lost(self, reason: Exception | None) -> None:
        self._link = None
        self._synced.clear()
        for done in list(self._pending.values()):
            if not done.done():
                done.set_exception(ClusterError(f"the link to the node worker ended ({reason or 'closed'}); "
                                                "the change may or may not have been committed"))  # fmt: skip
        self._lost.set()
