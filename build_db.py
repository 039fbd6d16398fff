"""Build cache.db from Spack build-cache pages: python build_db.py --help"""

from spack_cache_db import main

if __name__ == "__main__":
    main()
