"""releases.previous_release on real git repositories made for the test (no docker)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from releases import REFUSAL_MODULE, previous_release


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, version: str, tag: str | None = None, refusal: bool = False) -> str:
    (repo / "node").mkdir(exist_ok=True)
    (repo / "node" / "__init__.py").write_text(f'"""The node."""\n\n__version__ = "{version}"\n')
    if refusal:
        (repo / REFUSAL_MODULE).parent.mkdir(parents=True, exist_ok=True)
        (repo / REFUSAL_MODULE).write_text("# the refusal\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", version)
    if tag:
        git(repo, "tag", tag)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    return tmp_path


def test_a_development_version_upgrades_from_the_newest_release(repo):
    commit(repo, "0.1.0", "v0.1.0")
    second = commit(repo, "0.2.0", "v0.2.0", refusal=True)
    commit(repo, "0.3.0.dev0")
    release = previous_release(repo, env={})
    assert (release.ref, release.sha, release.version) == ("v0.2.0", second, "0.2.0")
    assert release.has_downgrade_refusal


def test_a_release_commit_upgrades_from_the_release_before_it(repo):
    first = commit(repo, "0.1.0", "v0.1.0")
    commit(repo, "0.2.0", "v0.2.0")  # HEAD is the release itself
    release = previous_release(repo, env={})
    assert (release.ref, release.sha, release.version) == ("v0.1.0", first, "0.1.0")
    assert not release.has_downgrade_refusal


def test_the_override_names_any_commit_and_no_tag_means_no_release(repo):
    first = commit(repo, "0.1.0.dev0")
    commit(repo, "0.1.0.dev1")
    assert previous_release(repo, env={}) is None  # no tag at all
    release = previous_release(repo, env={"WARREN_UPGRADE_FROM": first[:10]})
    assert (release.sha, release.version) == (first, "0.1.0.dev0")
    assert previous_release(repo, env={"WARREN_UPGRADE_FROM": "v9.9.9"}) is None


def test_only_release_tags_count(repo):
    commit(repo, "0.1.0", "v0.1.0")
    commit(repo, "0.2.0.dev0", "nightly")  # not v*
    assert previous_release(repo, env={}).ref == "v0.1.0"
