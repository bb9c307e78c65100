"""The hand-written TRANSFER paths agree with the generic codec."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from amqp import codec
from amqp.definitions import Accepted, Transfer
from amqp.errors import DecodeError
from amqp.fastpath import decode_transfer, encode_transfer_frame
from amqp.framing import encode_frame

uint = st.integers(0, 2**32 - 1)
tags = st.binary(max_size=32)


@given(st.integers(0, 65535), uint, uint, tags, st.booleans(), st.binary(max_size=64), uint)
def test_encode_matches_the_generic_encoder(channel, handle, delivery_id, tag, settled, payload, fmt):
    generic = encode_frame(
        channel,
        Transfer(handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=fmt, settled=settled),
        payload,
    )
    assert encode_transfer_frame(channel, handle, delivery_id, tag, settled, payload, fmt) == generic


optional_uint = st.none() | uint
optional_bool = st.none() | st.booleans()


@given(
    handle=uint,
    delivery_id=optional_uint,
    tag=st.none() | tags,
    fmt=optional_uint,
    settled=optional_bool,
    more=st.booleans(),
    aborted=st.booleans(),
    with_state=st.booleans(),
)
def test_decode_matches_the_generic_decoder(handle, delivery_id, tag, fmt, settled, more, aborted, with_state):
    t = Transfer(handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=fmt, settled=settled,
                 more=more, aborted=aborted, state=Accepted() if with_state else None)  # fmt: skip
    body = t.encode() + b"payload"
    fast = decode_transfer(body)
    generic = codec.decode(body)
    if with_state:
        assert fast is None  # delivery states take the generic path
    else:
        assert fast == generic


@settings(max_examples=500)
@given(st.binary(max_size=40))
def test_fast_decode_never_accepts_what_the_generic_decoder_refuses(noise):
    body = b"\x00\x53\x14" + noise
    fast = decode_transfer(body)
    try:
        generic = codec.decode(body)
    except DecodeError:
        assert fast is None
        return
    if fast is not None:
        assert fast == generic


def test_mandatory_handle_and_field_types_fall_back():
    null_handle = b"\x00\x53\x14\xc0\x02\x01\x40"
    assert decode_transfer(null_handle) is None
    string_tag = b"\x00\x53\x14\xc0\x06\x03\x43\x43\xa1\x01x"
    assert decode_transfer(string_tag) is None
