"""Check a built database: integrity, foreign keys, schema version and the problems it recorded."""

import sqlite3
from dataclasses import dataclass, field

import sqlite_utils

from spack_cache_db.db.connection import database_uri
from spack_cache_db.db.schema import (
    COLUMNS,
    NAMED_INDEXES,
    SCHEMA_DIGEST,
    SCHEMA_VERSION,
    named_indexes,
    of_this_schema,
)
from spack_cache_db.read.files import read_start
from spack_cache_db.records import InputError


@dataclass
class Report:
    ok: bool = True
    lines: list = field(default_factory=list)

    def fail(self, line):
        self.ok = False
        self.lines.append(f"FAIL {line}")

    def good(self, line):
        self.lines.append(f"ok   {line}")


def check(path):
    report = Report()
    try:
        read_start(path, 0)  # a FIFO would block SQLite's open
    except InputError as error:
        report.fail(f"{path}: not a readable SQLite database ({error.expected})")
        return report
    try:
        conn = sqlite3.connect(database_uri(path), uri=True)
        integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as error:
        report.fail(f"{path}: not a readable SQLite database ({error})")
        return report
    try:
        _check_rows(sqlite_utils.Database(conn), path, integrity, report)
    except sqlite3.DatabaseError as error:
        report.fail(f"{path}: expected a database built by spack-cache-db ({error})")
    finally:
        conn.close()
    return report


def _check_rows(db, path, integrity, report):
    if integrity == ["ok"]:
        report.good("integrity_check")
    else:
        report.fail(f"integrity_check: {'; '.join(integrity[:5])}")
    broken = db.execute("PRAGMA foreign_key_check").fetchall()
    if broken:
        report.fail(f"foreign_key_check: {len(broken)} row(s) point at missing rows, e.g. {broken[:3]}")
    else:
        report.good("foreign_key_check")
    built = {row["key"]: row["value"] for row in db["build_info"].rows}
    if of_this_schema(built):
        report.good(f"schema version {SCHEMA_VERSION} (digest {SCHEMA_DIGEST})")
    else:
        found = f"version {built.get('schema_version')} (digest {built.get('schema_digest')})"
        report.fail(f"schema: expected version {SCHEMA_VERSION} (digest {SCHEMA_DIGEST}), found {found}")
    _check_tables(db, report)
    for row in db.query("SELECT severity, count(*) AS n FROM problems GROUP BY severity ORDER BY severity"):
        line = f"{row['n']} {row['severity']}(s) recorded in problems"
        if row["severity"] == "error":
            report.fail(line + " (inputs rejected with --keep-going)")
        else:
            report.good(line)
    for row in db.query("SELECT path, field, message, severity FROM problems ORDER BY severity, path LIMIT 10"):
        report.lines.append(f"     {row['severity']}: {row['path']}: {row['field']}: {row['message']}")


def _check_tables(db, report):
    """Every table schema.py declares is there with its columns, in order, and with its indexes."""
    found = {name: tuple(column.name for column in db[name].columns) for name in db.table_names()}
    different = [name for name, columns in COLUMNS.items() if found.get(name) != columns]
    if different:
        report.fail(f"tables: expected {', '.join(different)} as schema.py declares them")
    else:
        report.good(f"{len(COLUMNS)} tables as schema.py declares them")
    different = [
        table
        for table, indexes in NAMED_INDEXES.items()
        if (named_indexes(db[table]) if table in found else {}) != indexes
    ]
    if different:
        report.fail(f"indexes: expected those of {', '.join(different)} as schema.py declares them")
    else:
        report.good(f"{sum(map(len, NAMED_INDEXES.values()))} indexes as schema.py declares them")
