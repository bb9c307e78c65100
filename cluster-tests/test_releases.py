"""releases.previous_release on real git repositories made for the test, and on a clone of
this one without its tags (no docker)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from releases import (
    RECORD_FILE,
    REFUSAL_MODULE,
    ReleaseRecordError,
    previous_release,
    recorded_releases,
    version_at,
    version_key,
)

REPO = Path(__file__).resolve().parents[1]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit(
    repo: Path, version: str, tag: str | None = None, refusal: bool = False, record: dict[str, str] | None = None
) -> str:
    """A commit at `version`; `record` ({version: commit}) is written as the release record."""
    if record is not None:
        (repo / RECORD_FILE).write_text("# releases\n" + "".join(f"{v} {sha}\n" for v, sha in record.items()))
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


def test_a_clone_without_tags_finds_the_release_before_a_development_version_in_the_record(repo):
    first = commit(repo, "0.1.0")
    second = commit(repo, "0.2.0", refusal=True)
    commit(repo, "0.3.0.dev0", record={"0.2.0": second, "0.1.0": first})  # the release commit's successor
    release = previous_release(repo, env={})
    assert (release.sha, release.version, release.found_by) == (second, "0.2.0", "RELEASES")
    assert release.has_downgrade_refusal


def test_of_several_records_the_newest_release_older_than_the_working_tree_is_chosen(repo):
    shas = {v: commit(repo, v) for v in ("0.1.0", "0.2.0", "0.3.0", "0.4.0.dev0")}
    shas["0.3.1"] = commit(repo, "0.3.1")  # a patch release cut from main
    record = {v: shas[v] for v in ("0.1.0", "0.3.1", "0.2.0", "0.3.0")}  # any order
    commit(repo, "0.4.0.dev1", record=record)
    assert previous_release(repo, env={}).version == "0.3.1"
    commit(repo, "0.3.1", record=record)  # a record naming the working tree's own version passes it over
    assert previous_release(repo, env={}).version == "0.3.0"
    commit(repo, "0.1.0.dev5", record=record)  # nothing older recorded
    assert previous_release(repo, env={}) is None


def test_a_tag_wins_over_the_record(repo):
    first = commit(repo, "0.1.0", tag="v0.1.0")
    second = commit(repo, "0.2.0")
    commit(repo, "0.3.0.dev0", record={"0.2.0": second, "0.1.0": first})
    release = previous_release(repo, env={})
    assert (release.ref, release.found_by) == ("v0.1.0", "tag")


def test_a_record_naming_a_commit_not_in_the_clone_is_a_clear_error(repo):
    missing = "0123456789abcdef0123456789abcdef01234567"
    commit(repo, "0.3.0.dev0", record={"0.2.0": missing})
    with pytest.raises(ReleaseRecordError, match=f"release 0.2.0 is commit {missing}, which is not in this clone"):
        previous_release(repo, env={})


def test_a_record_that_disagrees_with_its_commit_or_is_malformed_is_a_clear_error(repo):
    first = commit(repo, "0.1.0")
    commit(repo, "0.3.0.dev0", record={"0.2.0": first})
    with pytest.raises(ReleaseRecordError, match="that commit's node/__init__.py says '0.1.0'"):
        previous_release(repo, env={})
    (repo / RECORD_FILE).write_text("0.2.0\n")
    with pytest.raises(ReleaseRecordError, match=r"RELEASES line 1 \('0.2.0'\): expected"):
        previous_release(repo, env={})
    (repo / RECORD_FILE).write_text(f"two {first}\n")
    with pytest.raises(ReleaseRecordError, match="line 1 .* not a Warren version"):
        previous_release(repo, env={})


def test_versions_order_as_releases_do():
    ordered = ["0.1.0", "0.2.0.dev0", "0.2.0.dev3", "0.2.0", "0.2.1", "0.10.0"]
    assert sorted(ordered, key=version_key) == ordered


def test_a_tagless_clone_of_this_repository_finds_its_last_recorded_release(tmp_path):
    """What CI's clone and a user's `git clone --no-tags` see: the record, checked against the history."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-tags", str(REPO), str(clone)], check=True, capture_output=True)
    assert git(clone, "tag") == ""
    current = version_at(clone, "HEAD")
    older = [v for v, _ in recorded_releases(clone) if version_key(v) < version_key(current)]
    assert older, f"{RECORD_FILE} records no release before {current}"
    release = previous_release(clone, env={})
    assert (release.version, release.found_by) == (max(older, key=version_key), "RELEASES")
    assert version_at(clone, release.sha) == release.version
    if current == "0.3.0.dev0":
        assert release.version == "0.2.0" and release.sha.startswith("25a63216c5"), release
