"""The package version: its own module, so layers below the package root can name it without
importing the root (and its lazy exports)."""

__version__ = "0.1.0"
