"""Every composite type of AMQP 1.0 Warren speaks: performatives [2.7],
delivery states [3.4], termini [3.5], SASL frames [5.3], transactions [4.5] and
the message sections [3.2]. Field order, types and defaults follow the spec's
tables; the numeric descriptor is 0x00000000:code."""

from __future__ import annotations

from .composite import Field, composite, restricted
from .errors import DecodeError

F = Field
SYM = dict(type="symbol", multiple=True)  # symbol-multiple capability lists

# ------------------------------------------------------------- performatives [2.7]

Open = composite("Open", "amqp:open:list", 0x10, [
    F("container_id", "string", mandatory=True),
    F("hostname", "string"),
    F("max_frame_size", "uint", default=0xFFFFFFFF),
    F("channel_max", "ushort", default=0xFFFF),
    F("idle_time_out", "uint"),
    F("outgoing_locales", **SYM),
    F("incoming_locales", **SYM),
    F("offered_capabilities", **SYM),
    F("desired_capabilities", **SYM),
    F("properties", "fields"),
])  # fmt: skip

Begin = composite("Begin", "amqp:begin:list", 0x11, [
    F("remote_channel", "ushort"),
    F("next_outgoing_id", "uint", mandatory=True),
    F("incoming_window", "uint", mandatory=True),
    F("outgoing_window", "uint", mandatory=True),
    F("handle_max", "uint", default=0xFFFFFFFF),
    F("offered_capabilities", **SYM),
    F("desired_capabilities", **SYM),
    F("properties", "fields"),
])  # fmt: skip

# role: False is sender, True is receiver [2.8.1]
SENDER, RECEIVER = False, True
# sender settle modes [2.8.2] and receiver settle modes [2.8.3]
SND_UNSETTLED, SND_SETTLED, SND_MIXED = 0, 1, 2
RCV_FIRST, RCV_SECOND = 0, 1

Attach = composite("Attach", "amqp:attach:list", 0x12, [
    F("name", "string", mandatory=True),
    F("handle", "uint", mandatory=True),
    F("role", "bool", mandatory=True),
    F("snd_settle_mode", "ubyte", default=SND_MIXED),
    F("rcv_settle_mode", "ubyte", default=RCV_FIRST),
    F("source", "*"),
    F("target", "*"),
    F("unsettled", "map"),
    F("incomplete_unsettled", "bool", default=False),
    F("initial_delivery_count", "uint"),
    F("max_message_size", "ulong"),
    F("offered_capabilities", **SYM),
    F("desired_capabilities", **SYM),
    F("properties", "fields"),
])  # fmt: skip

Flow = composite("Flow", "amqp:flow:list", 0x13, [
    F("next_incoming_id", "uint"),
    F("incoming_window", "uint", mandatory=True),
    F("next_outgoing_id", "uint", mandatory=True),
    F("outgoing_window", "uint", mandatory=True),
    F("handle", "uint"),
    F("delivery_count", "uint"),
    F("link_credit", "uint"),
    F("available", "uint"),
    F("drain", "bool", default=False),
    F("echo", "bool", default=False),
    F("properties", "fields"),
])  # fmt: skip

Transfer = composite("Transfer", "amqp:transfer:list", 0x14, [
    F("handle", "uint", mandatory=True),
    F("delivery_id", "uint"),
    F("delivery_tag", "binary"),
    F("message_format", "uint"),
    F("settled", "bool"),
    F("more", "bool", default=False),
    F("rcv_settle_mode", "ubyte"),
    F("state", "*"),
    F("resume", "bool", default=False),
    F("aborted", "bool", default=False),
    F("batchable", "bool", default=False),
])  # fmt: skip

Disposition = composite("Disposition", "amqp:disposition:list", 0x15, [
    F("role", "bool", mandatory=True),
    F("first", "uint", mandatory=True),
    F("last", "uint"),
    F("settled", "bool", default=False),
    F("state", "*"),
    F("batchable", "bool", default=False),
])  # fmt: skip

Detach = composite("Detach", "amqp:detach:list", 0x16, [
    F("handle", "uint", mandatory=True),
    F("closed", "bool", default=False),
    F("error", "*"),
])  # fmt: skip

End = composite("End", "amqp:end:list", 0x17, [F("error", "*")])
Close = composite("Close", "amqp:close:list", 0x18, [F("error", "*")])

Error = composite("Error", "amqp:error:list", 0x1D, [
    F("condition", "symbol", mandatory=True),
    F("description", "string"),
    F("info", "fields"),
])  # fmt: skip

PERFORMATIVES = (Open, Begin, Attach, Flow, Transfer, Disposition, Detach, End, Close)

# ------------------------------------------------------------- delivery states [3.4]

Received = composite("Received", "amqp:received:list", 0x23, [
    F("section_number", "uint", mandatory=True),
    F("section_offset", "ulong", mandatory=True),
])  # fmt: skip
Accepted = composite("Accepted", "amqp:accepted:list", 0x24, [])
Rejected = composite("Rejected", "amqp:rejected:list", 0x25, [F("error", "*")])
Released = composite("Released", "amqp:released:list", 0x26, [])
Modified = composite("Modified", "amqp:modified:list", 0x27, [
    F("delivery_failed", "bool"),
    F("undeliverable_here", "bool"),
    F("message_annotations", "fields"),
])  # fmt: skip

OUTCOMES = (Accepted, Rejected, Released, Modified)

# ------------------------------------------------------------- termini [3.5]

Source = composite("Source", "amqp:source:list", 0x28, [
    F("address", "*"),
    F("durable", "uint", default=0),
    F("expiry_policy", "symbol", default="session-end"),
    F("timeout", "uint", default=0),
    F("dynamic", "bool", default=False),
    F("dynamic_node_properties", "fields"),
    F("distribution_mode", "symbol"),
    F("filter", "map"),
    F("default_outcome", "*"),
    F("outcomes", **SYM),
    F("capabilities", **SYM),
])  # fmt: skip

Target = composite("Target", "amqp:target:list", 0x29, [
    F("address", "*"),
    F("durable", "uint", default=0),
    F("expiry_policy", "symbol", default="session-end"),
    F("timeout", "uint", default=0),
    F("dynamic", "bool", default=False),
    F("dynamic_node_properties", "fields"),
    F("capabilities", **SYM),
])  # fmt: skip

DeleteOnClose = composite("DeleteOnClose", "amqp:delete-on-close:list", 0x2B, [])
DeleteOnNoLinks = composite("DeleteOnNoLinks", "amqp:delete-on-no-links:list", 0x2C, [])
DeleteOnNoMessages = composite("DeleteOnNoMessages", "amqp:delete-on-no-messages:list", 0x2D, [])
DeleteOnNoLinksOrMessages = composite("DeleteOnNoLinksOrMessages", "amqp:delete-on-no-links-or-messages:list", 0x2E, [])

# ------------------------------------------------------------- transactions [4.5]

Coordinator = composite("Coordinator", "amqp:coordinator:list", 0x30, [F("capabilities", **SYM)])
Declare = composite("Declare", "amqp:declare:list", 0x31, [F("global_id", "*")])
Discharge = composite("Discharge", "amqp:discharge:list", 0x32, [
    F("txn_id", "binary", mandatory=True),
    F("fail", "bool"),
])  # fmt: skip
Declared = composite("Declared", "amqp:declared:list", 0x33, [F("txn_id", "binary", mandatory=True)])
TransactionalState = composite("TransactionalState", "amqp:transactional-state:list", 0x34, [
    F("txn_id", "binary", mandatory=True),
    F("outcome", "*"),
])  # fmt: skip

# ------------------------------------------------------------- SASL [5.3.3]

SASL_OK, SASL_AUTH, SASL_SYS, SASL_SYS_PERM, SASL_SYS_TEMP = range(5)

SaslMechanisms = composite("SaslMechanisms", "amqp:sasl-mechanisms:list", 0x40, [
    F("sasl_server_mechanisms", mandatory=True, **SYM),
])  # fmt: skip
SaslInit = composite("SaslInit", "amqp:sasl-init:list", 0x41, [
    F("mechanism", "symbol", mandatory=True),
    F("initial_response", "binary"),
    F("hostname", "string"),
])  # fmt: skip
SaslChallenge = composite("SaslChallenge", "amqp:sasl-challenge:list", 0x42, [
    F("challenge", "binary", mandatory=True),
])  # fmt: skip
SaslResponse = composite("SaslResponse", "amqp:sasl-response:list", 0x43, [
    F("response", "binary", mandatory=True),
])  # fmt: skip
SaslOutcome = composite("SaslOutcome", "amqp:sasl-outcome:list", 0x44, [
    F("code", "ubyte", mandatory=True),
    F("additional_data", "binary"),
])  # fmt: skip

SASL_FRAMES = (SaslMechanisms, SaslInit, SaslChallenge, SaslResponse, SaslOutcome)

# ------------------------------------------------------------- message sections [3.2]

Header = composite("Header", "amqp:header:list", 0x70, [
    F("durable", "bool", default=False),
    F("priority", "ubyte", default=4),
    F("ttl", "uint"),
    F("first_acquirer", "bool", default=False),
    F("delivery_count", "uint", default=0),
])  # fmt: skip

Properties = composite("Properties", "amqp:properties:list", 0x73, [
    F("message_id", "*"),
    F("user_id", "binary"),
    F("to", "*"),
    F("subject", "string"),
    F("reply_to", "*"),
    F("correlation_id", "*"),
    F("content_type", "symbol"),
    F("content_encoding", "symbol"),
    F("absolute_expiry_time", "timestamp"),
    F("creation_time", "timestamp"),
    F("group_id", "string"),
    F("group_sequence", "uint"),
    F("reply_to_group_id", "string"),
])  # fmt: skip


def _check_annotations(v):
    if type(v) is not dict:  # not a described map such as another section
        raise DecodeError("annotations must be a map")
    return v


def _check_binary(v):
    if type(v) is not bytes:
        raise DecodeError("a data section holds binary")
    return v


def _check_list(v):
    if type(v) is not list:  # not an array
        raise DecodeError("an amqp-sequence section holds a list")
    return v


DeliveryAnnotations = restricted("DeliveryAnnotations", "amqp:delivery-annotations:map", 0x71, _check_annotations, dict)
MessageAnnotations = restricted("MessageAnnotations", "amqp:message-annotations:map", 0x72, _check_annotations, dict)
ApplicationProperties = restricted(
    "ApplicationProperties", "amqp:application-properties:map", 0x74, _check_annotations, dict
)
Data = restricted("Data", "amqp:data:binary", 0x75, _check_binary, bytes)
AmqpSequence = restricted("AmqpSequence", "amqp:amqp-sequence:list", 0x76, _check_list, list)
AmqpValue = restricted("AmqpValue", "amqp:value:*", 0x77, lambda v: v, object)
Footer = restricted("Footer", "amqp:footer:map", 0x78, _check_annotations, dict)

SECTIONS = (
    Header, DeliveryAnnotations, MessageAnnotations, Properties, ApplicationProperties,
    Data, AmqpSequence, AmqpValue, Footer,
)  # fmt: skip

