"""A publisher's common TRANSFER, taken straight from the input buffer.

Nearly every frame a publishing client sends is the same: one TRANSFER of a
whole message (list8; handle, delivery-id, an 8-byte vbin8 tag,
message-format and maybe settled; no more, no state), for a link that has
credit, on a session with window left. For each such frame the generic path
builds a Frame, a field list and a Transfer, then walks five calls from the
connection to the link. `take_transfers` reads these frames where they lie
in the parser's buffer and does for each exactly what the generic path does
(the same window and credit accounting, the same Delivery, the same
MessageReceived), in one loop.

It stops at the first frame that is anything else, and leaves that frame
for the generic path: another performative, another encoding of a field, a
multi-frame or aborted delivery, a frame that would break a rule (no
session, no link, no window, no credit, too big) so that the generic path
raises the right error. Strictness is the generic path's, by construction;
tests/amqp/test_transfer_run.py feeds the same bytes both ways and compares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import structs
from .definitions import SENDER
from .events import Delivery, MessageReceived

# the table's layouts, assigned and not imported (amqp/structs.py says why)
_u32 = structs.U32
_frame_header = structs.FRAME_HEADER

if TYPE_CHECKING:
    from .connection import Connection

_TRANSFER_LIST8 = 0x005314C0  # descriptor 0x14 (smallulong), then a list8
_MASK = 0xFFFFFFFF


def take_transfers(conn: Connection, events: list) -> None:
    """Handles the simple TRANSFER frames at the head of the parser's buffer.

    The caller has checked that the connection is open both ways and not
    closing (frames go to sessions)."""
    parser = conn.parser
    buf = parser.buf
    pos = parser.pos
    n = len(buf)
    max_frame = parser.max_frame_size
    sessions = conn.remote_sessions
    append = events.append
    session = None
    channel_of = -1
    unpack_header = _frame_header.unpack_from
    u32 = _u32.unpack_from
    try:
        while n - pos >= 20:  # the smallest TRANSFER frame this takes
            size, doff, type_, channel = unpack_header(buf, pos)
            if doff != 2 or type_ or size > n - pos or size > max_frame or u32(buf, pos + 8)[0] != _TRANSFER_LIST8:
                break
            end = pos + size
            fields_end = pos + 13 + buf[pos + 12]
            count = buf[pos + 13]
            if not 4 <= count <= 5 or fields_end > end:  # no delivery-tag, or more/aborted/state...: generic
                break
            p = pos + 14
            # handle (the three uint fields are decoded inline, each alike: a call per
            # field would cost more than the rest of this frame's work)
            c = buf[p]
            if c == 0x43:
                handle = 0
                p += 1
            elif c == 0x52:
                handle = buf[p + 1]
                p += 2
            elif c == 0x70:
                handle = u32(buf, p + 1)[0]
                p += 5
            else:
                break
            # delivery-id
            c = buf[p]
            if c == 0x52:
                delivery_id = buf[p + 1]
                p += 2
            elif c == 0x70:
                delivery_id = u32(buf, p + 1)[0]
                p += 5
            elif c == 0x43:
                delivery_id = 0
                p += 1
            else:
                break
            # delivery-tag
            if buf[p] != 0xA0:
                break
            tag_end = p + 2 + buf[p + 1]
            tag = bytes(buf[p + 2 : tag_end])
            p = tag_end
            # message-format
            c = buf[p]
            if c == 0x43 or c == 0x40:
                message_format = 0
                p += 1
            elif c == 0x52:
                message_format = buf[p + 1]
                p += 2
            elif c == 0x70:
                message_format = u32(buf, p + 1)[0]
                p += 5
            else:
                break
            # settled
            settled = False
            if count == 5:
                c = buf[p]
                if c == 0x41:
                    settled = True
                elif c != 0x42 and c != 0x40:
                    break
                p += 1
            if p != fields_end:
                break
            # the frame is well formed; now the rules the generic path enforces
            if channel != channel_of:
                session = sessions.get(channel)
                if session is None or session.end_sent:
                    break
                channel_of = channel
            if session.incoming_window <= 0:
                break
            link = session.remote_links.get(handle)
            if link is None or link.detach_sent or link.role == SENDER or link.incoming is not None:
                break
            if link.link_credit <= 0 or (link.max_message_size and end - fields_end > link.max_message_size):
                break
            # taken: Session._on_transfer, then Link.on_transfer's usual case
            pos = end
            session.next_incoming_id = (session.next_incoming_id + 1) & _MASK
            session.incoming_window -= 1
            if session.remote_outgoing_window > 0:
                session.remote_outgoing_window -= 1
            if not session.blocked and session.incoming_window <= session.incoming_window_max // 2:
                session.flow_due = True
            link.link_credit -= 1
            link.delivery_count = (link.delivery_count + 1) & _MASK
            d = Delivery(delivery_id, tag, link, settled, bytes(buf[fields_end:end]), message_format)
            if not settled:
                session.incoming_unsettled[delivery_id] = d
            append(MessageReceived(link, d))
    except IndexError:
        pass  # a field runs past the buffer: the generic path reports it
    parser.pos = pos
