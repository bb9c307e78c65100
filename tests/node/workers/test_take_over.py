"""A node started with fewer workers moves the queues of the workers gone onto the others
(node/workers/take_over.py), with real message stores: every message, index entry and
checkpoint comes along, the worker with the fewest queues takes each, and a start cut short
after the copies and before the new map does the same moves again."""

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
    assert sorted(os.listdir(os.path.join(data_dir, "workers"))) == ["1", "placement"]
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
