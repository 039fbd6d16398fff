"""The floors under two targets: what a build cannot avoid, whatever its code, with this schema and these inputs.

    python benchmarks/floors.py write BUILT_DB NEW_DB
    python benchmarks/floors.py unchanged DB INPUT...

write: the rows of a built database written into an empty file with the same schema, as the build writes
them: tables, the indexes a load reads and full-text indexes created first (create_schema), the other
indexes once the rows are written (create_indexes_after_load), foreign keys checked, the
build's PRAGMAs (open_for_build, as its writer process opens the file), each table copied with
INSERT ... SELECT in the schema's load order, the full-text indexes filled as a full build does, the file
synced to disk as the build's swap does. The columns are named, never `SELECT *`: into an empty table of
the same shape, SQLite copies the records and index entries of a `SELECT *` in bulk (its transfer
optimisation), which no build from pages could do. Reading
the rows back from the built file is counted too, so this is a floor only for a build that inserts its rows
one by one, as every builder of this schema does.

unchanged: what an incremental build does to find out that the inputs an earlier build read did not change,
with the build's own functions: reading what the earlier build recorded of each file (its sources table),
finding the inputs (the walk, which lists only the folders that changed since that build recorded them), and
the stat of each file compared with that record. Every file must come
out unchanged: this is the floor of building onto a database the inputs have not changed since.

Each prints its seconds, in all and per part, as JSON. Run with the code under test first on PYTHONPATH.
"""

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

from spack_cache_db import build
from spack_cache_db.db.connection import database_uri, open_for_build
from spack_cache_db.db.maintenance import index_new_rows
from spack_cache_db.db.schema import COLUMNS, FULL_TEXT, LOAD_ORDER, create_indexes_after_load, create_schema
from spack_cache_db.read import inputs


class FloorError(Exception):
    """A floor measured on something else than what it is the floor of: the message says what."""


class Stopwatch:
    """Seconds per part, in the order they ran."""

    def __init__(self):
        self.parts, self.started = {}, time.perf_counter()
        self.last = self.started

    def lap(self, part):
        now = time.perf_counter()
        self.parts[part] = now - self.last
        self.last = now

    def result(self, **facts):
        return {"seconds": self.last - self.started, "parts": self.parts, **facts}


def write_floor(built, new, tables=LOAD_ORDER):
    """Seconds to write the rows of the database built into new (replaced), table by table in this order."""
    new.unlink(missing_ok=True)
    clock = Stopwatch()
    conn = open_for_build(new)
    try:
        create_schema(conn)
        conn.execute("ATTACH DATABASE ? AS built", (database_uri(built),))
        clock.lap("schema")
        conn.execute("BEGIN")
        for table in tables:
            columns = ", ".join(COLUMNS[table])
            conn.execute(f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM built.{table}")
            clock.lap(table)
        conn.execute("COMMIT")  # the build's writer commits its rows; the indexes come after, as there
        create_indexes_after_load(conn)
        clock.lap("indexes after the load")
        conn.execute("BEGIN")
        index_new_rows(conn, {rows: 1 for rows, _, _ in FULL_TEXT.values()}, every_row=True)
        clock.lap("full-text indexes")
        conn.execute("COMMIT")
        with open(new, "rb") as written:
            os.fsync(written.fileno())
        clock.lap("commit and sync")
        check_copied(conn, built, tables)
    finally:
        conn.close()
    return clock.result(bytes=new.stat().st_size)


def full_text_tables(name):
    """Whether a table is a full-text index or one of the tables SQLite keeps it in (<index>_data, ...)."""
    return any(name == index or name.startswith(f"{index}_") for index in FULL_TEXT)


def check_copied(conn, built, tables):
    """Every table of the built database was copied, with all its rows, and its full-text indexes index them
    all: otherwise the floor is of a smaller database."""
    stored = {
        name
        for (name,) in conn.execute("SELECT name FROM built.sqlite_master WHERE type = 'table'")
        if not name.startswith("sqlite_") and not full_text_tables(name)
    }
    if stored != set(tables):
        raise FloorError(
            f"{built}: expected to copy its tables {sorted(stored)}, copied {sorted(tables)}"
            f" (not copied: {sorted(stored - set(tables))})"
        )
    for table in tables:
        copied, there = (
            conn.execute(f"SELECT count(*) FROM {file}.{table}").fetchone()[0] for file in ("main", "built")
        )
        if copied != there:
            raise FloorError(f"{built}: expected {there:,} rows in {table}, wrote {copied:,}")
    for index in FULL_TEXT:  # each full-text index holds every row of its (copied) table
        try:
            conn.execute(f"INSERT INTO main.{index} ({index}) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as error:
            raise FloorError(f"{built}: expected {index} to index every row of its table ({error})") from None


def unchanged_floor(db, paths):
    """Seconds for an incremental build to find out that none of the files in paths changed since the build of
    db, done with the build's own steps for them."""
    with build.fewer_collections():  # as the build runs these steps
        clock = Stopwatch()
        arguments = inputs.classify(paths)
        existing = build._existing_sources(db)
        if existing is None:
            raise FloorError(f"{db}: expected a database this code built, to build onto")
        clock.lap("recorded identities")
        page_inputs = build.find_page_inputs(arguments, existing)
        clock.lap("walk")
        index_plan = build._plan_indexes(arguments, (), existing, db, False, None)
        plan = build._plan(page_inputs, existing, index_plan, ())
        clock.lap("stat and compare")
    files = len(page_inputs.files)
    if plan.to_read or plan.touched or plan.removed or plan.unchanged != files:
        raise FloorError(
            f"{db}: expected every file of {', '.join(map(str, paths))} as its build read it; {len(plan.to_read)}"
            f" to read, {len(plan.touched)} touched, {len(plan.removed)} gone, of {files}"
        )
    return clock.result(files=files)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    write = commands.add_parser("write", help="the built database's rows written into an empty file")
    write.add_argument("built", type=Path)
    write.add_argument("new", type=Path, help="SQLite file to write (replaced)")
    unchanged = commands.add_parser("unchanged", help="finding out that the inputs of a build did not change")
    unchanged.add_argument("db", type=Path)
    unchanged.add_argument("paths", nargs="+", help="the inputs the database was built from")
    args = parser.parse_args(argv)
    try:
        result = write_floor(args.built, args.new) if args.command == "write" else unchanged_floor(args.db, args.paths)
    except (FloorError, sqlite3.Error) as error:
        raise SystemExit(f"floors.py {args.command}: {error}") from None
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
