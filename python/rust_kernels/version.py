"""The generator's version: part of every cache key, so a new generator never serves an old build."""

__version__ = "0.1.0"
