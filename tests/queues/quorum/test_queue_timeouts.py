"""The consumer timeout on a replica (queue.py, ticks.py): the leader proposes
Ticks that stamp and time out, version 2 only once the feature flag is on, and
a consumer of this node that timed out has its link ended."""

from __future__ import annotations

from replica_host import batch, make

from queues import quorum as qq


class Consumer:
    presettled = False

    def __init__(self):
        self.got: list[bytes] = []
        self.ended: list[str] = []

    def deliver(self, queue, message):
        self.got.append(message.payload)

    def credit_reply(self, *args):
        pass

    def timed_out(self, description):
        self.ended.append(description)


def run_due_timers(host) -> list:
    """Fires the Tick timers (ticks.py) due by host.clock; returns the records they proposed."""
    before = len(host.proposed)
    for entry in sorted((t for t in host.timers if t[0] <= host.clock), key=lambda t: t[0]):
        if entry in host.timers and getattr(entry[1], "__name__", "") == "_fire":
            host.timers.remove(entry)
            entry[1]()
    return [record for record, _ in host.proposed[before:]]


def attached(queue, host, index: int, credit: int = 1):
    consumer = Consumer()
    cid = queue.links.add(consumer)
    queue.apply(qq.Attach(cid, 0, host.clock, host.incarnation), index)
    queue.apply(qq.Credit(cid, 0, credit), index + 1)
    return consumer, cid


def test_the_leader_stamps_then_times_out_and_the_consumer_link_is_ended():
    queue, host = make({"x-consumer-timeout": 5000})
    host.timeout = 60_000  # the node setting: the queue's own argument wins
    queue.apply(batch(1, 1), 1)
    consumer, cid = attached(queue, host, 2)
    assert consumer.got == [b"m0"]
    host.clock += 1001
    [tick] = run_due_timers(host)  # the stamping tick, within a second of the delivery
    assert tick == qq.TickTimeouts(2001, 5000)
    queue.apply(tick, 4)
    host.clock = 7002
    [tick] = run_due_timers(host)  # armed for when the message is held 5 s
    queue.apply(tick, 5)
    assert len(consumer.ended) == 1 and "5000 ms" in consumer.ended[0] and "queue 'q'" in consumer.ended[0]
    assert queue.message_count == 1 and queue.unacked_count == 0


def test_the_node_setting_applies_when_the_queue_and_its_policy_set_none():
    queue, host = make()
    host.timeout = 3000
    queue.apply(batch(1, 1), 1)
    attached(queue, host, 2)
    host.clock += 1001
    assert run_due_timers(host) == [qq.TickTimeouts(2001, 3000)]
    queue.apply_policy({"x-queue-type": "quorum", "x-consumer-timeout": 1000})  # a policy's, merged
    assert queue._consumer_timeout() == 1000


def test_with_the_tick_clock_flag_ticks_are_version_3_and_keep_the_clock():
    queue, host = make({"x-message-ttl": 10_000})
    host.timeout, host.clock_by_ticks = 0, True
    queue.apply(batch(1, 1), 1)
    host.clock = 11_001
    [tick] = run_due_timers(host)
    assert tick == qq.TickClock(11_001, 0) and type(tick) is qq.TickClock
    queue.apply(tick, 2)
    assert queue.state.tick_clock and queue.message_count == 0  # expired by the leader's time


def test_without_the_feature_flag_ticks_stay_version_1_and_nothing_times_out():
    queue, host = make({"x-message-ttl": 10_000})
    assert host.timeout is None
    queue.apply(batch(1, 1), 1)
    queue.apply(qq.Attach("n1#1/9", 0, 1000, "n1#1"), 2)
    queue.apply(qq.Credit("n1#1/9", 0, 1), 3)
    assert host.timers == []  # no stamping ticks: an older member could not read version 2
    queue.apply(batch(1, 2), 4)
    host.clock = 11_001  # timers run a millisecond late
    assert run_due_timers(host) == [qq.Tick(11_001)]  # the TTL tick, version 1


def test_a_tick_in_flight_is_not_proposed_again_by_the_commands_applied_before_it():
    queue, host = make()
    host.timeout = 3000
    queue.apply(batch(1, 1), 1)
    attached(queue, host, 2)
    host.clock += 1001
    [tick] = run_due_timers(host)
    for i in range(3):  # publishes committed before the Tick: what is due waits for it
        queue.apply(batch(1, 2 + i), 4 + i)
        host.clock += 10
        assert run_due_timers(host) == []
    queue.apply(tick, 7)
    host.clock = tick.now_ms + 3001
    assert run_due_timers(host) == [qq.TickTimeouts(host.clock, 3000)]  # armed again once it landed


def test_with_the_default_30_minutes_the_leader_stamps_once_a_minute():
    queue, host = make()
    host.timeout = 1_800_000  # the node setting's default
    queue.apply(batch(1, 1), 1)
    attached(queue, host, 2)
    host.clock += 59_000
    assert run_due_timers(host) == []
    host.clock += 1_001
    assert run_due_timers(host) == [qq.TickTimeouts(host.clock, 1_800_000)]


def test_a_policy_that_shortens_the_timeout_rearms_an_idle_queue_at_once():
    queue, host = make()
    host.timeout = 1_800_000
    queue.apply(batch(1, 1), 1)
    attached(queue, host, 2)
    host.clock += 60_001
    [tick] = run_due_timers(host)
    queue.apply(tick, 4)  # stamped: due in 30 minutes
    queue.apply_policy({"x-queue-type": "quorum", "x-consumer-timeout": 1000})
    host.clock += 1_001
    assert run_due_timers(host) == [qq.TickTimeouts(host.clock, 1000)]


def test_a_new_leader_of_an_idle_queue_arms_its_ticks_from_the_sweep():
    queue, host = make()
    host.timeout = 5000
    host.leader = False
    queue.apply(batch(1, 1), 1)
    attached(queue, host, 2)
    queue.apply(qq.TickTimeouts(1000, 5000), 4)  # the old leader's: stamped at 1000
    host.leader = True  # elected; the queue applies nothing more
    host.clock = 6001
    assert run_due_timers(host) == []
    queue.arm_ticks()  # node/vhosts/quorum_groups.py's sweep
    host.clock += 1
    assert run_due_timers(host) == [qq.TickTimeouts(host.clock, 5000)]
