"""Normalise Spack build-cache pages (cache.spack.io) into one SQLite database."""

import sys

__version__ = "0.1.0"


def main():
    """The command line (build_db.py, spack-cache-db). Ctrl-C while its modules are imported, before a command
    has begun, says so rather than print where the import was."""
    try:
        from spack_cache_db.cli import cli
    except KeyboardInterrupt:
        print("Interrupted before anything was done.", file=sys.stderr)
        sys.exit(130)
    cli()
