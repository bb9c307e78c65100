"""The protocol core's two house rules, read from its source with `ast`:

- one struct table: the byte layouts of the wire format are spelled once, in
  amqp/structs.py, and the codec, the framing, the fast paths and the tests
  that build bytes by hand all use it;
- a declared interface between the engine's objects: no code in amqp/ reads
  or calls a private member (`x._name`) of anything but `self` or `cls`.
  Connection, session and link talk through public attributes and methods
  (docs/architecture.md names them), so what one may touch of another is
  written down where it is defined.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "amqp"
STRUCT_TABLE = CORE / "structs.py"
# packing or unpacking with a format string of its own: a second spelling of a layout
_STRUCT_CALLS = {"Struct", "pack", "pack_into", "unpack", "unpack_from", "calcsize", "iter_unpack"}


def _struct_layouts(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STRUCT_CALLS
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "struct"):  # fmt: skip
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node.func)}")
    return found


def _private_reads(path: Path) -> list[str]:
    """`x._name` where x is not `self` or `cls` (dunders are Python's, not a class's)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_private_member_is_read_across_objects():
    files = sorted(CORE.glob("*.py"))
    assert len(files) > 15
    offenders = [hit for f in files for hit in _private_reads(f)]
    assert offenders == [], "declare it in the owner's interface (a public attribute or method) instead"


def test_the_private_check_sees_what_it_must(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    sample = tmp_path / "sample.py"
    sample.write_text(
        "class A:\n"
        "    def f(self, session, cls):\n"
        "        self._mine(); cls._too; self.__dict__; session.__class__\n"
        "        session._send(); self.session._waiting; self.parser()._buf\n"
    )
    hits = sorted(hit.split(": ")[1] for hit in _private_reads(sample))
    assert hits == ["self.parser()._buf", "self.session._waiting", "session._send"]


def test_the_wire_layouts_are_spelled_once():
    files = [*CORE.glob("*.py"), *(ROOT / "tests" / "amqp").glob("*.py")]
    assert len(files) > 20
    offenders = [hit for f in sorted(files) if f != STRUCT_TABLE for hit in _struct_layouts(f)]
    assert offenders == [], "use the layouts of amqp/structs.py"


def test_the_struct_check_sees_a_copied_layout(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    sample = tmp_path / "sample.py"
    sample.write_text("import struct\n_u32 = struct.Struct('>I')\nstruct.pack('>q', 1)\nstruct.error\n")
    assert [hit.split(": ")[1] for hit in _struct_layouts(sample)] == ["struct.Struct", "struct.pack"]
