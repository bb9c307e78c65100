"""A node started with fewer workers moves the queues of the workers gone onto the others,
and one started with more spreads its queues over them (node/workers/take_over.py), with
real message stores: every message, index entry and checkpoint comes along, the worker with
the fewest queues takes each, and a start cut short after the copies and before the new map
does the same moves again."""

from __future__ import annotations

import os

import pytest

from node.workers import take_over
from node.workers.slots import read_places, store_path, write_places
from queues.classic.persistence import store_key
from storage.message_store import MessageStore, Record

PLACES = {("/", "a"): 0, ("/", "b"): 1, ("/", "c"): 2, ("/", "d"): 2, ("v", "e"): 3}


@pytest.fixture
def data_dir(tmp_path) -> str:
    """Four workers' stores: each queue holds 5 messages, 'c' a checkpoint too."""
    data_dir = str(tmp_path)
    for (vhost, name), worker in PLACES.items():
        store = MessageStore(store_path(data_dir, worker))
        key = store_key(vhost, name)
        for seq in range(5):
            store.put(key, seq, Record(body=f"{name}-{seq}".encode()))
        if name == "c":
            store.put_positions(key, b"checkpoint")
        store.commit()
        store.close()
    write_places(data_dir, PLACES)
    return data_dir


def contents(data_dir: str, worker: int) -> dict[str, list[bytes]]:
    store = MessageStore(store_path(data_dir, worker))
    try:
        return {queue: [r.body for _, r in messages] for queue, messages in store.recover().items()}
    finally:
        store.close()


def test_the_queues_of_workers_gone_move_with_their_messages_to_the_least_loaded(data_dir):
    moved = take_over.take_over_queues(data_dir, 2)
    assert moved == [("/", "c", 2, 0), ("/", "d", 2, 1), ("v", "e", 3, 0)]
    assert read_places(data_dir) == {("/", "a"): 0, ("/", "b"): 1, ("/", "c"): 0, ("/", "d"): 1, ("v", "e"): 0}
    body = lambda name: [f"{name}-{i}".encode() for i in range(5)]  # noqa: E731
    keys = {name: store_key(vhost, name) for vhost, name in PLACES}
    assert contents(data_dir, 0) == {keys["a"]: body("a"), keys["c"]: body("c"), keys["e"]: body("e")}
    assert contents(data_dir, 1) == {keys["b"]: body("b"), keys["d"]: body("d")}
    store = MessageStore(store_path(data_dir, 0))
    assert store.take_positions() == {keys["c"]: b"checkpoint"}
    assert [seq for seq, *_ in store.iter_index(keys["c"])] == list(range(5))
    store.close()
    assert sorted(os.listdir(os.path.join(data_dir, "workers"))) == ["1", "count", "placement"]
    assert take_over.take_over_queues(data_dir, 2) == []  # nothing left to move


def test_a_start_cut_short_before_the_new_map_does_the_same_moves_again(data_dir, monkeypatch):
    def crash(*_args):
        raise OSError("the machine went down")

    monkeypatch.setattr(take_over, "write_places", crash)
    with pytest.raises(OSError):
        take_over.take_over_queues(data_dir, 2)
    assert read_places(data_dir) == PLACES  # the old map, the old stores: nothing lost
    assert os.path.isdir(store_path(data_dir, 3))
    monkeypatch.undo()
    assert take_over.take_over_queues(data_dir, 2) == [("/", "c", 2, 0), ("/", "d", 2, 1), ("v", "e", 3, 0)]
    assert sorted(len(m) for m in contents(data_dir, 0).values()) == [5, 5, 5]  # copied twice, held once


def test_more_workers_than_the_last_time_take_queues_from_the_busiest_until_even(data_dir):
    assert take_over.take_over_queues(data_dir, 4) == []  # as many as the last time (its map says): none
    store = MessageStore(store_path(data_dir, 0))
    for name in "fgh":  # declared since, on worker 0
        store.put(store_key("/", name), 0, Record(body=name.encode()))
        write_places(data_dir, {**read_places(data_dir), ("/", name): 0})
    store.commit()
    store.close()
    assert take_over.take_over_queues(data_dir, 4) == []  # worker 0 runs 4, worker 1 one: not more workers
    moved = take_over.take_over_queues(data_dir, 6)
    assert moved == [("/", "h", 0, 4), ("/", "g", 0, 5)]
    places = read_places(data_dir)
    assert [list(places.values()).count(w) for w in range(6)] == [2, 1, 2, 1, 1, 1]
    assert contents(data_dir, 4) == {store_key("/", "h"): [b"h"]}
    assert take_over.take_over_queues(data_dir, 6) == []


def test_a_node_of_one_process_started_with_several_workers_spreads_the_queues_it_has_messages_of(tmp_path):
    data_dir = str(tmp_path)
    store = MessageStore(store_path(data_dir, 0))  # a node of one process: no map, its store only
    for i, name in enumerate("abcde"):
        for seq in range(i + 1):
            store.put(store_key("/", name), seq, Record(body=f"{name}-{seq}".encode()))
    store.commit()
    store.close()
    assert take_over.take_over_queues(data_dir, 1) == [] and not os.path.exists(os.path.join(data_dir, "workers"))
    moved = take_over.take_over_queues(data_dir, 3)
    assert moved == [("/", "e", 0, 1), ("/", "d", 0, 2), ("/", "c", 0, 1)]
    assert read_places(data_dir) == {("/", "a"): 0, ("/", "b"): 0, ("/", "c"): 1, ("/", "d"): 2, ("/", "e"): 1}
    assert contents(data_dir, 1) == {store_key("/", "c"): [b"c-0", b"c-1", b"c-2"],
                                     store_key("/", "e"): [f"e-{i}".encode() for i in range(5)]}  # fmt: skip
    assert take_over.take_over_queues(data_dir, 3) == []  # the map is the node's now
