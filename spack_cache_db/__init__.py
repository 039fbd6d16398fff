"""Normalise Spack build-cache pages (cache.spack.io) into one SQLite database."""

__version__ = "0.1.0"
