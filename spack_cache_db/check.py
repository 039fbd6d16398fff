"""Check a built database: integrity, foreign keys, schema version and the problems it recorded."""

import sqlite3
from dataclasses import dataclass, field

from .files import database_uri, read_start
from .records import InputError
from .schema import SCHEMA_VERSION


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
        _check_rows(conn, path, integrity, report)
    except sqlite3.DatabaseError as error:
        report.fail(f"{path}: expected a database built by spack-cache-db ({error})")
    finally:
        conn.close()
    return report


def _check_rows(conn, path, integrity, report):
    if integrity == ["ok"]:
        report.good("integrity_check")
    else:
        report.fail(f"integrity_check: {'; '.join(integrity[:5])}")
    broken = conn.execute("PRAGMA foreign_key_check").fetchall()
    if broken:
        report.fail(f"foreign_key_check: {len(broken)} row(s) point at missing rows, e.g. {broken[:3]}")
    else:
        report.good("foreign_key_check")
    version = dict(conn.execute("SELECT key, value FROM build_info")).get("schema_version")
    if version == str(SCHEMA_VERSION):
        report.good(f"schema version {version}")
    else:
        report.fail(f"schema version: expected {SCHEMA_VERSION}, found {version}")
    for severity, number in conn.execute("SELECT severity, count(*) FROM problems GROUP BY severity ORDER BY severity"):
        line = f"{number} {severity}(s) recorded in problems"
        if severity == "error":
            report.fail(line + " (pages rejected with --keep-going)")
        else:
            report.good(line)
    for path_, field_name, message, severity in conn.execute(
        "SELECT path, field, message, severity FROM problems ORDER BY severity, path LIMIT 10"
    ):
        report.lines.append(f"     {severity}: {path_}: {field_name}: {message}")
