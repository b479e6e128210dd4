"""The version of unified-memory (a leaf: it imports nothing)."""

__version__ = "0.1.0"
