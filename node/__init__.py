"""The Warren node process."""

# The one source of Warren's version: pyproject.toml reads it (dynamic), and so do
# `warren --version`, the HTTP overview, the OPEN's properties, the cluster
# membership record and the state snapshots. Releases are tagged v<version>
# (CHANGELOG.md).
__version__ = "0.3.0.dev0"
