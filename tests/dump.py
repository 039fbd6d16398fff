"""Every row of a database as a user can see it, comparable between two builds: integer keys (which two builds
give out differently) are replaced by the rows they point at, through the foreign keys the schema declares
and the references a kept count copies (copied_references)."""

import sqlite3

from spack_cache_db.db import schema

# What depends on how a file was written rather than on what it holds: ANALYZE's statistics, the segments of
# a full-text index built in one go or in steps, and when it was built.
_WRITING = ("sqlite_",)
_BUILT_AT = ("built_at",)


def check_full_text(conn):
    """Raise sqlite3.DatabaseError unless each full-text index holds exactly the rows of its table, as they are
    now. FTS5's 'integrity-check' alone only checks an index against itself: one missing a row of its table
    passes. With rank 1, it also reads the table the index is over."""
    for index in schema.FULL_TEXT:
        conn.execute(f"INSERT INTO {index} ({index}, rank) VALUES ('integrity-check', 1)")


def every_row(db):
    """{table: sorted rows}, each row a tuple of (column, value) with keys resolved. The full-text indexes are not
    among them (their segments depend on how they were written): each is checked against its table instead."""
    writable = sqlite3.connect(db)  # FTS5's check is an INSERT, though it writes nothing
    try:
        check_full_text(writable)
    finally:
        writable.close()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return _Dump(conn).tables()
    finally:
        conn.close()


class _Dump:
    def __init__(self, conn):
        self.conn, self.resolved = conn, {}
        master = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
        virtual = [name for name, sql in master if sql.upper().startswith("CREATE VIRTUAL")]
        self.skipped = {
            name
            for name, _ in master
            if name.startswith(_WRITING) or any(name == v or name.startswith(v + "_") for v in virtual)
        }
        self.names = [name for name, _ in master if name not in self.skipped]
        self.keys = {name: self._foreign_keys(name) for name in self.names}

    def _foreign_keys(self, table):
        declared = {row[3]: (row[2], row[4]) for row in self.conn.execute(f"PRAGMA foreign_key_list({table})")}
        copied = {
            column: (r.parent, r.parent_column) for (kept, column), r in COPIED_REFERENCES.items() if kept == table
        }
        return declared | copied

    def tables(self):
        return {name: sorted(self._rows(name), key=repr) for name in self.names}

    def _rows(self, table):
        cursor = self.conn.execute(f"SELECT * FROM {table}")
        columns = [description[0] for description in cursor.description]
        for values in cursor.fetchall():
            row = dict(zip(columns, values, strict=True))
            if table == "build_info" and row["key"] in _BUILT_AT:
                continue
            if table == "row_counts" and row["name"] in self.skipped:
                continue
            yield self._canonical(table, row)

    def _canonical(self, table, row):
        keys = self.keys[table]
        return tuple(
            (column, self._pointed_at(*keys[column], value) if column in keys and value is not None else value)
            for column, value in row.items()
            if column != "id"
        )

    def _pointed_at(self, table, column, value):
        found = self.resolved.get((table, column, value))
        if found is None:
            cursor = self.conn.execute(f"SELECT * FROM {table} WHERE {column} = ?", (value,))
            columns = [description[0] for description in cursor.description]
            found = self._canonical(table, dict(zip(columns, cursor.fetchone(), strict=True)))
            self.resolved[(table, column, value)] = found
        return found


def copied_references():
    """{(count table, column): the reference whose value a kept count copies into a key column} (a listing's
    configuration's os_id in listing_binaries): an id that no foreign key of its own declares."""
    by_column = {f"{r.child}.{r.column}": r for r in schema.REFERENCES}
    return {
        (kept.table, column): by_column[key]
        for kept in schema.KEPT_COUNTS
        for column, key in zip(schema.COLUMNS[kept.table], kept.key, strict=False)
        if key in by_column
    }


COPIED_REFERENCES = copied_references()
