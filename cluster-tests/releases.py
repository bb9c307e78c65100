"""Which release a rolling-upgrade test starts from, and what that release can do.

The previous release is the newest `v*` tag reachable from HEAD whose version differs from
the working tree's (`node/__init__.py`): on a development version (0.3.0.dev0) that is the
last release (v0.2.0); on a release commit itself (HEAD tagged v0.3.0, version 0.3.0) it is
the one before. A clone has no tags unless it asks for them, so where no tag qualifies the
release record in the tree (RELEASES: "<version> <commit>" a line) answers instead: its
newest release older than the working tree's version. WARREN_UPGRADE_FROM=<tag or commit>
overrides the choice.

    release = previous_release(repo)  # None: neither a tag nor the record names one
    release.ref, release.sha, release.version, release.found_by, release.has_downgrade_refusal

A record that cannot be trusted (a malformed line, a commit this clone lacks, a commit whose
version is not the one recorded) raises ReleaseRecordError saying which line and why.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

VERSION_FILE = "node/__init__.py"
RECORD_FILE = "RELEASES"
REFUSAL_MODULE = "node/cluster/enabled_flags.py"  # the data directory's flags file and the refusal (0.2.0)
_VERSION = re.compile(r'^__version__\s*=\s*["\']([^"\']+)["\']', re.M)
# The versions Warren gives itself (CHANGELOG.md): a release X.Y.Z or a development X.Y.Z.devN before it.
_ORDERED_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.dev(\d+))?$")


@dataclass(frozen=True)
class Release:
    ref: str  # as given or found: a tag (v0.2.0) or a commit
    sha: str
    version: str  # its node/__init__.py's, or the tag's name without the v when it has none
    has_downgrade_refusal: bool  # whether its binary refuses data with a flag it does not support
    found_by: str = "tag"  # "tag", "RELEASES" (the record) or "WARREN_UPGRADE_FROM"


class ReleaseRecordError(Exception):
    """The release record names something this clone cannot use; the message says which line."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)


def version_in(text: str) -> str | None:
    match = _VERSION.search(text)
    return match.group(1) if match else None


def version_key(version: str) -> tuple[int, int, int, int, int]:
    """Orders Warren's versions: 0.2.0 < 0.3.0.dev0 < 0.3.0.dev1 < 0.3.0."""
    match = _ORDERED_VERSION.match(version)
    if match is None:
        raise ValueError(f"{version!r} is not a Warren version (X.Y.Z or X.Y.Z.devN)")
    major, minor, patch, dev = match.groups()
    return (int(major), int(minor), int(patch), 0 if dev is not None else 1, int(dev or 0))


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


def release_from_tags(repo: Path, current: str) -> str | None:
    """The newest v* tag before HEAD whose version is not `current`, or None."""
    start = "HEAD"
    while True:
        tag = newest_tag_before(repo, start)
        if tag is None:
            return None
        if (version_at(repo, tag) or tag.removeprefix("v")) != current:
            return tag
        start = f"{tag}^"  # this tag is the working tree's own version: look before it


def recorded_releases(repo: Path) -> list[tuple[str, str]]:
    """The record's (version, commit) pairs, in file order; [] when the tree has no record."""
    path = repo / RECORD_FILE
    if not path.exists():
        return []
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{RECORD_FILE} line {number} ({line.strip()!r})"
        if len(words) != 2 or not re.fullmatch(r"[0-9a-f]{40}", words[1]):
            raise ReleaseRecordError(f"{where}: expected '<version> <40-hex commit id>'")
        try:
            version_key(words[0])
        except ValueError as e:
            raise ReleaseRecordError(f"{where}: {e}") from None
        found.append((words[0], words[1]))
    return found


def release_from_record(repo: Path, current: str) -> tuple[str, str] | None:
    """The record's newest release older than `current`, checked against this clone, or None."""
    older = [(v, sha) for v, sha in recorded_releases(repo) if version_key(v) < version_key(current)]
    if not older:
        return None
    version, sha = max(older, key=lambda pair: version_key(pair[0]))
    if _git(repo, "cat-file", "-e", f"{sha}^{{commit}}").returncode != 0:
        raise ReleaseRecordError(f"{RECORD_FILE} says release {version} is commit {sha}, which is not in this clone "
                                 "(a shallow clone? `git fetch --unshallow` brings the history)")  # fmt: skip
    if version_at(repo, sha) != version:
        raise ReleaseRecordError(f"{RECORD_FILE} says release {version} is commit {sha}, but that commit's "
                                 f"{VERSION_FILE} says {version_at(repo, sha)!r}")  # fmt: skip
    return version, sha


def previous_release(repo: Path, env: Mapping[str, str] = os.environ) -> Release | None:
    """See the module docstring; None when nothing qualifies (or the override names nothing)."""
    ref, found_by = env.get("WARREN_UPGRADE_FROM") or None, "WARREN_UPGRADE_FROM"
    if ref is None:
        current = working_tree_version(repo)
        ref, found_by = release_from_tags(repo, current), "tag"
        if ref is None:
            recorded = release_from_record(repo, current)
            if recorded is None:
                return None
            ref, found_by = recorded[1], RECORD_FILE
    sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if sha.returncode != 0:
        return None
    sha = sha.stdout.strip()
    version = version_at(repo, sha) or ref.removeprefix("v")
    has_refusal = _git(repo, "cat-file", "-e", f"{sha}:{REFUSAL_MODULE}").returncode == 0
    return Release(ref if found_by != RECORD_FILE else sha[:12], sha, version, has_refusal, found_by)
