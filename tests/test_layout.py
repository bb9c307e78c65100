"""The layout's two import rules, checked on every .py file of the repository:

- pysyncobj is imported only inside raft/ (and by raft/'s own tests, which
  run stock pysyncobj beside Warren's changes): everything else goes through
  raft/'s API (STYLE.md, "pysyncobj: our Raft dependency, and why we fence it");
- the libraries never import node/, the process that assembles them;

and its size rule: no module over 600 lines, no class of the product over 340.

Imports are read with `ast`, so an import inside a function counts as much
as one at the top, and relative imports are resolved to the module they name.
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


def imported_modules(path: Path, tree: ast.AST | None = None) -> set[str]:
    """Every module `path` (or `tree`, its parsed text) imports, as absolute dotted names
    (relative ones resolved)."""
    rel = path.relative_to(ROOT)
    package = list(rel.parent.parts)
    names: set[str] = set()
    for node in ast.walk(tree or ast.parse(path.read_text(), str(path))):
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
            and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


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


# Registration by import side effect (node/http/api.py imports its route modules, which import
# api.py's helpers; node/ops/ctl.py and its command modules alike): the cycles that remain until
# those registries are explicit.
KNOWN_CYCLES = (
    {"node.http.api", "node.http.cluster_routes", "node.http.limit_routes", "node.http.maintenance_routes",
     "node.http.message_routes", "node.http.node_routes", "node.http.policy_routes", "node.http.tls_routes",
     "node.http.topic_permission_routes", "node.http.topology_routes"},
    {"node.ops.ctl", "node.ops.ctl_cluster", "node.ops.ctl_maintenance", "node.ops.ctl_topology"},
)  # fmt: skip


def runtime_imports(path: Path) -> set[str]:
    """imported_modules without those under `if TYPE_CHECKING:` (they are for the type checker only)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = [ast.Pass()]
    return imported_modules(path, tree)


def import_cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def test_node_has_no_import_cycle():
    modules = {}
    for path in python_files():
        rel = path.relative_to(ROOT)
        if rel.parts[0] == NODE:
            name = ".".join(rel.with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    graph = {m: {n for n in runtime_imports(p) if n in modules and n != m} for m, p in modules.items()}
    cycles = [c for c in import_cycles(graph) if c not in KNOWN_CYCLES]
    assert cycles == [], "pass a port or a callable instead of importing back"
    # with the type-only imports too: a cycle stays inside one component (node/vhosts/, node/client/, ...)
    graph = {m: {n for n in imported_modules(p) if n in modules and n != m} for m, p in modules.items()}
    across = [sorted(c) for c in import_cycles(graph) if len({m.split(".")[1] for m in c}) > 1]
    assert across == [], "a component's port names what it uses in types of its own, not another component's"
    assert import_cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]
