"""A quorum queue replica without Raft (queues/quorum/queue.py as its group's
machine): the node services it uses, faked, and the records a group would
commit applied in order by the test, as pysyncobj does."""

from __future__ import annotations

from queues.quorum import Publish
from queues.quorum.queue import QuorumQueue


class Host:
    """The node services a quorum queue uses: bodies in a dict, the clock fixed."""

    node_id = "n1"
    incarnation = "n1#1"

    def __init__(self):
        self.blobs: dict[bytes, bytes] = {}
        self.proposed: list = []
        self.soon: list = []
        self.packs = True  # the feature flag quorum_queue_publish_batch
        self.range_reads = 0
        self.timers: list = []  # (due ms, fn) armed with call_later

    def packs_publishes(self):
        return self.packs

    def submit(self, group, record, callback=None):
        self.proposed.append((record, callback))
        return True

    def is_leader(self, group):
        return self.leader

    def leader_of(self, group):
        return "n1"

    def put_blob(self, group, key, value):
        self.blobs[key] = value

    def put_blobs(self, group, items):
        self.blobs.update(items)

    def get_blob(self, group, key):
        return self.blobs.get(key)

    def get_blobs_from(self, group, key, count):
        self.range_reads += 1
        return sorted((k, v) for k, v in self.blobs.items() if k >= key and len(k) == len(key))[:count]

    def delete_blobs(self, group, below=None):
        for key in [k for k in self.blobs if below is None or k < below]:
            del self.blobs[key]

    def sync(self):
        pass

    reads_priorities = True  # the feature flag quorum_queue_priorities

    def priorities(self):
        return self.reads_priorities

    leader = True
    lease = 0  # quorum_consumer_lease

    def consumer_lease(self):
        return self.lease

    timeout = None  # consumer_timeout: None while the flag quorum_consumer_timeout is off

    def consumer_timeout(self):
        return self.timeout

    clock_by_ticks = False  # tick_clock: the flag quorum_tick_clock

    def tick_clock(self):
        return self.clock_by_ticks

    def after_durable(self, fn):
        fn()

    def call_soon(self, fn):
        self.soon.append(fn)  # run by the test: the end of the loop turn

    # the vhost's part
    def now_ms(self):
        return self.clock

    def monotonic_ms(self):
        return self.clock  # one clock here: the tests step neither

    clock = 1000

    def call_later(self, delay, fn):
        host = self

        class Handle:
            def cancel(self):
                if entry in host.timers:
                    host.timers.remove(entry)

        entry = (self.clock + int(delay * 1000), fn)
        self.timers.append(entry)
        return Handle()

    def dead_letter(self, queue, message, reason, confirmed=None):
        pass

    def count_dropped(self, queue, reason, n):
        pass


def make(arguments: dict | None = None) -> tuple[QuorumQueue, Host]:
    host = Host()
    arguments = {"x-queue-type": "quorum", **(arguments or {})}
    return QuorumQueue("/", "q", arguments, ("n1",), host=host, quorum_host=host, group="g"), host


def batch(n: int, seq: int) -> Publish:
    return Publish(tuple([f"m{i}".encode(), True, None, "", ["q"], i, None] for i in range(n)), 1000, "n1#1", seq)
