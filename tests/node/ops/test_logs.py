"""The node's logs (node/ops/logs.py, node/ops/log_tail.py): RabbitMQ's log.* keys
and Warren's names in the config file, JSON lines, rotation by size and count,
per-category levels, and `warren ctl log_tail` over the HTTP API; the outputs
are installed on this process's root logger, or a `warren server` is started
with them."""

from __future__ import annotations

import datetime
import json
import logging

import psutil
import pytest
from mgmt_client import Api, NodeProcess
from proton import ConnectionException
from proton.utils import BlockingConnection

from node import config
from node.ops import log_tail, logs


def load_toml(tmp_path, text: str, env: dict | None = None) -> config.Config:
    path = tmp_path / "warren.toml"
    path.write_text(text)
    return config.load(str(path), env=env or {})


@pytest.fixture
def installed():
    """install(), taken off the root logger again after the test."""
    done: list[logs.NodeLogs] = []

    def install(cfg: config.Config) -> logs.NodeLogs:
        done.append(logs.install(cfg))
        return done[-1]

    yield install
    for node_logs in done:
        node_logs.close()


# ---------------------------------------------------------------- settings


# an operator's rabbitmq.conf log lines, quoted as TOML keys
RABBITMQ_CONF = """
"log.file" = "warren.log"
"log.dir" = "/var/log/warren"
"log.file.level" = "<=notice"
"log.file.formatter" = "json"
"log.file.rotation.size" = 10485760
"log.file.rotation.count" = 3
"log.console" = true
"log.console.level" = "warning"
"log.console.formatter" = "plaintext"
"log.console.stdio" = "stdout"
"log.default.level" = "debug"
"log.connection.level" = "debug"
"log.queue.level" = "error"
log_categories = {ra = "warning"}
"""


def test_rabbitmqs_dotted_keys_set_warrens_settings(tmp_path):
    cfg = load_toml(tmp_path, RABBITMQ_CONF)
    assert (cfg.log_file, cfg.log_dir, cfg.log_file_level, cfg.log_file_format) == ("warren.log", "/var/log/warren",
                                                                                     "<=notice", "json")  # fmt: skip
    assert (cfg.log_file_rotation_size, cfg.log_file_rotation_count) == (10485760, 3)
    assert (cfg.log_console, cfg.log_console_level, cfg.log_console_format, cfg.log_console_stdio) == (
        True, "warning", "plain", "stdout")  # fmt: skip
    assert cfg.log_level == "debug"
    assert cfg.log_categories == {"ra": "warning", "connection": "debug", "queue": "error"}
    assert logs.file_path(cfg) == "/var/log/warren/warren.log"


def test_log_file_false_turns_the_file_off_as_in_rabbitmq(tmp_path, installed):
    cfg = load_toml(tmp_path, '"log.file" = false\n"log.console.format" = "json"\n')
    assert cfg.log_file == "" and cfg.log_console_format == "json"
    assert installed(cfg).source == "<console>"  # log_tail reads the console's lines
    assert config.load(None, env={"WARREN_LOG_FILE": "false"}).log_file == ""


@pytest.mark.parametrize(("toml", "env", "named"), [
    ('"log.file.rotation.date" = "$D0"\n', {}, "'log.file.rotation.date'"),
    ('"log.mirroring.level" = "debug"\n', {}, "classic mirrored"),
    ('"log.console.use_colors" = true\n', {}, "'log.console.use_colors'"),
    ('"log.console.formatter" = "xml"\n', {}, "log_console_format"),
    ('"log.file.level" = "loud"\n', {}, "log_file_level"),
    ('"log.console.level" = "<warning"\n', {}, "log_console_level"),  # expressions are log.file.level's only
    ('"log.connection.level" = "verbose"\n', {}, "log_categories.connection"),
    ('log_categories = {shovel = "debug"}\n', {}, "'shovel'"),
    ('"log.file.rotation.size" = -1\n', {}, "log_file_rotation_size"),
    ('"log.file" = true\n', {}, "log_file"),
    ('"log.console.stdio" = "tty"\n', {}, "log_console_stdio"),
    ('log.file = "x"\n', {}, "quote RabbitMQ's log keys"),
    ("", {"WARREN_LOG_LEVEL": "verbose"}, "log_level"),
])  # fmt: skip
def test_a_bad_log_key_or_value_is_refused_by_name(tmp_path, toml, env, named):
    with pytest.raises(ValueError) as e:
        load_toml(tmp_path, toml, env)
    assert named in str(e.value)


# ---------------------------------------------------------------- outputs


def file_config(tmp_path, **settings) -> config.Config:
    return config.Config(log_console=False, log_file=str(tmp_path / "warren.log"), **settings)


def test_json_lines_carry_rabbitmqs_fields(tmp_path, installed):
    installed(file_config(tmp_path, log_file_format="json"))
    logging.getLogger("warren.connection").info("accepting %s", "c1")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("warren.node").exception("it broke")
    logging.getLogger("aiohttp.server").warning("third party")
    first, second, third = [json.loads(line) for line in (tmp_path / "warren.log").read_text().splitlines()]
    assert first["msg"] == "accepting c1" and first["level"] == "info" and first["domain"] == "rabbitmq.connection"
    assert first["logger"] == "warren.connection" and isinstance(first["pid"], int)
    stamp = datetime.datetime.fromisoformat(first["time"])  # RFC 3339, a space before the time
    assert first["time"][10] == " " and stamp.tzinfo is not None
    assert abs((datetime.datetime.now(datetime.UTC) - stamp).total_seconds()) < 60
    assert second["level"] == "error" and second["domain"] == "rabbitmq" and "RuntimeError: boom" in second["msg"]
    assert "domain" not in third and third["logger"] == "aiohttp.server"


def test_the_file_rotates_at_its_size_keeping_the_count(tmp_path, installed):
    installed(file_config(tmp_path, log_file_rotation_size=1000, log_file_rotation_count=2))
    log = logging.getLogger("warren.node")
    for i in range(100):
        log.info("record %03d %s", i, "x" * 40)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["warren.log", "warren.log.1", "warren.log.2"]
    assert all((tmp_path / n).stat().st_size <= 1000 for n in names)
    assert "record 099" in (tmp_path / "warren.log").read_text()
    assert "record 000" not in "".join((tmp_path / n).read_text() for n in names)  # rotated out


def test_processes_sharing_the_file_write_on_in_the_current_one_after_another_rotated_it(tmp_path):
    """Two handlers on one path, as a node's workers have: each rotation by one is followed by
    the other, so every record is in the current file or a backup, in order, none lost."""
    path = str(tmp_path / "warren.log")
    handlers = [logs._RotatingFile(path, maxBytes=1000, backupCount=5, encoding="utf-8") for _ in range(2)]
    try:
        for i in range(60):
            record = logging.LogRecord("warren.node", logging.INFO, __file__, 1, f"record {i:03d} " + "x" * 30,
                                       None, None)  # fmt: skip
            handlers[i % 2].emit(record)
    finally:
        for h in handlers:
            h.close()
    files = [tmp_path / "warren.log"] + [tmp_path / f"warren.log.{n}" for n in range(1, 6)]
    lines = [line for f in reversed(files) if f.exists() for line in f.read_text().splitlines()]
    assert lines == [f"record {i:03d} " + "x" * 30 for i in range(60)]
    assert all(f.stat().st_size <= 1000 for f in files if f.exists())


def test_a_rotation_count_of_0_starts_the_file_over(tmp_path, installed):
    installed(file_config(tmp_path, log_file_rotation_size=1000, log_file_rotation_count=0))
    for i in range(100):
        logging.getLogger("warren.node").info("record %03d %s", i, "x" * 40)
    assert [p.name for p in tmp_path.iterdir()] == ["warren.log"]
    text = (tmp_path / "warren.log").read_text()
    assert len(text) <= 1000 and "record 099" in text and "record 000" not in text


def test_a_categorys_level_wins_over_the_outputs(tmp_path, installed):
    installed(file_config(tmp_path, log_file_level="warning", log_categories={"connection": "debug", "queue": "error"}))
    logging.getLogger("warren.connection").debug("connection debug")  # its category's level: in
    logging.getLogger("warren.node").info("node info")  # the file's level: out
    logging.getLogger("warren.node").warning("node warning")
    logging.getLogger("queues.classic.recovery").warning("queue warning")  # a child of a queue logger: out
    logging.getLogger("warren.quorum").error("quorum error")
    logging.getLogger("warren.links").info("channel info")  # channel not configured: the file's level
    text = (tmp_path / "warren.log").read_text()
    assert [m for m in ("connection debug", "node info", "node warning", "queue warning", "quorum error",
                        "channel info") if m in text] == ["connection debug", "node warning", "quorum error"]  # fmt: skip


def test_rabbitmqs_level_expressions_on_the_file(tmp_path, installed):
    installed(file_config(tmp_path, log_file_level="<warning"))
    for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR):
        logging.getLogger("warren.node").log(level, "at %s", logging.getLevelName(level))
    assert [line.split()[1] for line in (tmp_path / "warren.log").read_text().splitlines()] == [
        "level=debug", "level=info"]  # fmt: skip


def test_with_every_output_off_nothing_reaches_pythons_last_resort(tmp_path, installed, capsys):
    node_logs = installed(config.Config(log_console=False, log_file=""))
    logging.getLogger("warren.node").error("nowhere")
    assert node_logs.source is None and "nowhere" not in capsys.readouterr().err


# ---------------------------------------------------------------- the tail


def test_tail_reads_the_last_lines_from_the_end(tmp_path):
    path = tmp_path / "big.log"
    path.write_text("".join(f"line {i}\n" for i in range(200_000)))  # 2.3 MB
    assert log_tail.tail_file(str(path), 3) == ["line 199997", "line 199998", "line 199999"]
    assert log_tail.tail_file(str(path), 1000)[0] == "line 199000"
    # past the byte budget: fewer lines, each whole
    assert log_tail.tail_file(str(path), 1000, max_bytes=100) == [f"line {i}" for i in range(199992, 200000)]
    path.write_text("one\ntwo\nthree (being written)")
    assert log_tail.tail_file(str(path), 5) == ["one", "two", "three (being written)"]
    assert log_tail.tail_file(str(tmp_path / "none.log"), 5) == []
    path.write_text("")
    assert log_tail.tail_file(str(path), 5) == []


def test_the_console_ring_keeps_the_last_lines(installed):
    node_logs = installed(config.Config(log_console=True, log_file=""))
    for i in range(log_tail.MAX_LINES + 10):
        logging.getLogger("warren.node").info("ring %d", i)
    tail = node_logs.tail(log_tail.MAX_LINES)
    assert len(tail) == log_tail.MAX_LINES and tail[-1].endswith("msg='ring 1009'") and "ring 10'" in tail[0]


# ---------------------------------------------------------------- a node


@pytest.fixture(scope="module")
def json_node(tmp_path_factory):
    """A node logging JSON lines to its console and a file, connections at debug, the rest from warning."""
    d = tmp_path_factory.mktemp("json-node")
    (d / "warren.toml").write_text(f"""
"log.console.formatter" = "json"
"log.console.level" = "warning"
"log.file" = "{d / "warren.log"}"
"log.file.formatter" = "json"
"log.file.level" = "warning"
"log.connection.level" = "info"
""")
    p = NodeProcess(d / "data", "--config", str(d / "warren.toml"))
    p.log = d / "warren.log"
    yield p
    p.stop()


def test_a_node_with_json_console_writes_json_lines_and_log_tail_reads_its_file(json_node):
    with pytest.raises(ConnectionException):  # a failed login: an info record of the connection category
        BlockingConnection(json_node.url.replace("guest:guest", "guest:wrong"), timeout=10)
    tail = json_node.ctl("--json", "log_tail", "--number", "5")
    assert tail.returncode == 0, tail.stderr
    lines = json.loads(tail.stdout)
    assert lines == json_node.log.read_text().splitlines()[-5:]
    failed = [json.loads(line) for line in lines if "authentication failed" in line]
    assert failed and failed[0]["domain"] == "rabbitmq.connection" and failed[0]["level"] == "info"
    node_pids = {json_node.proc.pid, *(c.pid for c in psutil.Process(json_node.proc.pid).children())}  # --workers
    json_node.stop()
    console = json_node.proc.stderr.read().splitlines()
    records = [json.loads(line) for line in console]  # every line, a supervisor's too
    assert records and all({"time", "level", "msg", "pid", "logger"} <= r.keys() for r in records)
    assert {r["pid"] for r in records} <= node_pids
    # connection records from info, the others from warning: the node's info lines are not there
    assert any("authentication failed" in r["msg"] for r in records)
    assert all(r["level"] != "info" or r["domain"] == "rabbitmq.connection" for r in records)


def test_log_tail_over_warren_ctl(node_process):
    api = Api(node_process.http_port)
    assert api.as_user("nobody", "x").get("/api/overview").status == 401  # logs an info line
    out = node_process.ctl("log_tail", "-N", "3")
    assert out.returncode == 0, out.stderr
    banner, *lines = out.stdout.splitlines()
    assert banner == "Last 3 log lines on node warren@localhost ..." and len(lines) == 3
    assert "login failed for user 'nobody'" in "\n".join(lines)
    reply = api.get("/api/nodes/warren@localhost/log-tail?lines=2")
    assert reply.status == 200 and reply.body["source"] == "<console>" and len(reply.body["lines"]) == 2
    too_many = node_process.ctl("log_tail", "--number", str(log_tail.MAX_LINES + 1))
    assert too_many.returncode == 65 and f"lines must be 1 to {log_tail.MAX_LINES}" in too_many.stderr
    assert api.get("/api/nodes/warren@localhost/log-tail?lines=x").status == 400
    assert api.get("/api/nodes/other@host/log-tail").status == 404
    # administrator or monitoring only
    api.put("/api/users/mgmt-only", {"password": "p", "tags": "management"})
    api.put("/api/users/monitor", {"password": "p", "tags": "monitoring"})
    assert api.as_user("mgmt-only", "p").get("/api/nodes/warren@localhost/log-tail").status == 401
    assert api.as_user("monitor", "p").get("/api/nodes/warren@localhost/log-tail").status == 200
