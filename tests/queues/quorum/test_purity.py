"""The quorum machine is pure (STYLE.md, rule 4): its modules import no I/O,
no clock, no randomness, and nothing of the replica that runs it."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "queues" / "quorum"
MACHINE = ("commands", "message_format", "effects", "ready", "live", "state", "machine", "dispatch", "dedup",
           "queries", "snapshot", "priority", "timeouts")
REPLICA = {"queue", "bodies", "proposals", "publishing", "links", "credit_lease", "host", "publish_hold",
           "flow_records", "expiry", "ticks"}
FORBIDDEN = {"asyncio", "socket", "grpc", "threading", "selectors", "time", "random", "os", "logging", "node",
             "storage", "pysyncobj"}  # fmt: skip


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(top-level modules imported, sibling modules imported relatively)."""
    absolute, relative = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            absolute |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                absolute.add(node.module.split(".")[0])
                if node.module.startswith("queues.quorum."):
                    relative.add(node.module.split(".")[2])
            elif node.level == 1:
                relative |= {node.module} if node.module else {alias.name for alias in node.names}
    return absolute, relative


def test_the_machine_modules_import_no_io_and_nothing_of_the_replica():
    for name in MACHINE:
        absolute, relative = imports(PACKAGE / f"{name}.py")
        assert not absolute & FORBIDDEN, (name, sorted(absolute & FORBIDDEN))
        assert not relative & REPLICA, (name, sorted(relative & REPLICA))


def test_the_package_lists_every_module():
    assert {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"} == set(MACHINE) | REPLICA
