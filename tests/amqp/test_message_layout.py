"""The scan's memo of the last message layout (amqp/sections.py, `_last_layout`) answers
exactly what a scan would, for well-formed and malformed messages alike."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqp import sections
from amqp.errors import DecodeError
from amqp.message import Message

PROTON = bytes.fromhex("005370c0020141") + bytes.fromhex("00537345") + bytes.fromhex("005375a00c") + b"x" * 12


def _fresh_scan(data: bytes):
    sections._last_layout = (-1, b"", (), 0)
    try:
        bounds, code = sections._scan(data)
    except DecodeError as e:
        return "error", str(e)
    return list(bounds), code


def _memo_scan(previous: bytes, data: bytes):
    _fresh_scan(previous)
    try:
        bounds, code = sections._scan(data)
    except DecodeError as e:
        return "error", str(e)
    return list(bounds), code


messages = st.sampled_from([
    PROTON,
    Message.build(b"body", header={"durable": True}, properties={"subject": "s"}).payload,
    Message.build({"k": 1}, message_annotations={"x-stream-filter-value": "a"}).payload,
    Message.build(body_sections=None, application_properties={"a": 1}).payload,
    Message.build(b"12345678", body_kind="data", footer={"f": 1}).payload,
    Message.build(7).payload,
    bytes.fromhex("005377 005301 a103") + b"abc",  # an amqp-value holding a described value: walked, never remembered
    bytes.fromhex("0080 0000000000000075 a003") + b"abc",  # a data section with a ulong descriptor: not remembered
])  # fmt: skip


@settings(max_examples=400)
@given(messages, st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=3), st.booleans())
def test_a_message_after_another_scans_as_it_would_alone(first, edits, same_prefix):
    """`second` is `first` with a few bytes changed (before or after where its layout is
    fixed): remembered or not, the scan gives the same bounds, or the same error."""
    second = bytearray(first)
    for at, value in edits:
        if at < len(second):
            second[at] = value
    second = bytes(second)
    assert _memo_scan(first, second) == _fresh_scan(second)


def test_a_publishers_messages_are_answered_from_the_memo():
    sections._last_layout = (-1, b"", (), 0)
    first = Message.from_bytes(PROTON)
    second = Message.from_bytes(PROTON[:-12] + b"y" * 12)
    assert second._b is first._b  # one layout, not scanned again
    assert second.body == b"y" * 12 and second.header.durable


def test_a_malformed_message_is_still_refused_after_a_good_one():
    Message.from_bytes(PROTON)
    bad = PROTON[:-13] + b"\x0d" + b"x" * 12  # the data section claims 13 bytes, 12 follow
    with pytest.raises(DecodeError):
        Message.from_bytes(bad)
