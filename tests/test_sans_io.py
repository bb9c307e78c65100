"""amqp/ is the sans-I/O protocol core: it must not import anything
that does I/O or owns an event loop (STYLE.md, rule 1)."""

import ast
from pathlib import Path

FORBIDDEN = {"asyncio", "socket", "grpc", "uvloop", "selectors", "ssl", "threading"}
CORE = Path(__file__).resolve().parents[1] / "amqp"


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_protocol_core_imports_no_io():
    files = sorted(CORE.glob("*.py"))
    assert len(files) > 5
    offenders = {f.name: sorted(imported_modules(f) & FORBIDDEN) for f in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_protocol_core_imports_nothing_outside_itself_but_the_stdlib():
    for f in CORE.glob("*.py"):
        assert not imported_modules(f) & {"node", "queues", "raft", "metadata", "routing", "storage", "audit"}, f.name
