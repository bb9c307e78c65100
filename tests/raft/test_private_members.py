"""raft/patches.py checks, at import, every private pysyncobj member raft/ relies on."""

from __future__ import annotations

import ast
import dis
import importlib
import inspect
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pysyncobj

from raft import patches

RAFT = Path(__file__).resolve().parents[2] / "raft"


def _pysyncobj_names() -> set[str]:
    """Every name pysyncobj defines: module globals, class members, attributes its code assigns."""
    names: set[str] = set()
    for info in pkgutil.iter_modules(pysyncobj.__path__):
        try:
            module = importlib.import_module(f"pysyncobj.{info.name}")
        except ImportError:
            continue  # optional parts (pysyncobj's encryption needs cryptography)
        names.update(vars(module))
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                names.update(vars(value))
        stack = [compile(Path(module.__file__).read_text(), module.__file__, "exec")]
        while stack:
            code = stack.pop()
            names.update(i.argval for i in dis.get_instructions(code) if i.opname == "STORE_ATTR")
            stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


def _private_names_used_in_raft() -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for path in RAFT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                names = [node.attr]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pysyncobj"):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("_") and not name.endswith("__"):
                    used.setdefault(name, set()).add(path.name)
    return used


# Warren's own private names that pysyncobj happens to use too (on other classes).
NOT_PYSYNCOBJS = {"_server"}  # NodeTransport's gRPC server; pysyncobj's TcpTransport has one too


def test_every_private_pysyncobj_member_raft_uses_is_checked():
    checked = {m for members in patches.PRIVATE_MEMBERS.values() for m in members}
    theirs = _pysyncobj_names()
    unchecked = {name: sorted(files) for name, files in _private_names_used_in_raft().items()
                 if name in theirs and name not in checked and name not in NOT_PYSYNCOBJS}  # fmt: skip
    assert not unchecked, f"add these to raft/patches.py PRIVATE_MEMBERS: {unchecked}"


def test_the_check_finds_what_pysyncobj_lacks():
    assert patches.missing_members(patches.PRIVATE_MEMBERS) == []
    missing = patches.missing_members({
        "pysyncobj.syncobj.SyncObj": ("_SyncObj__raftLog", "_SyncObj__gone", "_isLeader", "_wasLeader"),
        "pysyncobj.syncobj.NoSuchClass": ("_x",),
        "pysyncobj.serializer": ("atomicReplace", "atomicSwap"),
    })  # fmt: skip
    assert missing == ["pysyncobj.syncobj.SyncObj._SyncObj__gone", "pysyncobj.syncobj.SyncObj._wasLeader",
                       "pysyncobj.syncobj.NoSuchClass._x", "pysyncobj.serializer.atomicSwap"]  # fmt: skip


def test_importing_patches_changes_nothing_until_install():
    script = (
        "import pysyncobj.serializer as s, pysyncobj.syncobj as so\n"
        "stock = (s.atomicReplace, so.createJournal)\n"
        "from raft import patches\n"
        "assert (s.atomicReplace, so.createJournal) == stock, 'patched at import'\n"
        "patches.install(); patches.install()\n"
        "assert s.atomicReplace is patches.durable_replace and so.createJournal is patches._create_journal\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=RAFT.parent)
