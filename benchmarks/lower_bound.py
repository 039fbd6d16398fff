"""What a minimal loader of pages costs: every page into two flat SQLite tables, nothing else.

    python benchmarks/lower_bound.py CORPUS DB

Reads CORPUS/_cache/<tag>/<package>/specs.md, parses meta and spec_details with orjson (the fastest
correct JSON parser for Python: a bound slowed by a slower parser would hide part of the builder's
overhead), checks meta's spec count, and inserts one row per spec and one per (spec, stack) with a flat
executemany in a single transaction, no indexes. The builder has to do at least this much, so its time
over this one is what its extra work costs. It asks the system to read pages ahead as the builder does
(read.files.read_ahead): where the pages are not in memory, reading them one after the other would wait on the
disk for what the builder does not wait for.
"""

import argparse
import sqlite3
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the code this benchmarks
from spack_cache_db.read.files import read_ahead  # noqa: E402

SCHEMA = """
CREATE TABLE specs (
    id INTEGER PRIMARY KEY, tag TEXT, package TEXT, hash TEXT, compiler TEXT, os TEXT,
    platform TEXT, target TEXT, version TEXT, variants TEXT, size TEXT
);
CREATE TABLE spec_stacks (spec_id INTEGER, stack TEXT);
"""


def front_matter(data):
    """The page's 'key: value' lines between the two '---' lines, as bytes."""
    lines = data.split(b"\n")
    end = lines.index(b"---", 1)
    return dict(line.split(b": ", 1) for line in lines[1:end])


def read_page(path):
    fields = front_matter(path.read_bytes())
    meta = orjson.loads(fields[b"meta"])
    specs = orjson.loads(fields[b"spec_details"])
    if meta["num_specs"] != len(specs):
        raise ValueError(f"{path}: meta.num_specs is {meta['num_specs']}, spec_details has {len(specs)}")
    return specs


def page_rows(tag, package, specs, first_id):
    spec_rows, stack_rows = [], []
    for spec_id, spec in enumerate(specs, first_id):
        spec_rows.append(
            (
                spec_id, tag, package, spec["hash"], spec["compiler"], spec["os"], spec["platform"],
                spec["target"], spec["versions"][0], orjson.dumps(spec["variants"]).decode(), spec["size"],
            )
        )  # fmt: skip
        stack_rows.extend((spec_id, stack) for stack in spec["stacks"])
    return spec_rows, stack_rows


def page_paths(corpus):
    """The corpus's pages, in the order they are read."""
    return sorted(corpus.glob("_cache/*/*/specs.md"))


def load(corpus, db):
    """Returns (pages, spec rows, stack rows)."""
    db.unlink(missing_ok=True)
    conn = sqlite3.connect(db, isolation_level=None)
    # The settings a builder writing a fresh file can afford: a crash just means starting again.
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.executescript(SCHEMA)
    conn.execute("BEGIN")
    pages = specs_total = stacks_total = 0
    for path in read_ahead(page_paths(corpus)):
        specs = read_page(path)
        spec_rows, stack_rows = page_rows(path.parent.parent.name, path.parent.name, specs, specs_total + 1)
        conn.executemany("INSERT INTO specs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", spec_rows)
        conn.executemany("INSERT INTO spec_stacks VALUES (?, ?)", stack_rows)
        pages, specs_total, stacks_total = pages + 1, specs_total + len(spec_rows), stacks_total + len(stack_rows)
    conn.execute("COMMIT")
    conn.close()
    return pages, specs_total, stacks_total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="folder holding _cache/")
    parser.add_argument("db", type=Path, help="SQLite file to write (replaced)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    pages, specs, stacks = load(args.corpus, args.db)
    elapsed = time.perf_counter() - started
    print(f"{elapsed:.1f} s: {pages} pages, {specs} spec rows, {stacks} spec-stack rows -> {args.db}")


if __name__ == "__main__":
    sys.exit(main())
