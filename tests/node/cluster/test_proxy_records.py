"""The records of the cross-node queue path (node/vhosts/proxy_records.py):
every message of remote_queue.py round-trips through one batch record with
its types intact, the message bytes come back exactly as sent, and the old
form (one AMQP list per node message) still decodes."""

from __future__ import annotations

import pytest

from amqp import codec
from node.vhosts import proxy_records
from raft import records

PAYLOAD = b"\x00Sp\xc0\x01\x00\x00Sw\xa1\x05hello" + bytes(range(256))

# one of each, in the field order of remote_queue.py's handlers
EVERY_KIND = [
    ["pub", "/", "q1", 7, PAYLOAD, True, 1_790_000_000_000, "amq.direct", ["a", "b"], None],
    ["pub", "vh", "q\u00e9", 0, b"", False, None, "", [], {"x-opt-deaths": [{"count": 1}]}],
    ["attach", 3, "/", "q1", -2, True],
    ["credit", 3, 4_294_967_295, 1000, False, True],
    ["settle", 3, [1, 2, 2**40], "modified", True, False, {"x-opt-k": "v"}],
    ["settle", 3, [], "accepted", False, False, None],
    ["detach", 3],
    ["count", 11, "/", "q1"],
    ["purge", 12, "/", "q1"],
    ["counts", 11, None, 0, 0],
    ["counts", 11, 5, 2, 1],
    ["purged", 12, None],
    ["purged", 12, 40],
    ["conf", 7, "accepted"],
    ["deliver", 3, 99, PAYLOAD, 2, True, True, "ex", ["rk"], None],
    ["flow", 3, 10, 990, 0, True],
    ["gone", 3, "amqp:resource-deleted", "queue 'q1' in vhost '/' was deleted"],
    ["sattach", 4, "/", "s1", 0, False, {"rabbitmq:stream-offset-spec": "first", "rabbitmq:stream-filter": ["a"]}],
]


def test_every_kind_round_trips_in_one_batch_in_order():
    data = proxy_records.encode_batch(EVERY_KIND)
    assert data[0] == 0xFF  # raft/records.py's binary form: no AMQP encoding starts so
    assert records.kind_of(records.decode(data)) == ("queue.proxy", 1)
    got = proxy_records.decode_message(data)
    assert [list(item) for item in got] == EVERY_KIND
    assert [type(v) for item in got for v in item] == [type(v) for item in EVERY_KIND for v in item]


def test_the_message_bytes_travel_as_they_are():
    data = proxy_records.encode_batch([EVERY_KIND[0]])
    assert PAYLOAD in data  # not re-encoded around or inside
    assert proxy_records.decode_message(data)[0][4] == PAYLOAD


def test_a_message_in_the_old_form_still_decodes():
    """From a node that does not have the flag (a rolling upgrade)."""
    for item in EVERY_KIND:
        (got,) = proxy_records.decode_message(codec.dumps(item))
        assert got[0] == item[0] and len(got) == len(item)
    assert bytes(proxy_records.decode_message(codec.dumps(EVERY_KIND[0]))[0][4]) == PAYLOAD


@pytest.mark.parametrize("cut", [1, 5, 20, -1])
def test_a_truncated_batch_is_refused(cut):
    data = proxy_records.encode_batch(EVERY_KIND)
    with pytest.raises(records.RecordError):
        proxy_records.decode_message(data[:cut] if cut > 0 else data[:-1])


def test_a_batch_with_an_unknown_item_code_is_refused():
    data = bytearray(proxy_records.encode_batch([["detach", 3]]))
    data[-9] = 200  # the item code, before the 8 bytes of its cid
    with pytest.raises(records.RecordError):
        proxy_records.decode_message(bytes(data))


def test_an_item_with_the_wrong_number_of_fields_is_not_encoded():
    with pytest.raises(records.RecordError):
        proxy_records.encode_batch([["detach", 3, 4]])


def test_one_routing_key_has_the_layout_of_any_count():
    """The single-key shortcut writes and reads what nodes without it do."""
    for keys in (["rk"], ["a", "bc"], [], ["\u00e9"]):
        layout = b"".join(len(k.encode()).to_bytes(4, "big") + k.encode() for k in keys)
        assert proxy_records._pack_strs(keys) == layout
        assert proxy_records._unpack_strs(b"xx" + layout + b"yy", 2, len(keys)) == (keys, 2 + len(layout))
