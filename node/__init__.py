"""The Warren node process."""

__version__ = "0.1.0"
