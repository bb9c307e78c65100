"""node/workers/metadata_follow.py: a worker process follows the node worker's
metadata machine over the control socket (snapshot, then every applied
command in order), commits through it and reads its own writes, and both
ends survive the other's death."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys

import pytest

from metadata import commands as c
from metadata.machine import MetadataMachine
from node.cluster.errors import ClusterError
from node.workers.control import address
from node.workers.metadata_follow import MetadataFeed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# A follower worker: its own machine, and a line protocol on stdin/stdout for the test.
#   "add NAME"  -> commits AddVHost through the node worker, then prints what its own machine holds
#   "del NAME"  -> commits DeleteVHost the same way (a refusal prints its condition)
#   "show"      -> prints its vhosts once it is in step (a snapshot applied on the current link)
FOLLOWER = """
import asyncio, sys, uuid
from metadata import commands as c
from metadata.machine import MetadataMachine
from node.vhosts.metadata_store import MetadataStore, MetadataRefused, MetadataUnavailable
from node.workers.control import address
from node.workers.metadata_follow import MetadataFollower

async def main():
    loop = asyncio.get_running_loop()
    machine = MetadataMachine()
    follower = MetadataFollower(loop, machine, address(sys.argv[1], "control"), reconnect=0.05)
    store = MetadataStore(machine, follower.propose)
    await follower.start()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    def say(*words):
        print(*words, flush=True)
    def vhosts():
        return ",".join(sorted(machine.state.vhosts)) or "-"
    while line := (await reader.readline()).decode().split():
        try:
            if line[0] == "add":
                await store.run(c.AddVHost(uuid.uuid4().hex, line[1]))
                say("ok", vhosts(), machine.last_index)
            elif line[0] == "del":
                await store.run(c.DeleteVHost(uuid.uuid4().hex, line[1]))
                say("ok", vhosts(), machine.last_index)
            elif line[0] == "show":
                await follower.synced()
                say("vhosts", vhosts(), follower.snapshots)
        except MetadataRefused as e:
            say("refused", e.condition)
        except MetadataUnavailable as e:
            say("unavailable", str(e).replace(" ", "_"))

asyncio.run(main())
"""


class NodeWorker:
    """Worker 0's machine and feed in this process; `hold` keeps proposals from committing."""

    def __init__(self, loop: asyncio.AbstractEventLoop, machine: MetadataMachine | None = None) -> None:
        self.machine = machine if machine is not None else MetadataMachine()
        self.hold: asyncio.Future | None = None
        self.feed = MetadataFeed(loop, self.machine, self.propose)

    async def propose(self, command):
        if self.hold is not None:
            await self.hold
        return self.machine.apply(command, self.machine.last_index + 1)

    def commit(self, command) -> None:  # a change another node made, as Raft applies it here
        self.machine.apply(command, self.machine.last_index + 1)


class Follower:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, data_dir: str) -> Follower:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", FOLLOWER, data_dir, cwd=ROOT,
                                                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        return cls(proc)

    async def ask(self, line: str) -> list[str]:
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()
        return await self.answer()

    async def answer(self) -> list[str]:
        out = await self.proc.stdout.readline()
        assert out, "the follower exited"
        return out.decode().split()

    async def show_until(self, vhosts: str) -> list[str]:
        while (got := await self.ask("show"))[1] != vhosts:
            await asyncio.sleep(0.02)
        return got

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()


def run(main) -> None:
    asyncio.run(asyncio.wait_for(main(), 30))


@contextlib.asynccontextmanager
async def serving(data_dir: str, *commands):
    """Worker 0 (its machine holding `commands`) serving, and one follower process in step."""
    node = NodeWorker(asyncio.get_running_loop())
    for command in commands:
        node.commit(command)
    await node.feed.serve(address(data_dir, "control"))
    follower = await Follower.start(data_dir)
    try:
        yield node, follower
    finally:
        await follower.stop()
        node.feed.close()


@pytest.fixture
def data_dir(tmp_path) -> str:
    return str(tmp_path)


def test_a_follower_starts_from_the_snapshot_and_then_applies_each_command_in_order(data_dir):
    async def main():
        async with serving(data_dir, c.AddVHost("k1", "/"), c.AddVHost("k2", "before")) as (node, follower):
            assert await follower.ask("show") == ["vhosts", "/,before", "1"]
            node.commit(c.AddVHost("k3", "after"))
            node.commit(c.DeleteVHost("k4", "before"))
            assert await follower.show_until("/,after") == ["vhosts", "/,after", "1"]

    run(main)


def test_a_followers_change_commits_on_the_node_worker_and_it_reads_its_own_write(data_dir):
    async def main():
        async with serving(data_dir) as (node, follower):
            await follower.show_until("-")
            # the answer comes back only once the follower's own machine holds the new vhost
            assert await follower.ask("add mine") == ["ok", "mine", "1"]
            assert set(node.machine.state.vhosts) == {"mine"}
            # a refusal comes back with the machine's condition, and changes nothing
            assert await follower.ask("del nothing") == ["refused", "amqp:not-found"]
            assert await follower.ask("show") == ["vhosts", "mine", "1"]

    run(main)


def test_a_proposal_in_flight_when_the_node_worker_goes_fails_and_the_follower_resyncs_with_the_next(data_dir):
    async def main():
        loop = asyncio.get_running_loop()
        node = NodeWorker(loop)
        await node.feed.serve(address(data_dir, "control"))
        follower = await Follower.start(data_dir)
        try:
            await follower.show_until("-")
            node.hold = loop.create_future()  # the proposal reaches worker 0 and waits there
            follower.proc.stdin.write(b"add lost\n")
            await follower.proc.stdin.drain()
            while not node.feed._tasks:
                await asyncio.sleep(0.01)
            node.feed.close()  # worker 0 gone: its server and links closed
            said = await follower.answer()
            assert said[0] == "unavailable" and "may_or_may_not" in said[1]
            # a restarted node worker, with what its log holds (another vhost committed meanwhile)
            again = NodeWorker(loop)
            again.commit(c.AddVHost("k9", "meanwhile"))
            await again.feed.serve(address(data_dir, "control"))
            assert await follower.show_until("meanwhile") == ["vhosts", "meanwhile", "2"]
            assert await follower.ask("add next") == ["ok", "meanwhile,next", "2"]
            again.feed.close()
        finally:
            await follower.stop()

    run(main)


def test_a_follower_killed_and_restarted_starts_again_from_a_snapshot_and_the_feed_forgets_the_dead_one(data_dir):
    async def main():
        loop = asyncio.get_running_loop()
        node = NodeWorker(loop)
        await node.feed.serve(address(data_dir, "control"))
        first = await Follower.start(data_dir)
        await first.ask("add a")
        assert node.feed.followers == 1
        first.proc.send_signal(signal.SIGKILL)
        await first.proc.wait()
        while node.feed.followers:
            await asyncio.sleep(0.01)
        node.commit(c.AddVHost("k2", "b"))  # sent to nobody
        second = await Follower.start(data_dir)
        try:
            assert await second.show_until("a,b") == ["vhosts", "a,b", "1"]
        finally:
            await second.stop()
            node.feed.close()

    run(main)


def test_a_follower_with_no_node_worker_refuses_proposals_until_it_is_in_step(data_dir):
    async def main():
        from node.workers.metadata_follow import MetadataFollower

        loop = asyncio.get_running_loop()
        follower = MetadataFollower(loop, MetadataMachine(), address(data_dir, "control"), reconnect=0.05)
        task = loop.create_task(follower.start())
        with pytest.raises(ClusterError):
            await follower.propose(c.AddVHost("k", "x"))
        node = NodeWorker(loop)
        await node.feed.serve(address(data_dir, "control"))
        await task
        assert (await follower.propose(c.AddVHost("k", "x"))).ok
        assert "x" in follower.machine.state.vhosts
        follower.close()
        node.feed.close()

    run(main)


def test_an_answer_that_takes_a_while_comes_when_ready_and_a_follower_gone_answers_none_at_once(data_dir):
    async def main():
        from node.workers.metadata_follow import MetadataFollower

        loop = asyncio.get_running_loop()
        node = NodeWorker(loop)
        await node.feed.serve(address(data_dir, "control"))
        asked, releases = asyncio.Event(), [loop.create_future(), loop.create_future()]

        async def slowly(release):
            return await release

        def on_ask(question):
            asked.set()
            return slowly(releases[len(question) - 1])

        follower = MetadataFollower(loop, MetadataMachine(), address(data_dir, "control"), reconnect=0.05,
                                    on_ask=on_ask)  # fmt: skip
        await follower.start()
        question = loop.create_task(node.feed.ask(["copy"], timeout=60))
        await asked.wait()
        assert not question.done()  # the answer is still being made (a lost worker's queue copied, say)
        releases[0].set_result("copied")
        assert await question == ["copied"]

        asked.clear()
        question = loop.create_task(node.feed.ask(["copy", "again"], timeout=60))
        await asked.wait()
        follower.close()  # gone before it answered (it never will): the feed does not wait out the timeout
        assert await asyncio.wait_for(question, 10) == [None]
        node.feed.close()

    run(main)
