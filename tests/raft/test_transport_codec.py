"""raft/grpc_codec.py: pysyncobj's message dicts on the wire, and nothing else.

Every shape syncobj.py 0.3.17 sends round-trips exactly; anything else is
refused with MessageError when encoding, and any byte string either decodes
to a known shape or raises MessageError (no other exception escapes).
"""

from __future__ import annotations

import os
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raft.grpc_codec import MessageError, decode, encode, reassemble_entry

u64 = st.integers(min_value=0, max_value=2**64 - 1)
blob = st.binary(max_size=200)
entry = st.tuples(blob, u64, u64)


def _apply_command_response(request_id, error, log):
    m = {"type": "apply_command_response", "request_id": request_id}
    if error is not None:
        m["error"] = error
    if log is not None:
        m["log_idx"], m["log_term"] = log
    return m


def _apply_command(command, request_id):
    m = {"type": "apply_command", "command": command}
    if request_id is not None:
        m["request_id"] = request_id
    return m


messages = st.one_of(
    st.builds(
        lambda t, i, lt: {"type": "request_vote", "term": t, "last_log_index": i, "last_log_term": lt}, u64, u64, u64
    ),
    st.builds(lambda t: {"type": "response_vote", "term": t}, u64),
    st.builds(lambda t: {"type": "timeout_now", "term": t}, u64),
    st.builds(lambda t, i, lt: {"type": "pre_vote", "term": t, "last_log_index": i, "last_log_term": lt}, u64, u64, u64),
    st.builds(lambda t, g: {"type": "pre_vote_response", "term": t, "granted": g}, u64, st.booleans()),
    st.builds(lambda t: {"type": "newer_term", "term": t}, u64),
    st.builds(
        lambda t, c, pi, pt, es: {
            "type": "append_entries",
            "term": t,
            "commit_index": c,
            "entries": es,
            "prevLogIdx": pi,
            "prevLogTerm": pt,
        },
        u64,
        u64,
        st.none() | u64,
        st.none() | u64,
        st.lists(entry, max_size=5),
    ),
    st.builds(
        lambda t, c, s: {"type": "append_entries", "term": t, "commit_index": c, "serialized": s},
        u64,
        u64,
        st.none() | st.just(False) | st.tuples(blob, st.booleans(), st.booleans()),
    ),
    st.builds(
        lambda n, r, s: {"type": "next_node_idx", "next_node_idx": n, "reset": r, "success": s},
        u64,
        st.booleans(),
        st.booleans(),
    ),
    st.builds(_apply_command, blob, st.none() | u64),
    st.builds(_apply_command_response, u64, st.none() | st.integers(0, 7), st.none() | st.tuples(u64, u64)),
)


@given(messages)
@settings(max_examples=400)
def test_every_pysyncobj_shape_round_trips(message):
    assert decode(encode(message)) == message


@given(st.binary(max_size=120))
@settings(max_examples=2000)
def test_arbitrary_bytes_decode_or_raise_message_error(data):
    try:
        message = decode(data)
    except MessageError:
        return
    assert decode(encode(message)) == message  # what decodes is a known shape


@given(messages, st.data())
@settings(max_examples=300)
def test_truncated_or_extended_payloads_are_refused(message, data):
    payload = encode(message)
    cut = data.draw(st.integers(0, len(payload) - 1))
    for bad in (payload[:cut], payload + b"\x00"):
        try:
            decoded = decode(bad)
        except MessageError:
            continue
        # A shorter payload can only decode if it is itself a valid message
        # (apply_command's command is the tail); it must then re-encode to itself.
        assert encode(decoded) == bad


def test_log_entries_decode_as_tuples_even_when_sent_as_lists():
    m = {"type": "append_entries", "term": 2, "commit_index": 1, "entries": [[b"c", 3, 2]], "prevLogIdx": 2,
         "prevLogTerm": 1}  # fmt: skip
    assert decode(encode(m))["entries"] == [(b"c", 3, 2)]


@pytest.mark.parametrize(
    "message",
    [
        "request_vote",
        {"type": "unknown", "term": 1},
        {"term": 1},
        {"type": "response_vote", "term": 1, "extra": 2},
        {"type": "response_vote"},
        {"type": "response_vote", "term": -1},
        {"type": "response_vote", "term": 2**64},
        {"type": "response_vote", "term": True},
        {"type": "response_vote", "term": "1"},
        {"type": "next_node_idx", "next_node_idx": 1, "reset": 1, "success": True},
        {"type": "apply_command", "command": "text, not bytes"},
        {"type": "apply_command", "command": os.system},
        {"type": "apply_command_response", "request_id": 1, "log_idx": 2},
        {
            "type": "append_entries",
            "term": 1,
            "commit_index": 0,
            "entries": [(b"c", 1)],
            "prevLogIdx": 0,
            "prevLogTerm": 0,
        },  # fmt: skip
        {
            "type": "append_entries",
            "term": 1,
            "commit_index": 0,
            "entries": [("c", 1, 1)],
            "prevLogIdx": 0,
            "prevLogTerm": 0,
        },  # fmt: skip
        {"type": "append_entries", "term": 1, "commit_index": 0, "serialized": (b"x", 1, 0)},
        {
            "type": "append_entries",
            "transmission": "start",
            "data": b"x",
            "term": 1,
            "commit_index": 0,
            "prevLogIdx": 0,
            "prevLogTerm": 0,
        },  # fmt: skip
    ],
)
def test_other_shapes_are_refused(message):
    with pytest.raises(MessageError):
        encode(message)


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x09", b"\x0b", b"\x0a" + b"\x00" * 8 + b"\x02", b"\x02" + b"\x00" * 7, b"\x05" + b"\x00" * 8 + b"\x02\x00"])
def test_malformed_payloads_are_refused(payload):
    with pytest.raises(MessageError):
        decode(payload)


def test_a_pickle_is_never_accepted_as_a_payload():
    evil = pickle.dumps({"type": "response_vote", "term": 1})
    with pytest.raises(MessageError):
        decode(evil)


def test_reassemble_entry_reads_pysyncobjs_protocol_2_pickles():
    for command in (b"", b"\x00\xff" * 50, os.urandom(1000)):
        assert reassemble_entry(pickle.dumps((command, 7, 3), 2)) == (command, 7, 3)
    assert reassemble_entry(pickle.dumps([b"c", 1, 2], 2)) == (b"c", 1, 2)


class _Boom:
    def __reduce__(self):
        return (os.system, ("true",))


@pytest.mark.parametrize(
    "obj",
    [
        _Boom(),
        (b"c", 1),
        ("text", 1, 2),
        {"a": 1},
        (b"c", 1, -2),
    ],
)
def test_reassemble_entry_refuses_anything_but_an_entry(obj):
    with pytest.raises(MessageError):
        reassemble_entry(pickle.dumps(obj, 2))


def test_reassemble_entry_refuses_codecs_tricks():
    # _codecs.encode is allowed only as bytes-from-latin1; another codec is refused.
    payload = pickle.dumps((b"abc", 1, 2), 2).replace(b"latin1", b"rot_13")  # same length: still well-formed
    with pytest.raises(MessageError):
        reassemble_entry(payload)
    with pytest.raises(MessageError):
        reassemble_entry(b"not a pickle")
