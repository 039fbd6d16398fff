"""What the benchmark learns from a built database with SQL: row counts, bytes per object (SQLite's dbstat),
the bytes of the dependency edges, realistic parameters, the subjects of the dependency questions, and the
rows of the full-text index a search matches.

Everything here reads the database's views and catalogue (binaries, dependencies, tags, sqlite_master,
foreign keys) rather than the tables behind them where it can, so that it keeps working while the schema
changes underneath.
"""

import collections
import contextlib
import json
import sqlite3
import statistics
import time

from datasette.utils import escape_fts

COUNTED = ("binaries", "dependencies", "packages", "pages", "problems", "specs", "tags")
TREE_CANDIDATES = 50  # binaries whose dependency tree is counted exactly to find the largest
BATCH = 500


@contextlib.contextmanager
def read_only(db):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def db_counts(db):
    """The row counts the builder recorded in row_counts, of what the report names."""
    with read_only(db) as conn:
        placeholders = ", ".join("?" * len(COUNTED))
        return dict(
            conn.execute(f"SELECT name, count FROM row_counts WHERE name IN ({placeholders}) ORDER BY name", COUNTED)
        )


def object_bytes(conn):
    """{table or index: bytes} from SQLite's dbstat (empty where this SQLite lacks it)."""
    try:
        return dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
    except sqlite3.OperationalError:
        return {}


# Kinds of object a database's bytes are split into, in the order the report adds them up: the tables' rows
# (each table with its primary key, and SQLite's catalogue), the full-text indexes (the tables each keeps),
# the other indexes (those of UNIQUE constraints included).
KINDS = ("rows", "full-text indexes", "indexes")


def bytes_by_kind(conn, sizes):
    """{kind: bytes} of dbstat's sizes, in KINDS' order."""
    catalogue = conn.execute("SELECT name, type, sql FROM sqlite_master").fetchall()
    full_text = [name for name, _, sql in catalogue if (sql or "").startswith("CREATE VIRTUAL TABLE")]
    indexes = {name for name, kind, _ in catalogue if kind == "index"}
    totals = dict.fromkeys(KINDS, 0)
    for name, size in sizes.items():
        if any(name == index or name.startswith(f"{index}_") for index in full_text):
            totals["full-text indexes"] += size
        else:
            totals["indexes" if name in indexes else "rows"] += size
    return totals


def database_facts(db, most=10):
    size = db.stat().st_size
    counts = db_counts(db)
    with read_only(db) as conn:
        sizes = object_bytes(conn)
        by_kind = bytes_by_kind(conn, sizes)
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:most]
    return {
        "bytes": size,
        "bytes_per_binary": size / max(counts["binaries"], 1),
        "counts": counts,
        "largest": largest,
        "by_kind": by_kind,
    }


def edge_objects(conn):
    """The tables and indexes that store dependency edges: every table with two or more foreign keys into
    specs (an edge joins two specs), the tables those refer to besides specs (the kinds of edges), and the
    indexes of all of them."""
    tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    references = {
        table: [row[2] for row in conn.execute("SELECT * FROM pragma_foreign_key_list(?)", (table,))]
        for table in tables
    }
    edges = {table for table, targets in references.items() if targets.count("specs") >= 2}
    kinds = {target for table in edges for target in references[table] if target != "specs"}
    chosen = edges | kinds
    indexes = [
        name
        for name, table in conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'")
        if table in chosen
    ]
    return sorted(chosen) + sorted(indexes)


def full_text_matches(db, fts_table, search):
    """What a search costs before any count: the rows of the full-text index it matches, listed by SQLite
    with no time limit (a count of its binaries must read at least these). {search, table, rows, ms}: ms the median
    of 3; search, as given."""
    sql = f"SELECT count(*) FROM [{fts_table}] WHERE [{fts_table}] MATCH ?"
    with read_only(db) as conn:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            (rows,) = conn.execute(sql, [escape_fts(search)]).fetchone()
            times.append((time.perf_counter() - started) * 1000)
    return {"search": search, "table": fts_table, "rows": rows, "ms": statistics.median(times)}


def edge_storage(db):
    """Bytes of the objects that store dependency edges (edge_objects), per edge of the dependencies view."""
    with read_only(db) as conn:
        sizes = object_bytes(conn)
        objects = edge_objects(conn)
    edges = db_counts(db).get("dependencies", 0)
    stored = {name: sizes.get(name, 0) for name in objects}
    total = sum(stored.values())
    return {
        "edges": edges,
        "objects": stored,
        "bytes": total,
        "bytes_per_edge": total / edges if edges else None,
        "measured": bool(sizes),
    }


def tags_newest_first(conn):
    return [
        name
        for (name,) in conn.execute(
            "SELECT name FROM tags WHERE EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id) ORDER BY sort_order"
        )
    ]


def realistic_parameters(db):
    """What a user would fill in: the newest tag, its package with the most binaries, and that package's
    newest binary (its version, os, target as the host, compiler, a variant, a stack, a hash prefix)."""
    with read_only(db) as conn:
        tags = tags_newest_first(conn)
        (package,) = conn.execute(
            "SELECT package FROM binaries WHERE tag = ? GROUP BY package ORDER BY count(*) DESC, package LIMIT 1",
            (tags[0],),
        ).fetchone()
        version, spec_hash, compiler, os_name, target, variants, stacks = conn.execute(
            "SELECT version, hash, compiler, os, target, variants, stacks FROM binaries WHERE tag = ? AND package = ?"
            " ORDER BY version_rank DESC, hash LIMIT 1",
            (tags[0], package),
        ).fetchone()
    return {
        "package": package,
        "version": version,
        "os": os_name,
        "target": target,
        "host": target,
        "compiler": compiler,
        "variant": preferred_variant(json.loads(variants)),
        "stack": next((stack for stack in json.loads(stacks) if stack != "root"), "root"),
        "tag": tags[0],
        "to_tag": tags[0],
        "from_tag": tags[1] if len(tags) > 1 else tags[0],
        "hash": spec_hash[:7],  # as people type it: spack install /abc1234
        "q": f"{package} {os_name}",
        "severity": "warning",
    }


def stack_and_os_pairs(db):
    """{label: (stack, os)}: the pair with the fewest binaries in the whole history (root left out), and the first
    pair that has none, as the build counted them (binaries_facet_pairs): asked of every tag with no narrowing,
    find_binaries reads every binary of the history for either."""
    with read_only(db) as conn:
        counted = {
            (stack, os_name): binaries
            for stack, os_name, binaries in conn.execute(
                "SELECT value, other_value, binaries FROM binaries_facet_pairs WHERE facet = 'stacks' AND other = 'os'"
            )
        }
        stacks = [row[0] for row in conn.execute("SELECT name FROM stacks WHERE name <> 'root' ORDER BY name")]
        oss = [row[0] for row in conn.execute("SELECT name FROM oss ORDER BY name")]
    pairs = {}
    counted_pairs = [(binaries, pair) for pair, binaries in counted.items() if pair[0] != "root"]
    if counted_pairs:
        pairs["the stack and os with the fewest binaries"] = min(counted_pairs)[1]
    absent = next(((stack, os_name) for stack in stacks for os_name in oss if (stack, os_name) not in counted), None)
    if absent:
        pairs["a stack and os with no binary"] = absent
    return pairs


def preferred_variant(variants):
    """A '+feature' variant when the binary has one: what people filter on most."""
    return next((v for v in variants if v.startswith("+")), variants[0] if variants else "")


def most_depended_on(db, packages=3):
    """The packages with the most dependency edges pointing at them (of the whole history), and the external
    with the most: [(package, edges)], (external, edges), and the seconds it took to count them."""
    started = time.monotonic()
    with read_only(db) as conn:
        counted = conn.execute(
            "SELECT dependency, external, count(*) FROM dependencies GROUP BY dependency, external"
        ).fetchall()
    built = sorted(((n, name) for name, external, n in counted if not external), reverse=True)
    externals = sorted(((n, name) for name, external, n in counted if external), reverse=True)
    return (
        [(name, n) for n, name in built[:packages]],
        (externals[0][1], externals[0][0]) if externals else None,
        time.monotonic() - started,
    )


def linked(deptypes):
    """Whether an edge is followed by a dependency tree (link or run), whatever the text of deptypes."""
    return "link" in deptypes or "run" in deptypes


def tag_edges(conn, tag):
    """{hash: [dependency hash]} of the link and run edges reachable from the tag's binaries."""
    pending = [h for (h,) in conn.execute("SELECT hash FROM binaries WHERE tag = ?", (tag,))]
    edges = {}
    while pending:
        batch, pending = pending[:BATCH], pending[BATCH:]
        for spec_hash in batch:
            edges.setdefault(spec_hash, [])
        rows = conn.execute(
            "SELECT hash, dependency_hash, deptypes FROM dependencies"
            " WHERE spec_id IN (SELECT specs.id FROM json_each(?) CROSS JOIN specs ON specs.hash = json_each.value)",
            (json.dumps(batch),),
        )
        for spec_hash, dependency, deptypes in rows:
            if linked(deptypes):
                edges[spec_hash].append(dependency)
                if dependency not in edges:
                    edges[dependency] = []
                    pending.append(dependency)
    return edges


def tree_size(edges, root):
    seen, pending = {root}, [root]
    while pending:
        for dependency in edges[pending.pop()]:
            if dependency not in seen:
                seen.add(dependency)
                pending.append(dependency)
    return len(seen)


def largest_tree(db):
    """The binary of the newest tag with the largest dependency tree (itself and what it links and runs
    with, transitively), its tree's size, and the seconds it took to find. The TREE_CANDIDATES binaries
    with the most paths down their tree are counted exactly."""
    started = time.monotonic()
    with read_only(db) as conn:
        tag = tags_newest_first(conn)[0]
        edges = tag_edges(conn, tag)
        binaries = {h for (h,) in conn.execute("SELECT hash FROM binaries WHERE tag = ?", (tag,))}
    paths = {}
    for spec_hash in topological(edges):
        paths[spec_hash] = 1 + sum(paths[dependency] for dependency in edges[spec_hash])
    candidates = sorted(binaries, key=lambda h: (-paths[h], h))[:TREE_CANDIDATES]
    size, spec_hash = max((tree_size(edges, h), h) for h in candidates)
    return {"tag": tag, "hash": spec_hash, "tree_size": size, "seconds": time.monotonic() - started}


def topological(edges):
    """The hashes of edges, each after all it depends on."""
    waiting = {spec_hash: len(dependencies) for spec_hash, dependencies in edges.items()}
    dependents = collections.defaultdict(list)
    for spec_hash, dependencies in edges.items():
        for dependency in dependencies:
            dependents[dependency].append(spec_hash)
    ready = [spec_hash for spec_hash, n in waiting.items() if n == 0]
    while ready:
        spec_hash = ready.pop()
        yield spec_hash
        for dependent in dependents[spec_hash]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
