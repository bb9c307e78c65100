"""The node's logs as RabbitMQ's operators configure them: a console output and
a file output, each with its level and format (plain key=value lines or one
JSON object per line), the file rotated by size keeping a count of old files,
and per-category levels (RabbitMQ's log.connection.level, ...) over Warren's
logger names. `install` puts the outputs on the root logger; the NodeLogs it
returns answers `warren ctl log_tail` (node/ops/log_tail.py reads the lines).

Settings come from node/config.py under Warren's names (`log_file`,
`log_console_format`, `log_categories`, ...) or RabbitMQ's dotted keys quoted
in the TOML file (`"log.file.level" = "debug"`); `check_settings` refuses an
unknown key or a bad value by its name before the node starts.

How a record is let through, as RabbitMQ's rabbit_prelaunch_logging does: a
record of a configured category passes every output when at or above that
category's level (the category wins over the output's level); any other
record passes an output at or above the output's level, else the default
level (`log_level`, RabbitMQ's log.default.level).
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from logging.handlers import RotatingFileHandler
from typing import Any, Protocol

from node.ops.log_tail import RecentLines, tail_file


class Config(Protocol):
    """The settings read here: node/config.py's Config has them."""

    log_level: str
    log_console: bool
    log_console_level: str
    log_console_format: str
    log_console_stdio: str
    log_file: str
    log_dir: str
    log_file_level: str
    log_file_format: str
    log_file_rotation_size: int
    log_file_rotation_count: int
    log_categories: dict


# RabbitMQ's levels (Erlang logger's, syslog's) on Python's scale; "none" is above them all
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": 25, "warning": logging.WARNING,
          "error": logging.ERROR, "critical": logging.CRITICAL, "alert": 60, "emergency": 70, "none": 100}  # fmt: skip
_NAMES = {number: name for name, number in LEVELS.items()}

# RabbitMQ's categories that mean something here, and the loggers of Warren they cover (with
# their children: "queues" is queues/'s modules). RabbitMQ's domain of a record is rabbitmq.<category>.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "connection": ("warren.connection",),  # AMQP connections: open, close, errors
    "channel": ("warren.links",),  # AMQP 1.0 sessions and links, Warren's channels
    "queue": ("warren.queues", "warren.quorum", "warren.stream", "warren.volatile", "warren.remote", "queues"),
    "user": ("warren.login", "warren.permissions", "warren.oauth"),  # logins and access, as rabbit_access_control
    "ra": ("raft", "warren.raft"),  # the Raft library (RabbitMQ's is Ra)
    "upgrade": ("warren.upgrade",),  # feature flags refusing a downgrade
}
# RabbitMQ's other categories: refused by name, they have nothing to act on here
ABSENT_CATEGORIES = {"mirroring": "Warren has no classic mirrored queues",
                     "federation": "Warren has no federation plugin"}  # fmt: skip
FORMATS = {"plain": "plain", "plaintext": "plain", "json": "json"}  # RabbitMQ says plaintext
STDIO = ("stderr", "stdout")
# RabbitMQ's level expressions, for log.file.level only: =debug, !=info, <=notice, <warning
_LEVEL_EXPRESSION = re.compile(r"(=|!=|<=|<)?([a-z]+)")

# RabbitMQ's dotted keys, as written quoted in the TOML file, and Warren's setting for each
RABBIT_KEYS = {
    "log.dir": "log_dir",
    "log.file": "log_file",
    "log.file.level": "log_file_level",
    "log.file.formatter": "log_file_format",
    "log.file.format": "log_file_format",  # a short spelling of the formatter key (not RabbitMQ's)
    "log.file.rotation.size": "log_file_rotation_size",
    "log.file.rotation.count": "log_file_rotation_count",
    "log.console": "log_console",
    "log.console.level": "log_console_level",
    "log.console.formatter": "log_console_format",
    "log.console.format": "log_console_format",  # likewise
    "log.console.stdio": "log_console_stdio",
    "log.default.level": "log_level",
}


def apply_rabbit_key(cfg: Config, key: str, value: Any, source: str) -> None:
    """Sets the setting RabbitMQ's `key` (log.*) names; an unknown one is a ValueError naming it."""
    field = RABBIT_KEYS.get(key)
    if field is not None:
        setattr(cfg, field, value)
        return
    m = re.fullmatch(r"log\.([a-z_]+)\.level", key)
    category = m.group(1) if m else ""
    if category in CATEGORIES and isinstance(cfg.log_categories, dict):
        cfg.log_categories = {**cfg.log_categories, category: value}
        return
    if category in CATEGORIES:
        raise ValueError(f"log_categories must be a table of category = level, got {cfg.log_categories!r}")
    why = ABSENT_CATEGORIES.get(category, "Warren does not implement it")
    raise ValueError(f"unsupported log setting {key!r} in {source}: {why}")


# ---------------------------------------------------------------- checking the settings


@dataclass(frozen=True)
class LevelSpec:
    """An output's or a category's level: `op` compares a record's level with `level`."""

    op: str  # ">=" (RabbitMQ's plain level name), "=", "!=", "<=", "<"
    level: int

    def admits(self, levelno: int) -> bool:
        op, level = self.op, self.level
        return {">=": levelno >= level, "=": levelno == level, "!=": levelno != level,
                "<=": levelno <= level, "<": levelno < level}[op]  # fmt: skip

    def lowest(self) -> int:
        """The lowest level it lets through (a logger below it need not make the record)."""
        return self.level if self.op in (">=", "=") else logging.DEBUG


def parse_level(name: str, value: Any, expressions: bool = False) -> LevelSpec:
    """`value` as a level of setting `name`; a ValueError naming both when it is none."""
    text = value.lower() if isinstance(value, str) else ""
    m = _LEVEL_EXPRESSION.fullmatch(text)
    if m and m.group(2) in LEVELS and (expressions or m.group(1) is None):
        return LevelSpec(m.group(1) or ">=", LEVELS[m.group(2)])
    allowed = ", ".join(LEVELS) + (" (or =, !=, <=, < before one)" if expressions else "")
    raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def check_settings(cfg: Config) -> None:
    """Refuses a bad log setting by its name, and puts the accepted ones in one form."""
    parse_level("log_level", cfg.log_level)
    parse_level("log_console_level", cfg.log_console_level or cfg.log_level)
    if cfg.log_file in (False, "false"):  # RabbitMQ's log.file = false: no file output
        cfg.log_file = ""
    if not isinstance(cfg.log_file, str):
        raise ValueError(f"log_file must be a file name or false, got {cfg.log_file!r}")
    if not isinstance(cfg.log_dir, str):
        raise ValueError(f"log_dir must be a directory name, got {cfg.log_dir!r}")
    parse_level("log_file_level", cfg.log_file_level or cfg.log_level, expressions=True)
    for name in ("log_console_format", "log_file_format"):
        value = getattr(cfg, name)
        if value not in FORMATS:
            raise ValueError(f"{name} must be plain (or plaintext) or json, got {value!r}")
        setattr(cfg, name, FORMATS[value])
    if cfg.log_console_stdio not in STDIO:
        raise ValueError(f"log_console_stdio must be stderr or stdout, got {cfg.log_console_stdio!r}")
    if not isinstance(cfg.log_console, bool):
        raise ValueError(f"log_console must be true or false, got {cfg.log_console!r}")
    for name in ("log_file_rotation_size", "log_file_rotation_count"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number, 0 or more, got {value!r}")
    if not isinstance(cfg.log_categories, dict):
        raise ValueError(f"log_categories must be a table of category = level, got {cfg.log_categories!r}")
    for category, level in cfg.log_categories.items():
        if category not in CATEGORIES:
            why = ABSENT_CATEGORIES.get(category, "known: " + ", ".join(CATEGORIES))
            raise ValueError(f"log_categories: unknown category {category!r} ({why})")
        parse_level(f"log_categories.{category}", level)


def file_path(cfg: Config) -> str:
    """The log file (a relative name is in log_dir, as RabbitMQ's log.dir), or "" when off."""
    if not cfg.log_file:
        return ""
    return os.path.join(cfg.log_dir, cfg.log_file) if cfg.log_dir else cfg.log_file


# ---------------------------------------------------------------- formats


def level_name(levelno: int) -> str:
    return _NAMES.get(levelno) or logging.getLevelName(levelno).lower()


@functools.lru_cache(maxsize=4096)
def category_of(logger: str) -> str | None:
    """The category a logger's records belong to: its own, or its nearest parent's."""
    name = logger
    while True:
        for category, loggers in CATEGORIES.items():
            if name in loggers:
                return category
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]


class PlainFormatter(logging.Formatter):
    """One structured line per record: ts=... level=... logger=... msg=..."""

    def format(self, record: logging.LogRecord) -> str:
        line = (
            f"ts={self.formatTime(record, '%Y-%m-%dT%H:%M:%S')}.{int(record.msecs):03d} "
            f"level={level_name(record.levelno)} logger={record.name} msg={record.getMessage()!r}"
        )
        if record.exc_info:
            line += " exc=" + repr(self.formatException(record.exc_info))
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line with RabbitMQ's fields (rabbit_logger_json_fmt): time (RFC 3339,
    a space before the time, microseconds, local offset), level, msg, pid (the OS process: the
    node is one), domain (rabbitmq.<category>, or rabbitmq for Warren's other records), and
    Warren's logger. A traceback is part of msg, so the object stays on one line."""

    def format(self, record: logging.LogRecord) -> str:
        time = datetime.datetime.fromtimestamp(record.created).astimezone()
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        doc: dict[str, Any] = {"time": time.isoformat(sep=" ", timespec="microseconds"),
                               "level": level_name(record.levelno), "msg": msg, "pid": record.process}  # fmt: skip
        category = category_of(record.name)
        if category is not None:
            doc["domain"] = "rabbitmq." + category
        elif record.name == "warren" or record.name.startswith("warren."):
            doc["domain"] = "rabbitmq"
        doc["logger"] = record.name
        return json.dumps(doc, ensure_ascii=False, default=str)


FORMATTERS: dict[str, Callable[[], logging.Formatter]] = {"plain": PlainFormatter, "json": JsonFormatter}


# ---------------------------------------------------------------- outputs


class _Levels(logging.Filter):
    """An output's filter: a configured category's level, else the output's level."""

    def __init__(self, categories: dict[str, LevelSpec], output: LevelSpec):
        super().__init__()
        self.categories, self.output = categories, output

    def filter(self, record: logging.LogRecord) -> bool:
        category = category_of(record.name)
        spec = self.categories.get(category) if category is not None else None
        return (spec or self.output).admits(record.levelno)


class _RotatingFile(RotatingFileHandler):
    """Python's rotation keeps no file at count 0 and then never rotates; RabbitMQ's
    (logger_std_h) starts the file over: so does this. The processes of a node of several
    workers (node/workers/) share the file: when another one rotated it, this one writes on
    in the file that has the name now (as WatchedFileHandler does), not in the one renamed."""

    def shouldRollover(self, record: logging.LogRecord) -> bool:
        if self.stream is not None and self._renamed():
            self.stream.close()
            self.stream = self._open()
        return super().shouldRollover(record)

    def _renamed(self) -> bool:
        try:
            named = os.stat(self.baseFilename)
        except FileNotFoundError:
            return True
        mine = os.fstat(self.stream.fileno())
        return (named.st_dev, named.st_ino) != (mine.st_dev, mine.st_ino)

    def doRollover(self) -> None:
        if self.backupCount > 0:
            super().doRollover()
            return
        if self.stream:
            self.stream.close()
        self.stream = open(self.baseFilename, "w", encoding=self.encoding)  # noqa: SIM115 (the handler owns it)


class NodeLogs:
    """The outputs `install` put on the root logger, what `warren ctl log_tail` reads
    (the file when there is one, else the console's recent lines), and `close` to take
    them off again."""

    def __init__(self, handlers: list[logging.Handler], path: str, recent: RecentLines | None,
                 loggers: list[logging.Logger], root_level: int):  # fmt: skip
        self.handlers, self.path, self.recent = handlers, path, recent
        self._loggers, self._root_level = loggers, root_level

    @property
    def source(self) -> str | None:
        """Where the tail comes from: the file, "<console>", or None (no output)."""
        return self.path or ("<console>" if self.recent is not None else None)

    def tail(self, lines: int) -> list[str]:
        """The last `lines` lines; reads the file, so call it off the event loop."""
        if self.path:
            return tail_file(self.path, lines)
        return self.recent.tail(lines) if self.recent is not None else []

    def close(self) -> None:
        root = logging.getLogger()
        for handler in self.handlers:
            root.removeHandler(handler)
            handler.close()
        for logger in self._loggers:
            logger.setLevel(logging.NOTSET)
        root.setLevel(self._root_level)


def install(cfg: Config) -> NodeLogs:
    """Puts cfg's outputs (checked by check_settings) on the root logger; an OSError when
    the log file cannot be opened."""
    categories = {c: parse_level(c, level) for c, level in cfg.log_categories.items()}
    outputs: list[tuple[logging.Handler, str, LevelSpec]] = []
    path = file_path(cfg)
    if path:
        handler: logging.Handler = _RotatingFile(path, maxBytes=cfg.log_file_rotation_size,
                                                 backupCount=cfg.log_file_rotation_count, encoding="utf-8")  # fmt: skip
        outputs.append((handler, cfg.log_file_format,
                        parse_level("log_file_level", cfg.log_file_level or cfg.log_level, expressions=True)))  # fmt: skip
    recent = None
    if cfg.log_console:
        level = parse_level("log_console_level", cfg.log_console_level or cfg.log_level)
        outputs.append((logging.StreamHandler(getattr(sys, cfg.log_console_stdio)), cfg.log_console_format, level))
        if not path:  # log_tail's lines: the console's, as it printed them
            recent = RecentLines()
            outputs.append((recent, cfg.log_console_format, level))
    root = logging.getLogger()
    previous = root.level
    handlers = []
    for handler, fmt, level in outputs:
        handler.setFormatter(FORMATTERS[fmt]())
        handler.addFilter(_Levels(categories, level))
        root.addHandler(handler)
        handlers.append(handler)
    if not handlers:  # every output off: keep Python's last-resort handler from printing warnings
        handlers.append(logging.NullHandler())
        root.addHandler(handlers[0])
    # Loggers make only the records some output may take: the root for the outputs' levels,
    # a configured category's loggers for that category's.
    root.setLevel(min((level.lowest() for _, _, level in outputs), default=LEVELS["none"]))
    loggers = []
    for category, spec in categories.items():
        for name in CATEGORIES[category]:
            logger = logging.getLogger(name)
            logger.setLevel(spec.lowest())
            loggers.append(logger)
    return NodeLogs(handlers, path, recent, loggers, previous)
