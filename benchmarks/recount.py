"""What recounting a tag costs, statement by statement: maintenance.count_tags run on a built database for its
first tags, one tag after the other as a build counts them, timed per statement, then rolled back.

    python benchmarks/recount.py cache.db [--tags 10]

Prints, as JSON, the wall seconds a tag and each statement's share of them (largest first). The database is
left as it was: everything happens in one transaction that is rolled back. Run with the code under test first
on PYTHONPATH.
"""

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

from spack_cache_db.db.connection import database_uri
from spack_cache_db.db.maintenance import count_tags


class TimedConnection:
    """A connection whose execute() adds each statement's wall seconds to seconds[statement]."""

    def __init__(self, conn):
        self.conn = conn
        self.seconds = {}

    def execute(self, statement, *parameters):
        started = time.perf_counter()
        cursor = self.conn.execute(statement, *parameters)
        self.seconds[statement] = self.seconds.get(statement, 0.0) + time.perf_counter() - started
        return cursor

    def executemany(self, statement, rows):
        return self.conn.executemany(statement, rows)


def recount(path, tags):
    """(how many tags were recounted, {statement: seconds}): the first tags of the database at path, recounted one
    at a time, then rolled back."""
    conn = sqlite3.connect(database_uri(path, "rw"), uri=True, isolation_level=None)
    conn.execute("PRAGMA cache_size = -64000")  # the writer's
    timed = TimedConnection(conn)
    conn.execute("BEGIN")
    try:
        tag_ids = [tag_id for (tag_id,) in conn.execute("SELECT id FROM tags ORDER BY id LIMIT ?", (tags,))]
        for tag_id in tag_ids:
            count_tags(timed, [tag_id])
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    return len(tag_ids), timed.seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("database", type=Path)
    parser.add_argument("--tags", type=int, default=10)
    args = parser.parse_args(argv)
    counted, seconds = recount(args.database, args.tags)
    if not counted:
        sys.exit(f"{args.database}: expected a database with tags (its tags table is empty)")
    total = sum(seconds.values())
    shares = [
        {"statement": " ".join(statement.split())[:100], "share": round(part / total, 3)}
        for statement, part in sorted(seconds.items(), key=lambda item: -item[1])
    ]
    json.dump({"tags": counted, "seconds a tag": round(total / counted, 3), "statements": shares}, sys.stdout)
    print()


if __name__ == "__main__":
    sys.exit(main())
