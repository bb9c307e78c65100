"""The cluster's enabled feature flags, kept in a file of the data directory.

A binary reads it before it opens anything else: data written once a flag was
enabled may hold records or expect inter-node messages an older build cannot
read, so a build that does not know (or does not support) one of the listed
flags refuses to start with a message that names them, instead of misreading
the data. RabbitMQ keeps the same kind of file beside its data for the same
reason. The file follows the replicated metadata: it is rewritten whenever the
machine enables a flag or restores a snapshot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from metadata.effects import FeatureFlagEnabled
from metadata.feature_flags import FeatureFlagRegistry
from metadata.machine import MetadataMachine
from metadata.state import MetadataState

FILE_NAME = "feature_flags"


class DowngradeRefused(Exception):
    """The data directory was written under flags this build cannot run with."""


def path_in(data_dir: str) -> str:
    return os.path.join(data_dir, FILE_NAME)


def check_known(data_dir: str, registry: FeatureFlagRegistry, version: str) -> None:
    """Raise DowngradeRefused if the file lists a flag `registry` does not
    support. No file (a new node, or data from a build before the file
    existed) passes."""
    try:
        with open(path_in(data_dir), encoding="utf-8") as f:
            recorded = json.load(f)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as e:
        raise DowngradeRefused(f"cannot read {path_in(data_dir)}: {e}") from None
    enabled = recorded.get("enabled", []) if isinstance(recorded, dict) else []
    supported = set(registry.supported())
    unknown = sorted(n for n in enabled if n not in supported)
    if unknown:
        writer = recorded.get("version", "a newer version")
        raise DowngradeRefused(
            f"the data directory {data_dir} was written by Warren {writer} with feature flags enabled that "
            f"Warren {version} does not support: {', '.join(unknown)}. Run Warren {writer} or newer on this "
            f"data; a downgrade past an enabled flag is not possible (restore a backup taken before it was enabled)")


def record(data_dir: str, enabled: Iterable[str], version: str) -> None:
    """Write the file atomically: a crash leaves the old or the new one."""
    path = path_in(data_dir)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"version": version, "enabled": sorted(enabled)}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class EnabledFlagsFile:
    """Keeps the file in step with the metadata machine it subscribes to."""

    def __init__(self, data_dir: str, machine: MetadataMachine, version: str):
        self._data_dir, self._machine, self._version = data_dir, machine, version
        self._written: tuple[str, ...] | None = None
        machine.subscribe(self._on_applied, self._on_restored)

    def _on_applied(self, command: Any, result: Any, effects: tuple, index: int) -> None:
        if any(isinstance(e, FeatureFlagEnabled) for e in effects):
            self._write(self._machine.state.feature_flags)

    def _on_restored(self, state: MetadataState) -> None:
        self._write(state.feature_flags)

    def _write(self, enabled: tuple[str, ...]) -> None:
        if enabled != self._written:
            record(self._data_dir, enabled, self._version)
            self._written = enabled
