"""Why the writer inserts a batch's specs in hash order: random hashes written into the schema's own `specs`,
`page_specs` and `spec_dependencies` (the rows that name specs by id), batch after batch, as listed and as
writer._in_identity_order orders them, side by side.

    python benchmarks/insert_order.py [--hashes 3000000] [--batch 20000] [--runs 2] [--work DIR]

Each run writes a new file with the build's schema and PRAGMAs (create_schema, open_for_build, foreign keys
off as in the writer process), the two orders alternating. Prints the CPU seconds of each table's inserts,
median of the runs, as JSON. Run with the code under test first on PYTHONPATH.
"""

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from spack_cache_db.db import load, writer
from spack_cache_db.db.connection import open_for_build
from spack_cache_db.db.schema import COLUMNS, create_schema

SPECS_PER_PAGE = 60
EDGES_PER_SPEC = 5  # about what an index has per record
ORDERS = ("listed", "hash order")


def row(table, **values):
    return tuple(values.get(column) for column in COLUMNS[table])


def dependencies(listed_at):
    """The ids of the spec listed at listed_at (from 0)'s dependencies: up to EDGES_PER_SPEC of the ids 1 to
    listed_at + 1, the same whichever order its batch is written in."""
    chosen = random.Random(listed_at)
    return sorted({chosen.randint(1, listed_at + 1) for _ in range(EDGES_PER_SPEC)})


def write_batches(path, hashes, batch, ordered):
    """CPU seconds of the specs, page_specs and spec_dependencies inserts, numbering and committing as the writer
    does: each batch's specs take the ids after the last, in the order they are inserted."""
    conn = open_for_build(path)
    create_schema(conn)
    conn.execute("PRAGMA foreign_keys = OFF")
    seconds = {"specs": 0.0, "page_specs": 0.0, "spec_dependencies": 0.0}
    hash_at = COLUMNS["specs"].index("hash")
    uncommitted = 0
    conn.execute("BEGIN")
    for start in range(0, len(hashes), batch):
        listed = [row("specs", hash=h, configuration_id=1, size=1, external=0) for h in hashes[start : start + batch]]
        specs = writer._in_identity_order("specs", listed)[0] if ordered else listed
        started = time.process_time()
        conn.executemany(load.STATEMENTS["specs"], specs)
        seconds["specs"] += time.process_time() - started
        ids = {spec[hash_at]: n for n, spec in enumerate(specs, start + 1)}
        page_specs = [
            row("page_specs", page_id=listed_at // SPECS_PER_PAGE, position=listed_at % SPECS_PER_PAGE,
                spec_id=ids[spec[hash_at]], listing_id=1, compiler_exact=1, standard_tarball=1)
            for listed_at, spec in enumerate(listed, start)
        ]  # fmt: skip
        started = time.process_time()
        conn.executemany(load.STATEMENTS["page_specs"], page_specs)
        seconds["page_specs"] += time.process_time() - started
        edges = [
            row("spec_dependencies", spec_id=ids[spec[hash_at]], dependency_id=dependency, kind_id=1)
            for listed_at, spec in enumerate(listed, start)
            for dependency in dependencies(listed_at)
        ]  # as an index lists them: spec after spec
        started = time.process_time()
        conn.executemany(load.STATEMENTS["spec_dependencies"], edges)
        seconds["spec_dependencies"] += time.process_time() - started
        uncommitted += len(specs) + len(page_specs) + len(edges)
        if uncommitted >= writer.ROWS_PER_COMMIT:  # as the writer commits
            conn.execute("COMMIT")
            conn.execute("BEGIN")
            uncommitted = 0
    conn.execute("COMMIT")
    conn.close()
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hashes", type=int, default=3_000_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--work", type=Path, help="folder for the files (default: a temporary one)")
    args = parser.parse_args(argv)
    hashes = [os.urandom(16).hex() for _ in range(args.hashes)]
    measured = {order: [] for order in ORDERS}
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        for run in range(args.runs):
            for order in ORDERS:
                path = Path(work) / f"{run}-{ORDERS.index(order)}.db"
                measured[order].append(write_batches(path, hashes, args.batch, order == "hash order"))
                path.unlink()
    medians = {
        order: {table: round(statistics.median(run[table] for run in runs), 2) for table in runs[0]}
        for order, runs in measured.items()
    }
    json.dump({"hashes": args.hashes, "batch": args.batch, "runs": args.runs, "cpu seconds": medians}, sys.stdout)
    print()


if __name__ == "__main__":
    sys.exit(main())
