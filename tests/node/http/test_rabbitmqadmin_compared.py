"""Every rabbitmqadmin 3.10 command (Debian's /usr/bin/rabbitmqadmin, installed
by bench/setup.sh) run against a Warren node and against a private RabbitMQ
3.10 (bench/rabbitmq.py, started once for the module), and the answers
compared: the exit code, what it prints on stderr, and the listing parsed
back into columns and rows, whatever the -f format; a command's effect is
checked by a later list or show compared the same way. Warren re-creates
RabbitMQ 4, so where 3.10 and 4 differ, or where the difference is what the
broker is rather than what it did (node names, versions, hashing of
passwords, Erlang internals), the comparison says so where it allows it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proton.utils import BlockingConnection
from rabbitmqadmin_pair import Answer, Side, format_of, json_of, keys_of, rows

REPO = Path(__file__).resolve().parents[3]
STATS_WAIT = 15.0  # seconds RabbitMQ's statistics (emitted every 500 ms here) may take to show a change
V = ("-V", "adm")  # the vhost every test works in: RabbitMQ's node is shared by the module
TRACE = "amq.rabbitmq.trace"  # RabbitMQ's firehose exchange: Warren has no tracer (vhost tracing is refused)
CAROL_HASH = "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR"  # RabbitMQ's salted SHA-256 form, kept as given

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# RabbitMQ 3.10's JSON keys that Warren's replies do not have, by listing, and why.
ERLANG = {"garbage_collection", "reductions", "reductions_details", "backing_queue_status"}  # of a process
ABSENT = {
    "queues": ERLANG
    | {"recoverable_slaves"}  # classic mirrored queues, gone in RabbitMQ 4
    | {"open_files"}  # Ra's segment file handles of a quorum queue
    # not yet in Warren: the classic store's byte and memory breakdowns (Warren counts ready bytes),
    # the consumers' idleness, the head's timestamp, the single active consumer's tag,
    # and the basic.get and no-ack counters of message_stats
    | {
        "message_bytes",
        "message_bytes_ram",
        "message_bytes_persistent",
        "message_bytes_paged_out",
        "message_bytes_unacknowledged",
        "messages_ram",
        "messages_ready_ram",
        "messages_unacknowledged_ram",
        "messages_persistent",
        "messages_paged_out",
        "messages_dlx",
        "message_bytes_dlx",
        "head_message_timestamp",
        "idle_since",
        "single_active_consumer_tag",
        "single_active_consumer_ctag",
        "message_stats.get",
        "message_stats.get_no_ack",
        "message_stats.get_empty",
        "message_stats.deliver_no_ack",
    },
    "exchanges": {"message_stats"},
    # not yet: a vhost's message_stats
    "vhosts": {"message_stats"},
    # Erlang's versions, the statistics database's retention, the message store's disk counters
    "overview": {
        "erlang_version",
        "erlang_full_version",
        "sample_retention_policies",
        "release_series_support_status",
        "message_stats.disk_reads",
        "message_stats.disk_writes",
    },  # fmt: skip
    # AMQP 1.0 in 3.10 is a plugin that runs each client as a direct (Erlang) connection of the
    # user; RabbitMQ 4, as Warren, reports it as a network connection
    "connections": {"user_who_performed_action"},
    # ... and passes an AMQP 1.0 link's credit to its queue as a consumer argument
    "consumers": {"arguments.x-credit"},
    # Erlang VM and Mnesia counters, the plugin and log file lists of a RabbitMQ node
    "nodes": {
        "applications",
        "cluster_links",
        "config_files",
        "enabled_plugins",
        "log_files",
        "rates_mode",
        "run_queue",
        "proc_total",
        "proc_used",
        "context_switches",
        "gc_num",
        "gc_bytes_reclaimed",
        "metrics_gc_queue_length",
        "ra_open_file_metrics",
    },  # fmt: skip
}
# ... and RabbitMQ's node counters, of which Warren has the totals only: every io_*, mnesia_*,
# msg_store_*, queue_index_*, *_details rate of a node, and the churn counters
NODE_PREFIXES = ("io_", "mnesia_", "msg_store_", "queue_index_", "channel_", "connection_", "queue_",
                 "mem_used_details", "fd_used_details", "sockets_used_details", "disk_free_details")  # fmt: skip


@pytest.fixture(scope="module")
def rabbitmqadmin() -> str:
    path = shutil.which("rabbitmqadmin")
    if path is None or not os.path.exists("/usr/lib/rabbitmq/bin/rabbitmq-server"):
        setup = subprocess.run(["sh", str(REPO / "bench" / "setup.sh")], capture_output=True, text=True, timeout=900)
        if setup.returncode != 0:
            pytest.fail(f"bench/setup.sh (installs RabbitMQ 3.10 and rabbitmqadmin) failed: {setup.stderr[-500:]}")
        path = shutil.which("rabbitmqadmin")
    if path is None:
        pytest.fail("bench/setup.sh ran but there is no rabbitmqadmin on PATH")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def rabbit(rabbitmqadmin):
    """The private RabbitMQ 3.10 node, started once for every test here."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from rabbitmq import RabbitNode
    finally:
        sys.path.remove(str(REPO / "bench"))
    node = RabbitNode(amqp_port=free_port(), mgmt_port=free_port(), dist_port=free_port(),
                      nodename=f"warren_admin_{os.getpid()}@localhost",
                      extra_conf="collect_statistics_interval = 500\n")  # fmt: skip
    try:
        node.start()
    except Exception as e:
        node.stop()
        pytest.fail(f"starting RabbitMQ 3.10 with bench/rabbitmq.py failed: {e}")
    yield node
    node.stop()


class Pair:
    """rabbitmqadmin against Warren (`w`) and RabbitMQ (`r`)."""

    def __init__(self, admin: str, w: Side, r: Side):
        self.admin, self.w, self.r = admin, w, r

    def both(self, *args: str, stdin: str | None = None) -> tuple[Answer, Answer]:
        return self.w.run(self.admin, list(args), stdin), self.r.run(self.admin, list(args), stdin)

    def same(self, *args: str, stdin: str | None = None, mask: tuple = (), drop: tuple = (),
             wait: bool = False) -> tuple[list[str], list[list[str]]]:  # fmt: skip
        """Runs the command on both and asserts the same answer: exit code, stderr, and
        the rows it prints with the columns in `mask` present but not compared and those in
        `drop` left out. `wait`: a listing of statistics RabbitMQ emits late is asked again
        until it agrees (the commands that change something are run once)."""
        deadline = time.monotonic() + (STATS_WAIT if wait else 0)
        while True:
            w, r = self.both(*args, stdin=stdin)
            got_w, got_r = self._answer(args, w, mask, drop), self._answer(args, r, mask, drop)
            if got_w == got_r or time.monotonic() > deadline:
                break
            time.sleep(0.25)  # RabbitMQ's statistics database: nothing to wait on but its next emission
        assert got_w == got_r, f"rabbitmqadmin {' '.join(args)}\nwarren: {got_w}\nrabbit: {got_r}"
        return got_w[3], got_w[4]

    @staticmethod
    def _answer(args: tuple, a: Answer, mask: tuple, drop: tuple) -> tuple:
        if a.rc != 0 or format_of(list(args)) in ("raw_json", "pretty_json"):
            return a.rc, a.err, a.out if a.rc != 0 else _json_plain(json_of(a.out), mask, drop), [], []
        columns, table = rows(format_of(list(args)), a.out)
        table = [row for row in table if TRACE not in row]
        keep = [i for i, c in enumerate(columns) if c not in drop]
        table = [[("*" if columns[i] in mask else row[i]) for i in keep] for row in table]
        return a.rc, a.err, "", [columns[i] for i in keep], table

    def keys(self, *args: str, absent: set = frozenset(), prefixes: tuple = ()) -> tuple:
        """Asserts that Warren's JSON has every key RabbitMQ's has, but those in `absent`
        (or starting with one of `prefixes`); returns both replies."""
        w, r = self.both("-f", "raw_json", *args)
        assert (w.rc, r.rc) == (0, 0), (w.err, r.err)
        jw, jr = json_of(w.out), json_of(r.out)
        missing = {k for k in keys_of(jr) - keys_of(jw) if not _allowed(k, absent) and not k.startswith(prefixes)}
        assert not missing, f"{' '.join(args)}: RabbitMQ has {sorted(missing)}, Warren not"
        return jw, jr


def _allowed(key: str, absent: set) -> bool:
    """Whether `absent` names the key, its top-level key, or either without "_details" (its rate)."""
    top = key.split(".")[0]
    return bool({key, key.removesuffix("_details"), top, top.removesuffix("_details")} & absent)


def _json_plain(value, mask: tuple, drop: tuple):
    if isinstance(value, dict) and isinstance(value.get("properties"), dict):
        value = {**value, "properties": _without_first_delivery_count(value["properties"])}
    if isinstance(value, list):
        return [_json_plain(v, mask, drop) for v in value if not (isinstance(v, dict) and v.get("name") == TRACE)]
    if isinstance(value, dict):
        return {k: ("*" if k in mask else _json_plain(v, mask, drop)) for k, v in value.items() if k not in drop}
    return value


def _without_first_delivery_count(properties: dict) -> dict | list:
    """3.10 heads every message a quorum queue gives with x-delivery-count: 0; RabbitMQ 4, as
    Warren, counts only failed deliveries and writes none before the first."""
    headers = {k: v for k, v in properties.get("headers", {}).items() if (k, v) != ("x-delivery-count", 0)}
    out = {k: v for k, v in properties.items() if k != "headers"} | ({"headers": headers} if headers else {})
    return out or []  # no properties: an empty JSON list, as both write it


@pytest.fixture
def pair(rabbit, node, rabbitmqadmin, tmp_path) -> Pair:
    (tmp_path / "warren").mkdir()
    (tmp_path / "rabbit").mkdir()
    cluster = rabbit.api("GET", "/api/overview")["cluster_name"]
    w = Side("warren", node.broker.http_port, node.broker.config.node_name, "4.2.0", tmp_path / "warren")
    r = Side("rabbit", rabbit.mgmt_port, rabbit.nodename, "3.10.8", tmp_path / "rabbit", {cluster: "{node}"})
    p = Pair(rabbitmqadmin, w, r)
    p.same("declare", "vhost", "name=adm")
    p.same("declare", "permission", "vhost=adm", "user=guest", "configure=.*", "write=.*", "read=.*")
    yield p
    # RabbitMQ is shared by the module: leave it as the next test expects it
    for path in ("/api/vhosts/adm", "/api/users/adm-bob", "/api/users/adm-carol", "/api/vhosts/adm-imported",
                 "/api/vhosts/adm-other", "/api/vhosts/adm-traced"):  # fmt: skip
        try:
            rabbit.api("DELETE", path)
        except RuntimeError:
            pass  # 404: this test made none


# ---------------------------------------------------------------- declare, list, delete


def test_declare_list_and_delete_every_object_kind(pair):
    p = pair
    p.same(*V, "declare", "exchange", "name=x.topic", "type=topic")
    p.same(*V, "declare", "exchange", "name=x.fan", "type=fanout", "durable=false", "auto_delete=true")
    p.same(*V, "declare", "exchange", "name=x.int", "type=direct", "internal=true",
           'arguments={"alternate-exchange": "x.fan"}')  # fmt: skip
    p.same(*V, "declare", "queue", "name=q.classic")
    p.same(*V, "declare", "queue", "name=q.quorum", "queue_type=quorum")
    p.same(*V, "declare", "queue", "name=q.args", "durable=false", 'arguments={"x-max-length": 10}')
    # node=: where a classic queue lives; each side's own node name
    p.w.values["{node}"], p.r.values["{node}"] = p.w.node_name, p.r.node_name
    p.same(*V, "declare", "queue", "name=q.node", "node={node}", "auto_delete=true")
    p.same(*V, "declare", "binding", "source=x.topic", "destination=q.classic", "routing_key=a.*")
    p.same(*V, "declare", "binding", "source=x.topic", "destination=x.fan", "destination_type=exchange",
           "routing_key=#")  # fmt: skip
    p.same(*V, "declare", "binding", "source=x.fan", "destination=q.quorum", 'arguments={"k": "v"}')
    p.same("declare", "user", "name=adm-bob", "password=bob-pw", "tags=management,policymaker")
    p.same("declare", "user", "name=adm-carol", f"password_hash={CAROL_HASH}",
           "hashing_algorithm=rabbit_password_hashing_sha256", "tags=")  # fmt: skip
    p.same("declare", "permission", "vhost=adm", "user=adm-bob", "configure=^q", "write=.*", "read=")
    p.same(*V, "declare", "policy", "name=cap", "pattern=^q\\.", 'definition={"max-length": 5}', "priority=3",
           "apply-to=queues")  # fmt: skip
    p.same(*V, "declare", "operator_policy", "name=op", "pattern=^q", 'definition={"max-length": 7}')
    p.same("declare", "vhost_limit", "vhost=adm", "name=max-queues", "value=100")
    p.same(*V, "declare", "parameter", "component=vhost-limits", "name=limits",
           'value={"max-queues": 50, "max-connections": 10}')  # fmt: skip

    # every listing, default columns, vhost-scoped ones in adm
    for kind in ("exchanges", "queues", "bindings", "consumers"):
        p.same(*V, "list", kind, wait=kind == "queues")
    for kind in ("vhosts", "permissions", "parameters", "policies", "operator_policies", "vhost_limits"):
        p.same("list", kind, wait=kind == "vhosts")
    # a password given in clear is hashed each broker's way (Warren: PBKDF2); a hash given is kept as given
    cols, table = p.same("list", "users", mask=("password_hash", "hashing_algorithm"))
    assert [r[cols.index("name")] for r in table] == ["adm-bob", "adm-carol", "guest"]
    carol = [u for u in p.w.json(p.admin, "list", "users") if u["name"] == "adm-carol"]
    assert [(u["password_hash"], u["hashing_algorithm"]) for u in carol] == [
        (CAROL_HASH, "rabbit_password_hashing_sha256")
    ]
    p.same("list", "nodes", mask=("name", "mem_used"))  # the node's name and memory are its own
    for kind in ("exchanges", "queues", "bindings", "vhosts"):
        p.keys(*V, "list", kind, absent=ABSENT.get(kind, set()))
    for kind in ("users", "permissions", "parameters", "policies", "operator_policies", "vhost_limits"):
        p.keys("list", kind)
    p.keys("list", "nodes", absent=ABSENT["nodes"], prefixes=NODE_PREFIXES)
    p.same(*V, "list", "queues", "name", "policy", "operator_policy", "effective_policy_definition", "arguments")

    # the effect of a policy and of the limits: the queue is capped, the vhost refuses a 51st queue
    p.same("-f", "raw_json", *V, "list", "queues", "name", "effective_policy_definition")

    # deleting each kind, then the listing again
    p.same(*V, "delete", "binding", "source=x.topic", "destination_type=queue", "destination=q.classic",
           "properties_key=a.%2A")  # fmt: skip
    p.same(*V, "delete", "binding", "source=x.topic", "destination_type=exchange", "destination=x.fan",
           "properties_key=%23")  # fmt: skip
    # a binding with arguments is named by a hash of them, each broker's own: looked up on each side
    for side in (p.w, p.r):
        side.values["{key}"] = next(b["properties_key"] for b in side.json(p.admin, *V, "list", "bindings")
                                    if b["source"] == "x.fan")  # fmt: skip
    p.same(*V, "delete", "binding", "source=x.fan", "destination_type=queue", "destination=q.quorum",
           "properties_key={key}")  # fmt: skip
    p.same(*V, "list", "bindings")
    p.same(*V, "delete", "exchange", "name=x.int")
    p.same(*V, "delete", "queue", "name=q.args")
    p.same(*V, "delete", "policy", "name=cap")
    p.same(*V, "delete", "operator_policy", "name=op")
    p.same("delete", "vhost_limit", "vhost=adm", "name=max-queues")
    p.same(*V, "delete", "parameter", "component=vhost-limits", "name=limits")
    p.same("delete", "permission", "vhost=adm", "user=adm-bob")
    p.same("delete", "user", "name=adm-carol")
    p.same("declare", "vhost", "name=adm-other", "tracing=false")
    p.same("list", "vhosts", "name", "tracing")
    p.same("delete", "vhost", "name=adm-other")
    p.same("list", "vhosts", "name", "tracing")
    for kind in ("exchanges", "queues", "bindings"):
        p.same(*V, "list", kind, wait=kind == "queues")
    for kind in ("users", "permissions", "parameters", "policies", "operator_policies", "vhost_limits"):
        p.same("list", kind, mask=("password_hash", "hashing_algorithm"))


def test_refusals_print_what_rabbitmq_prints(pair):
    p = pair
    p.same(*V, "declare", "queue", "name=q")
    p.same(*V, "declare", "exchange", "name=x", "type=direct")
    p.same(*V, "delete", "queue", "name=nope")
    p.same(*V, "delete", "exchange", "name=nope")
    p.same(*V, "delete", "binding", "source=x", "destination_type=queue", "destination=q", "properties_key=nope")
    p.same(*V, "declare", "binding", "source=nope", "destination=q")
    p.same(*V, "declare", "queue", "name=q", "durable=false")  # inequivalent
    p.same(*V, "declare", "exchange", "name=x", "type=fanout")
    p.same(*V, "declare", "exchange", "name=y", "type=bogus")
    p.same("-V", "nowhere", "list", "queues")
    p.same("-V", "nowhere", "declare", "queue", "name=q")
    p.same("delete", "user", "name=nobody")
    p.same("delete", "vhost", "name=nowhere")
    p.same("delete", "policy", "name=nope")
    p.same("close", "connection", "name=nope")
    p.same(*V, "purge", "queue", "name=nope")
    p.same(*V, "get", "queue=nope")
    # a publish to no exchange: 404 in RabbitMQ 4 (allow_missing_post false), as Warren; 3.10 tried the
    # publish and answered the channel's error with a 400
    w, r = p.both(*V, "publish", "exchange=nope", "routing_key=k", "payload=x")
    assert (w.rc, w.err) == (1, "*** Not found: /api/exchanges/adm/nope/publish\n\n")
    assert (r.rc, r.err) == (1, "*** 404 NOT_FOUND - no exchange 'nope' in vhost 'adm'\n\n")
    # a pattern that does not compile: the same words, then each regular expression library's own
    w, r = p.both(*V, "declare", "policy", "name=bad", "pattern=(", 'definition={"max-length": 1}')
    assert w.rc == r.rc == 1
    assert (
        w.err.partition("invalid:")[0]
        == r.err.partition("invalid:")[0]
        == ("*** Validation failed\n\npattern should be regular expression but is ")
    )
    # a definition refused: RabbitMQ's words write Erlang terms (<<"x">>); the frame is the same
    for definition in ('{"max-length": "x"}', '{"no-such-key": 1}'):
        w, r = p.both(*V, "declare", "policy", "name=bad", "pattern=.", f"definition={definition}")
        assert (w.rc, r.rc) == (1, 1) and w.err.startswith("*** Validation failed\n\n") and w.err.endswith("\n\n\n")
        assert r.err.startswith("*** Validation failed\n\n") and r.err.endswith("\n\n\n")
    p.same("declare", "user", "name=adm-bob", "password=x")  # rabbitmqadmin's own usage errors
    p.same("declare", "nothing", "name=x")
    p.same("frobnicate")
    p.same(*V, "declare", "queue", "name=q2", 'arguments={"x-max-length":')
    p.same("-f", "nonsense", "list", "queues")
    # who may: a wrong password, and a management user asking for the users (administrator only)
    p.same("-p", "wrong", "list", "vhosts")
    p.same("declare", "user", "name=adm-bob", "password=bob-pw", "tags=management")
    p.same("-u", "adm-bob", "-p", "bob-pw", "list", "users")
    p.same("-u", "adm-bob", "-p", "bob-pw", "list", "vhosts")  # none of them his: no permissions yet
    p.same("-u", "adm-bob", "-p", "bob-pw", *V, "declare", "queue", "name=bobs")
    p.same("declare", "permission", "vhost=adm", "user=adm-bob", "configure=^q", "write=.*", "read=.*")
    p.same("-u", "adm-bob", "-p", "bob-pw", *V, "declare", "queue", "name=q-bob")  # configure ^q: allowed
    p.same("-u", "adm-bob", "-p", "bob-pw", *V, "declare", "queue", "name=bobs")  # refused
    p.same("-u", "adm-bob", "-p", "bob-pw", *V, "list", "queues", "name")
    # what Warren does not do, refused naming the field where RabbitMQ does it
    w, r = p.both("declare", "vhost", "name=adm-traced", "tracing=true")  # the firehose tracer
    assert (w.rc, w.err, r.rc) == (1, "*** tracing is not implemented by Warren\n\n", 0)
    p.same(*V, "declare", "queue", "name=q.elsewhere", "node=elsewhere@nowhere")  # no such node
    p.w.values["{node}"], p.r.values["{node}"] = p.w.node_name, p.r.node_name
    w, r = p.both(*V, "declare", "queue", "name=q.qq", "queue_type=quorum", "node={node}")  # a quorum queue's leader
    assert (w.rc, r.rc) == (1, 0) and "placed by x-queue-leader-locator" in w.err


# ---------------------------------------------------------------- formats, columns, sorting


def test_every_output_format_columns_and_sorting(pair):
    p = pair
    for name in ("q-b", "q-a", "q-c"):
        p.same(*V, "declare", "queue", f"name={name}", 'arguments={"x-max-length": 3}')
    p.same(*V, "declare", "exchange", "name=x", "type=headers")
    p.same(*V, "declare", "binding", "source=x", "destination=q-a", 'arguments={"x-match": "any", "h": 1}')
    for fmt in ("table", "tsv", "long", "kvp", "bash", "pretty_json", "raw_json"):
        p.same("-f", fmt, *V, "list", "queues", "name", "durable", "arguments.x-max-length", "messages", wait=True)
        p.same("-f", fmt, *V, "list", "exchanges", "name", "type", "durable", "auto_delete", "internal", "arguments")
        p.same("-f", fmt, "list", "vhosts", "name", "tracing")
        if "json" not in fmt:  # the default columns (JSON formats have every field: their keys are compared below)
            p.same("-f", fmt, *V, "list", "exchanges")
            p.same("-f", fmt, "show", "overview", mask=("rabbitmq_version",), wait=True)
    p.keys("show", "overview", absent=ABSENT["overview"])
    for fmt in ("table", "tsv", "long", "kvp"):
        # (the count of exchanges is left out: RabbitMQ has an amq.rabbitmq.trace in each vhost)
        p.same("-f", fmt, "show", "overview", "rabbitmq_version", "cluster_name", "object_totals.queues",
               "object_totals.consumers", "queue_totals.messages", mask=("rabbitmq_version",), wait=True)  # fmt: skip
        # a binding with arguments is named by a hash of them, each broker's own
        p.same("-f", fmt, "-d", "2", *V, "list", "bindings", mask=("properties_key",))
        p.same("-f", fmt, *V, "-S", "name", "-R", "list", "queues", "name")
        p.same("-f", fmt, *V, "--sort", "name", "list", "exchanges", "name", "type", "durable", "internal")
    p.same("-q", "-f", "tsv", "--vhost", "adm", "list", "queues", "name")  # -q: no header line
    p.same("-q", *V, "declare", "queue", "name=q-d")  # -q: no "queue declared"
    p.same("-f", "tsv", "list", "nodes", "name", "type", "running", mask=("name",))


# ---------------------------------------------------------------- publish, get, purge


def test_publish_get_and_purge(pair):
    p = pair
    p.same(*V, "declare", "queue", "name=q")
    p.same(*V, "declare", "queue", "name=qq", "queue_type=quorum")
    p.same(*V, "declare", "exchange", "name=x", "type=topic")
    p.same(*V, "declare", "binding", "source=x", "destination=q", "routing_key=a.*")
    p.same(*V, "publish", "exchange=x", "routing_key=a.b", "payload=hello")
    p.same(*V, "publish", "routing_key=q", "payload=second",
           'properties={"headers": {"h": 1}, "content_type": "text/plain", "delivery_mode": 2, "priority": 1, '
           '"correlation_id": "c-1", "message_id": "m-1", "type": "kind", "expiration": "60000"}')  # fmt: skip
    p.same(*V, "publish", "routing_key=qq", stdin="from stdin \u00e9")  # no payload=: read from stdin, as base64
    p.same(*V, "publish", "routing_key=qq", "payload=/w==", "payload_encoding=base64")  # not UTF-8
    p.same(*V, "publish", "exchange=x", "routing_key=zz", "payload=lost")  # published but not routed
    p.same(*V, "list", "queues", "name", "messages", "messages_ready", wait=True)

    # get: the default ackmode leaves the message, redelivered the next time
    p.same(*V, "get", "queue=q")
    p.same(*V, "-f", "raw_json", "get", "queue=q", "count=5", "ackmode=ack_requeue_true")
    p.same(*V, "-f", "pretty_json", "get", "queue=qq", "count=2", "ackmode=reject_requeue_true", "encoding=base64")
    # (a quorum queue's message in a table: 3.10's x-delivery-count header makes its properties an
    # object, not shown; RabbitMQ 4, as Warren, has none, and shows the empty list as an empty column)
    p.same(*V, "-f", "long", "get", "queue=qq", "count=2", "ackmode=ack_requeue_true", drop=("properties",))
    p.same(*V, "get", "queue=qq", "payload_file={dir}/payload.bin", drop=("properties",))
    assert (p.w.workdir / "payload.bin").read_bytes() == (p.r.workdir / "payload.bin").read_bytes()
    assert (p.w.workdir / "payload.bin").read_bytes() == "from stdin \u00e9".encode()
    p.same(*V, "get", "queue=qq", "count=2", "payload_file={dir}/p2.bin")  # refused by rabbitmqadmin itself
    # 3.10 fails with a 500 (a traceback from rabbitmqadmin); RabbitMQ 4, as Warren, refuses it
    w, r = p.both(*V, "get", "queue=q", "ackmode=nonsense")
    assert (w.rc, r.rc) == (1, 1) and "500 Internal Server Error" in r.err
    assert w.err.startswith("*** Invalid ackmode value: nonsense. Valid values are: ack_requeue_true,")
    p.same(*V, "get", "queue=q", "ackmode=ack_requeue_false")  # takes the first
    p.same(*V, "get", "queue=q", "ackmode=reject_requeue_false")  # drops the second
    p.same(*V, "get", "queue=q")  # nothing left: no items
    p.same(*V, "list", "queues", "name", "messages", wait=True)
    p.same(*V, "purge", "queue", "name=qq")
    p.same(*V, "list", "queues", "name", "messages", wait=True)
    p.same(*V, "get", "queue=qq", "count=3")


# ---------------------------------------------------------------- connections, consumers, close


def _connect(port: int, address: str) -> BlockingConnection:
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{port}", timeout=10, virtual_host="vhost:adm")
    conn.create_receiver(address, credit=1)
    return conn


def test_connections_consumers_and_close_connection(pair, rabbit, node):
    p = pair
    p.same(*V, "declare", "queue", "name=q")
    conns = [_connect(node.broker.amqp_port, "/queues/q"),  # RabbitMQ 4's address, as Warren
             _connect(rabbit.amqp_port, "/amq/queue/q")]  # 3.10's plugin's address of a queue  # fmt: skip
    try:
        # a 3.10 AMQP 1.0 client is a direct connection: no channel count; RabbitMQ 4 counts its sessions
        p.same("list", "connections", drop=("channels",), wait=True)
        p.same("-f", "tsv", "list", "connections", "name", "user", "vhost", "ssl", "peer_host", "host")
        p.keys("list", "connections", absent=ABSENT["connections"])
        # the consumer's tag, credit and channel are each broker's: 3.10 names a channel of its
        # AMQP 0-9-1 direct connection per session, RabbitMQ 4 as Warren the session
        p.same(*V, "list", "consumers", "queue.name", "ack_required", "active", "exclusive", wait=True)
        p.keys(*V, "list", "consumers", absent=ABSENT["consumers"])
        # channels are AMQP 0-9-1's: 3.10 shows the plugin's own for each AMQP 1.0 session, Warren has none
        w, r = p.both("-f", "raw_json", "list", "channels")
        assert (w.rc, r.rc, json.loads(w.out), len(json.loads(r.out))) == (0, 0, [], 1)
        # a connection's name is each side's own (the client's and the server's ports)
        real = {label: [c["name"] for c in side.json(p.admin, "list", "connections")]
                for label, side in (("w", p.w), ("r", p.r))}  # fmt: skip
        cw = p.w.run(p.admin, ["close", "connection", f"name={real['w'][0]}"])
        cr = p.r.run(p.admin, ["close", "connection", f"name={real['r'][0]}"])
        assert (cw.rc, cw.out, cw.err) == (cr.rc, cr.out, cr.err) == (0, "connection closed\n", "")
        p.same("list", "connections", wait=True)
    finally:
        for c in conns:
            try:
                c.close()
            except Exception:
                pass  # closed by the broker


# ---------------------------------------------------------------- export, import


def _definitions(side: Side, name: str) -> dict:
    return json.loads((side.workdir / name).read_text())


def test_export_and_import(pair):
    p = pair
    p.same(*V, "declare", "queue", "name=q", 'arguments={"x-max-length": 9}')
    p.same(*V, "declare", "exchange", "name=x", "type=fanout")
    p.same(*V, "declare", "binding", "source=x", "destination=q")
    p.same(*V, "declare", "policy", "name=pol", "pattern=^q$", 'definition={"max-length": 4}')
    p.same("export", "{dir}/all.json")
    p.same(*V, "export", "{dir}/adm.json")
    whole_w, whole_r = _definitions(p.w, "all.json"), _definitions(p.r, "all.json")
    assert set(whole_w) == set(whole_r), set(whole_w) ^ set(whole_r)
    adm_w, adm_r = _definitions(p.w, "adm.json"), _definitions(p.r, "adm.json")
    # RabbitMQ 4 names the product and version in a vhost's export too; 3.10 in the whole export only
    assert set(adm_w) - {"rabbitmq_version", "product_name", "product_version"} == set(adm_r)
    # RabbitMQ 4, as Warren, writes each queue's type; 3.10 did not
    assert [q.pop("type") for q in adm_w["queues"]] == ["classic"]
    # RabbitMQ 4, as Warren, leaves the vhost out of the policies of a vhost's export, as of the rest
    assert [q.pop("vhost") for q in adm_r["policies"]] == ["adm"]
    for key in ("queues", "exchanges", "bindings", "policies"):
        assert adm_w[key] == adm_r[key], key
    # a definitions file, the same for both, imported whole and into one vhost
    defs = {"vhosts": [{"name": "adm-imported"}], "users": [],
            "permissions": [{"user": "guest", "vhost": "adm-imported", "configure": ".*", "write": ".*", "read": ".*"}],
            "queues": [{"name": "iq", "vhost": "adm-imported", "durable": True, "auto_delete": False,
                        "arguments": {"x-queue-type": "quorum"}}],
            "exchanges": [{"name": "ix", "vhost": "adm-imported", "type": "topic", "durable": True,
                           "auto_delete": False, "internal": False, "arguments": {}}],
            "bindings": [{"source": "ix", "vhost": "adm-imported", "destination": "iq", "destination_type": "queue",
                          "routing_key": "k.#", "arguments": {}}]}  # fmt: skip
    for side in (p.w, p.r):
        (side.workdir / "in.json").write_text(json.dumps(defs))
        (side.workdir / "in-vhost.json").write_text(json.dumps({"queues": [
            {"name": "vq", "durable": True, "auto_delete": False, "arguments": {}}]}))  # fmt: skip
    p.same("import", "{dir}/in.json")
    p.same("-V", "adm-imported", "list", "queues", "name", wait=True)
    p.same("-V", "adm-imported", "list", "bindings")
    p.same(*V, "import", "{dir}/in-vhost.json")
    p.same(*V, "list", "queues", "name", "durable", wait=True)
    p.same("import", "{dir}/missing.json")  # rabbitmqadmin's own error: no such file


# ---------------------------------------------------------------- help and the local commands


def test_help_version_and_completion(pair):
    p = pair
    for args in (("help",), ("help", "subcommands"), ("help", "config"), ("help", "nonsense"), ("--version",),
                 ("--bash-completion",), ()):  # fmt: skip
        w, r = (side.run(p.admin, list(args), plain=False) for side in (p.w, p.r))
        assert (w.rc, w.out, w.err) == (r.rc, r.out, r.err), args
    w, _ = p.both("help", "subcommands")
    for verb in ("list", "show", "declare", "delete", "close", "purge", "export", "import", "publish", "get"):
        assert f"  {verb} " in w.out or f" {verb} " in w.out, verb
