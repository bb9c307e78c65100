"""Which release a rolling-upgrade test starts from, and what that release can do.

The previous release is the newest `v*` tag reachable from HEAD whose version differs from
the working tree's (`node/__init__.py`): on a development version (0.3.0.dev0) that is the
last release (v0.2.0); on a release commit itself (HEAD tagged v0.3.0, version 0.3.0) it is
the one before. WARREN_UPGRADE_FROM=<tag or commit> overrides the choice.

    release = previous_release()      # None: no such tag in this clone
    release.ref, release.sha, release.version, release.has_downgrade_refusal
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

VERSION_FILE = "node/__init__.py"
REFUSAL_MODULE = "node/cluster/enabled_flags.py"  # the data directory's flags file and the refusal (0.2.0)
_VERSION = re.compile(r'^__version__\s*=\s*["\']([^"\']+)["\']', re.M)


@dataclass(frozen=True)
class Release:
    ref: str  # as given or found: a tag (v0.2.0) or a commit
    sha: str
    version: str  # its node/__init__.py's, or the tag's name without the v when it has none
    has_downgrade_refusal: bool  # whether its binary refuses data with a flag it does not support


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)


def version_in(text: str) -> str | None:
    match = _VERSION.search(text)
    return match.group(1) if match else None


def working_tree_version(repo: Path) -> str:
    version = version_in((repo / VERSION_FILE).read_text())
    if version is None:
        raise ValueError(f"no __version__ in {repo / VERSION_FILE}")
    return version


def version_at(repo: Path, ref: str) -> str | None:
    shown = _git(repo, "show", f"{ref}:{VERSION_FILE}")
    return version_in(shown.stdout) if shown.returncode == 0 else None


def newest_tag_before(repo: Path, ref: str) -> str | None:
    """The newest v* tag reachable from `ref` (itself included), or None."""
    found = _git(repo, "describe", "--tags", "--abbrev=0", "--match", "v*", ref)
    return found.stdout.strip() if found.returncode == 0 else None


def previous_release(repo: Path, env: Mapping[str, str] = os.environ) -> Release | None:
    """See the module docstring; None when no tag qualifies (or the override names nothing)."""
    ref = env.get("WARREN_UPGRADE_FROM") or None
    if ref is None:
        current = working_tree_version(repo)
        start = "HEAD"
        while True:
            tag = newest_tag_before(repo, start)
            if tag is None:
                return None
            if (version_at(repo, tag) or tag.removeprefix("v")) != current:
                ref = tag
                break
            start = f"{tag}^"  # this tag is the working tree's own version: look before it
    sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if sha.returncode != 0:
        return None
    sha = sha.stdout.strip()
    version = version_at(repo, sha) or ref.removeprefix("v")
    has_refusal = _git(repo, "cat-file", "-e", f"{sha}:{REFUSAL_MODULE}").returncode == 0
    return Release(ref, sha, version, has_refusal)
