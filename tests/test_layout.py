"""The layout's two import rules, checked on every .py file of the repository:

- pysyncobj is imported only inside raft/ (and by raft/'s own tests, which
  run stock pysyncobj beside Warren's changes): everything else goes through
  raft/'s API (STYLE.md, "pysyncobj: our Raft dependency, and why we fence it");
- the libraries never import node/, the process that assembles them;

and its size rule: no module over 600 lines, no class of the product over 340;

and the rules of node/: no module is in an import cycle (the route and command
modules are listed by api.py and ctl.py, which they never import back; a
component takes ports instead of importing its users), and with the type-only
imports a cycle stays inside one component; no task is started and dropped (it
belongs to an owner, node/tasks.py); only node/broker.py and node/main.py name
`Broker`.

Imports are read with `ast`, so an import inside a function counts as much
as one at the top, and relative imports are resolved to the module they name;
for cycles, imports under `if TYPE_CHECKING:` do not count (they never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".venv", ".git", "__pycache__", "data", ".ruff_cache", ".pytest_cache", ".hypothesis"}

FENCED = "pysyncobj"
FENCE_INSIDE = ("raft/", "tests/raft/")

LIBRARIES = ("amqp", "routing", "storage", "raft", "queues", "metadata", "audit")
NODE = "node"

# Small modules with one job: no file over MAX_MODULE_LINES, and no class of
# the product (the libraries and node/) over MAX_CLASS_LINES.
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 340
GENERATED = ("_pb2.py", "_pb2_grpc.py")
def python_files() -> Iterator[Path]:
    stack = [ROOT]
    while stack:
        folder = stack.pop()
        for entry in sorted(folder.iterdir()):
            if entry.is_dir():
                if entry.name not in SKIP_DIRS:
                    stack.append(entry)
            elif entry.suffix == ".py":
                yield entry


def imported_modules(path: Path, *, runtime_only: bool = False) -> set[str]:
    """Every module `path` imports, as absolute dotted names (relative ones resolved);
    with `runtime_only`, not those imported under `if TYPE_CHECKING:`."""
    rel = path.relative_to(ROOT)
    package = list(rel.parent.parts)
    names: set[str] = set()
    for node in _nodes(ast.parse(path.read_text(), str(path)), runtime_only):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
        elif (
            isinstance(node, ast.Call)
            and _called(node) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def _nodes(tree: ast.AST, runtime_only: bool) -> Iterator[ast.AST]:
    """ast.walk, leaving out the bodies of `if TYPE_CHECKING:` when `runtime_only`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if runtime_only and isinstance(node, ast.If) and _names_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _names_type_checking(test: ast.expr) -> bool:
    return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def _called(node: ast.Call) -> str | None:
    return getattr(node.func, "attr", getattr(node.func, "id", None))


def imports(names: set[str], top: str) -> bool:
    return any(n == top or n.startswith(top + ".") for n in names)


def test_the_walk_sees_the_whole_repository():
    seen = {p.relative_to(ROOT).as_posix() for p in python_files()}
    assert "raft/group.py" in seen and "node/cluster/cluster.py" in seen and "tests/test_layout.py" in seen
    assert not any(p.startswith(".venv/") for p in seen)


def test_imports_are_found_inside_functions_and_relative_ones_resolved(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "queues").mkdir()
    sample = tmp_path / "queues" / "sample.py"
    sample.write_text(
        "import os\n"
        "def later():\n"
        "    from node.cluster import rpc\n"
        "    import pysyncobj.node\n"
        "from . import base\n"
        "from ..node import config\n"
    )
    names = imported_modules(sample)
    assert imports(names, "node") and imports(names, "pysyncobj") and "queues.base" in names
    assert "node.config" in names and not imports({"nodes", "pysyncobjx"}, "node")


def test_only_raft_imports_pysyncobj():
    offenders = {}
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(FENCE_INSIDE):
            continue
        found = sorted(n for n in imported_modules(path) if imports({n}, FENCED))
        if found:
            offenders[rel] = found
    assert offenders == {}, "go through raft/ (raft.group, raft.status) instead of pysyncobj"


def test_libraries_do_not_import_node():
    offenders = {}
    for path in python_files():
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in LIBRARIES:
            continue
        found = sorted(n for n in imported_modules(path) if imports({n}, NODE))
        if found:
            offenders[rel.as_posix()] = found
    assert offenders == {}, "libraries never import node/"


def test_no_module_and_no_class_is_too_big():
    too_big = []
    for path in python_files():
        if path.name.endswith(GENERATED):
            continue
        rel = path.relative_to(ROOT)
        text = path.read_text()
        if text.count("\n") > MAX_MODULE_LINES:
            too_big.append(f"{rel}: {text.count(chr(10))} lines")
        if rel.parts[0] not in (*LIBRARIES, NODE):
            continue
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                too_big.append(f"{rel}: class {node.name}, {node.end_lineno - node.lineno + 1} lines")
    assert too_big == [], "split by responsibility"


# -- node/: no import cycle, no task without an owner, no Broker outside the assembly ----------

TASK_STARTERS = ("create_task", "ensure_future")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(top: str, runtime_only: bool = True) -> dict[str, set[str]]:
    """Each module under `top`/ -> the modules under it that it imports when it runs (with
    `runtime_only` false: also those it imports for the type checker alone)."""
    paths = {module_name(p): p for p in python_files() if p.relative_to(ROOT).parts[0] == top}
    return {name: (imported_modules(path, runtime_only=runtime_only) & paths.keys()) - {name}
            for name, path in paths.items()}  # fmt: skip


def cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A chain of imports from `start` back to it, or None."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        module = frontier.pop()
        for imported in sorted(graph[module]):
            if imported == start:
                chain = [module]
                while chain[-1] != start:
                    chain.append(came_from[chain[-1]])
                return [*reversed(chain), start]
            if imported not in came_from:
                came_from[imported] = module
                frontier.append(imported)
    return None


def test_a_cycle_is_found_through_a_lazy_import_and_not_through_type_checking(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "node").mkdir()
    (tmp_path / "node" / "api.py").write_text("from node import routes\n")
    (tmp_path / "node" / "routes.py").write_text("def later():\n    from node.api import helper\n")
    (tmp_path / "node" / "kit.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import node.api")
    (tmp_path / "node" / "uses_kit.py").write_text("from node import kit\n")
    graph = import_graph("node")
    assert cycle_through(graph, "node.api") == ["node.api", "node.routes", "node.api"]
    assert graph["node.kit"] == set() and cycle_through(graph, "node.kit") is None


def test_node_has_no_import_cycle():
    graph = import_graph(NODE)
    assert len(graph) > 80
    cycles = [" -> ".join(chain) for name in sorted(graph) if (chain := cycle_through(graph, name))]
    assert cycles == [], "pass a port or a callable instead of importing back; shared code goes to a module both import"
    # with the type-only imports too, a cycle stays inside one component (node/vhosts/, node/client/, ...)
    typed = import_graph(NODE, runtime_only=False)
    across = [" -> ".join(chain) for name in sorted(typed) if (chain := cycle_through(typed, name))
              and len({m.split(".")[1] for m in chain}) > 1]  # fmt: skip
    assert across == [], "a component's port names what it uses in types of its own, not another component's"


def test_node_drops_no_task():
    dropped = []
    for path in python_files():
        rel = path.relative_to(ROOT)
        if rel.parts[0] != NODE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _called(node.value) in TASK_STARTERS:
                dropped.append(f"{rel.as_posix()}:{node.lineno}")
    assert dropped == [], "a task needs an owner that logs its failure and cancels it (node/tasks.py)"


# node/broker.py builds the node's components and wires each to the few things it uses
# (its constructor's ports: docs/architecture.md, "The node's wiring"); node/main.py runs it.
# Nothing else in node/ may reach for the whole Broker.
BROKER_NAMERS = ("node/broker.py", "node/main.py")


def names_broker(tree: ast.AST) -> bool:
    """Whether the module uses the name `Broker`: a name, an attribute, an import or a quoted annotation."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "Broker":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Broker":
            return True
        if isinstance(node, ast.alias) and "Broker" in (node.name.split(".")[-1], node.asname):
            return True
        if isinstance(node, ast.Constant) and node.value == "Broker":
            return True
    return False


def test_only_the_assembly_names_broker():
    offenders = []
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(f"{NODE}/") and rel not in BROKER_NAMERS and names_broker(ast.parse(path.read_text())):
            offenders.append(rel)
    assert offenders == [], "take a port (a small Protocol or the collaborators themselves), not the Broker"
    assert names_broker(ast.parse("if TYPE_CHECKING:\n    from node.broker import Broker as B\n"))
    assert names_broker(ast.parse("def f(b: 'Broker'): pass")) and not names_broker(ast.parse("x = BrokerThread"))
