"""Warren's version comes from node/__init__.py alone and is the same wherever it is shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

from node import __version__

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# a release (tagged v<version>) or, between releases, the next one's development version
RELEASE, DEVELOPMENT = r"\d+\.\d+\.\d+", r"\d+\.\d+\.\d+\.dev\d+"


def test_the_version_is_a_release_or_development_number():
    assert re.fullmatch(RELEASE, __version__) or re.fullmatch(DEVELOPMENT, __version__)


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
    # a development version's changes are listed under "Unreleased", above the last release
    assert (headings[0] == "Unreleased") if re.fullmatch(DEVELOPMENT, __version__) else (__version__ in headings)
