"""Warren's version comes from node/__init__.py alone and is the same wherever it is shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

from node import __version__

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_version_is_a_release_number():
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_pyproject_reads_the_version_from_the_package():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "node.__version__"}


def test_warren_version_prints_it():
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-m", "node.cli", "--version"], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"warren {__version__}"


def test_the_changelog_has_a_section_for_this_version():
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        headings = re.findall(r"^## (\S+)", f.read(), re.M)
    assert __version__ in headings
