"""What sorting on every core saves once the build's writer process has finished: the indexes a full build makes
after the load (schema.INDEXES_AFTER_LOAD), made again in a copy of a built database with the build's settings,
SQLite's sorter in this thread alone and on every core (connection.sort_on_spare_cores), one after the other.

    python benchmarks/after_load.py cache.db [--runs 3]

Prints, as JSON, the wall seconds of each run of each way and their medians. The database is left as it was:
the indexes are made again in a copy beside it, removed at the end. Run with the code under test first on
PYTHONPATH.
"""

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

from spack_cache_db.db import schema
from spack_cache_db.db.connection import database_uri, open_for_build, sort_on_spare_cores, usable_cores

WAYS = ("one thread", "every core")


def made_after_load():
    """The names of the indexes INDEXES_AFTER_LOAD makes, read from an empty database of the schema."""
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript(schema.TABLES)
        before = {name for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}
        schema.create_indexes_after_load(conn)
        return sorted(
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")
            if name not in before
        )


def make_again(conn, names, way):
    """Wall seconds of dropping the indexes and making them again, the sorter in one thread or on every core."""
    for name in names:
        conn.execute(f"DROP INDEX {name}")
    if way == "every core":
        sort_on_spare_cores(conn)
    else:
        conn.execute("PRAGMA threads = 0")
    started = time.perf_counter()
    schema.create_indexes_after_load(conn)
    return time.perf_counter() - started


def measure(path, names, runs):
    """{way: [seconds of each run]}, the ways alternating, in a copy of the database at path."""
    with closing(sqlite3.connect(database_uri(path), uri=True)) as conn:  # before gigabytes are copied
        missing = set(names) - {name for (name,) in conn.execute("SELECT name FROM sqlite_schema")}
    if missing:
        raise SystemExit(f"{path}: expected a database built by build_db.py (it lacks index {min(missing)})")
    handle, copy = tempfile.mkstemp(dir=Path(path).parent, prefix=f".{Path(path).name}.after-load-")
    os.close(handle)
    try:
        shutil.copyfile(path, copy)
        with closing(open_for_build(copy, create=False)) as conn:
            seconds = {way: [] for way in WAYS}
            for _ in range(runs):
                for way in WAYS:
                    seconds[way].append(make_again(conn, names, way))
            return seconds
    finally:
        os.remove(copy)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("database", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    names = made_after_load()
    seconds = measure(args.database, names, args.runs)
    ways = {
        way: {"runs": [round(run, 2) for run in runs], "median": round(statistics.median(runs), 2)}
        for way, runs in seconds.items()
    }
    json.dump({"cores": usable_cores(), "indexes": names, **ways}, sys.stdout)
    print()


if __name__ == "__main__":
    sys.exit(main())
