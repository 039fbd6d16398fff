"""Build cache.db from Spack build-cache pages: python build_db.py --help"""

from spack_cache_db.cli import cli

if __name__ == "__main__":
    cli()
