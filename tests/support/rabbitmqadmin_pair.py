"""RabbitMQ's rabbitmqadmin run against two brokers side by side (Warren and a
private RabbitMQ), with its output parsed back into rows, whatever the -f
format, so that the two answers can be compared cell by cell after the
differences both sides are entitled to (node names, ports, versions) are
written the same way."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PEER = re.compile(r"127\.0\.0\.1:\d+ -> 127\.0\.0\.1:\d+")  # an AMQP connection's name: ports differ
SEPARATOR = "-" * 80  # between two items of -f long
KVP = re.compile(r'(?:^| )([A-Za-z_][\w.\-]*)="')


@dataclass
class Side:
    """One broker as rabbitmqadmin sees it."""

    label: str  # "warren" or "rabbit"
    http_port: int
    node_name: str
    version: str
    workdir: Path  # files this side's export/import/get payload_file use
    extra: dict[str, str] = field(default_factory=dict)  # more text to write the same way on both: value -> mark
    values: dict[str, str] = field(default_factory=dict)  # "{mark}" in a command's arguments -> this side's value

    def run(self, admin: str, args: list[str], stdin: str | None = None, plain: bool = True) -> Answer:
        argv = []
        for a in args:
            for mark, value in {"{dir}": str(self.workdir), **self.values}.items():
                a = a.replace(mark, value)
            argv.append(a)
        cmd = [admin, "-H", "127.0.0.1", "-P", str(self.http_port), "-u", "guest", "-p", "guest", *argv]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, input=stdin if stdin is not None else "")
        if not plain:
            return Answer(r.returncode, r.stdout, r.stderr)
        return Answer(r.returncode, self.plain(r.stdout), self.plain(r.stderr))

    def json(self, admin: str, *args: str) -> Any:
        """The raw JSON a listing prints here, unchanged."""
        cmd = [admin, "-H", "127.0.0.1", "-P", str(self.http_port), "-f", "raw_json", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{self.label}: {' '.join(args)}: {r.stderr}"
        return json.loads(r.stdout)

    def plain(self, text: str) -> str:
        """The text with what names this broker, rather than what it did, written as marks."""
        text = text.replace(str(self.workdir), "{dir}")
        for value, mark in self.extra.items():
            text = text.replace(value, mark)
        text = text.replace(self.node_name, "{node}").replace(self.version, "{version}")
        return PEER.sub("{client} -> {server}", text)


@dataclass
class Answer:
    rc: int
    out: str
    err: str


def format_of(args: list[str]) -> str:
    for i, a in enumerate(args):
        if a in ("-f", "--format") and i + 1 < len(args):
            return args[i + 1]
    return "table"


def rows(fmt: str, text: str) -> tuple[list[str], list[list[str]]]:
    """(columns, rows) of a listing printed in `fmt`; the status lines
    rabbitmqadmin prints instead of a listing come back as one "message" column."""
    lines = [line for line in text.splitlines()]
    if text.strip() in ("", "No items"):
        return [], []
    if fmt == "table":
        cells = [[c.strip() for c in line.strip()[1:-1].split("|")] for line in lines if line.startswith("|")]
        if not cells:
            return ["message"], [[line] for line in lines if line]
        return cells[0], cells[1:]
    if fmt == "tsv":
        split = [line.split("\t") for line in lines if line]
        return split[0], split[1:]
    if fmt == "long":
        columns: list[str] = []
        table: list[list[str]] = []
        for block in text.split(SEPARATOR):
            # "name: value", right-aligned names; an empty value leaves "name: " (no strip of the right)
            pairs = [(line.lstrip() + " ").partition(": ") for line in block.splitlines() if line.strip()]
            if pairs:
                columns = [k for k, _, _ in pairs]
                table.append([v[:-1] for _, _, v in pairs])
        return columns, table
    if fmt == "kvp":
        columns, table = [], []
        for line in lines:
            marks = list(KVP.finditer(line))
            columns = [m.group(1) for m in marks]
            ends = [m.start() for m in marks[1:]] + [len(line)]
            table.append([line[m.end() : end - 1] for m, end in zip(marks, ends, strict=True)])
        return columns, table
    if fmt == "bash":
        return ["name"], [[n] for n in text.split()]
    raise ValueError(f"not a listing format: {fmt}")


def json_of(text: str) -> Any:
    return json.loads(text) if text.strip() else None


def keys_of(items: Any, depth: int = 2) -> set[str]:
    """Every key of a JSON reply's items, dotted to `depth` levels (b.c for {"b": {"c": 1}})."""
    out: set[str] = set()

    def walk(prefix: str, level: int, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                out.add(prefix + k)
                if level > 1:
                    walk(prefix + k + ".", level - 1, v)

    for item in items if isinstance(items, list) else [items]:
        walk("", depth, item)
    return out
