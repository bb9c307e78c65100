"""Renders docs/compatibility.toml (every key RabbitMQ 4.2 acts on and what
Warren does with it) into its section of docs/compatibility.md.

    .venv/bin/python scripts/compatibility_table.py          # rewrite the section
    .venv/bin/python scripts/compatibility_table.py --check  # exit 1 if it is stale

tests/node/http/test_compatibility.py runs the check, so the document cannot
drift from the list the tests walk.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "docs" / "compatibility.toml"
DOC = REPO / "docs" / "compatibility.md"
BEGIN = "<!-- keys: generated from docs/compatibility.toml by scripts/compatibility_table.py -->"
END = "<!-- end of keys -->"


def entries() -> list[dict]:
    return tomllib.loads(TABLE.read_text())["key"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _warren(entry: dict) -> str:
    status = entry["status"]
    if status == "implemented":
        out = "implemented"
    else:
        out = f"{status}: `{entry['error']}`"
    if entry.get("note"):
        out += f" ({entry['note']})"
    return out


def _tests(entry: dict) -> str:
    return ", ".join(f"`{t.removeprefix('tests/')}`" for t in entry.get("tests", ())) or "—"


def render(rows: list[dict]) -> str:
    lines = [BEGIN, "",
             "| Kind | Key | Queue types | RabbitMQ 4.2 | A bad value in RabbitMQ | Warren | Tests |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for e in rows:
        cells = (e["kind"], f"`{e['key']}`", ", ".join(e["types"]) or "—", e["rabbitmq"], e["bad"], _warren(e),
                 _tests(e))  # fmt: skip
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join([*lines, "", END])


def rendered_document() -> str:
    """docs/compatibility.md with its keys section as the table says."""
    text = DOC.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + render(entries()) + tail


def main(argv: list[str]) -> int:
    want = rendered_document()
    if "--check" in argv:
        if DOC.read_text() != want:
            print(f"{DOC} is stale: run {Path(__file__).relative_to(REPO)}", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
