"""The parts of `warren migrate` that need no RabbitMQ: the source's URIs and
addresses, the document Warren is given (--skip, --queue-type), the progress
display, and the options it refuses."""

from __future__ import annotations

import io

import pytest

from node.cli import main
from node.ops import migrate_source as src
from node.ops.ctl_kit import CtlError
from node.ops.migrate_progress import Display, QueueProgress


def test_the_shovels_read_rabbitmq_at_its_amqp_port_with_the_same_credentials():
    assert src.amqp_uri("http://ops:s3cret@rabbit:15672", None) == "amqp://ops:s3cret@rabbit:5672"
    assert src.amqp_uri("https://ops:s3cret@rabbit", None) == "amqps://ops:s3cret@rabbit:5671"
    assert src.amqp_uri("http://x:y@rabbit:15672", "amqp://a:b@other:5673/") == "amqp://a:b@other:5673"
    assert src.vhost_uri("amqp://a:b@h:1", "/") == "amqp://a:b@h:1/%2F"
    with pytest.raises(CtlError, match="no vhost"):
        src.amqp_uri("http://x:y@rabbit", "amqp://a:b@other/shop")


def test_the_address_follows_rabbitmq_s_version():
    assert src.queue_address("3.10.8", "orders") == "/amq/queue/orders"
    assert src.queue_address("4.1.0", "a b") == "/queues/a%20b"
    with pytest.raises(CtlError, match="version"):
        src.queue_address("unknown", "q")


def test_a_bad_from_is_refused():
    for url in ("amqp://rabbit:5672", "http://x:y@rabbit:15672/api", "rabbit"):
        with pytest.raises(CtlError, match="--from"):
            src.source_client(url, 5)
    assert src.source_client("https://u:p@rabbit", 5).base == "https://rabbit"


DOC = {
    "queues": [{"name": "orders", "vhost": "/", "durable": True, "arguments": {}},
               {"name": "qq", "vhost": "/", "durable": True, "arguments": {"x-queue-type": "quorum"}}],
    "exchanges": [{"name": "x", "vhost": "/", "type": "topic"}],
    "bindings": [{"source": "x", "vhost": "/", "destination": "orders", "destination_type": "queue"},
                 {"source": "x", "vhost": "/", "destination": "qq", "destination_type": "queue"}],
    "policies": [{"name": "mirror", "vhost": "/", "pattern": ".*", "definition": {"ha-mode": "all"}}],
}  # fmt: skip


def test_skipping_a_queue_leaves_out_its_bindings_and_says_so():
    doc, said = src.prepare(DOC, src.parse_skip(["queues:orders", "policies:mirror"]), None)
    assert [q["name"] for q in doc["queues"]] == ["qq"] and doc["policies"] == []
    assert [b["destination"] for b in doc["bindings"]] == ["qq"]
    assert said == ["skipped queue 'orders' in vhost '/'", "skipped policy 'mirror' in vhost '/'",
                    "skipped binding 'x' -> 'orders' in vhost '/'"]  # fmt: skip
    assert len(DOC["queues"]) == 2  # the source document is left as it was


def test_a_skip_naming_nothing_or_badly_is_an_error():
    with pytest.raises(CtlError, match="no such item"):
        src.prepare(DOC, src.parse_skip(["queues:nope"]), None)
    for bad in ("bindings:x", "queues", "queues:"):
        with pytest.raises(CtlError, match="SECTION:NAME"):
            src.parse_skip([bad])


def test_queue_type_turns_classic_queues_only():
    doc, _ = src.prepare(DOC, [], "quorum")
    assert [(q["name"], q["arguments"]["x-queue-type"]) for q in doc["queues"]] == [("orders", "quorum"),
                                                                                    ("qq", "quorum")]  # fmt: skip
    with pytest.raises(CtlError, match="--queue-type"):
        src.prepare(DOC, [], "lazy")


def test_plain_lines_when_not_a_terminal_and_bars_in_one():
    p = QueueProgress("shop", "orders", initial=100)
    p.update(100, 0, "running", "", now=10.0)
    p.update(40, 60, "running", "", now=12.0)
    plain = io.StringIO()
    Display(plain, tty=False).report([p])
    assert plain.getvalue() == "progress shop/orders: 40 left, 60 moved, 30 msg/s, shovel running\n"
    term = io.StringIO()
    shown = Display(term, tty=True)
    shown.report([p])
    shown.report([p])
    assert term.getvalue().count("[" + "#" * 18 + "." * 12 + "]") == 2
    assert "\x1b[1A" in term.getvalue()  # the second report redraws the first


def test_migrate_needs_from_and_refuses_json(capsys):
    assert main(["migrate", "--port", "1"]) == 64
    assert "--from" in capsys.readouterr().err
    assert main(["migrate", "--json", "--from", "http://g:g@127.0.0.1:1"]) == 64
    assert "--json" in capsys.readouterr().err
