"""Sorting offered only where it answers in time, whatever the database's size.

Datasette lets a table or view be sorted by any of its columns: each column's heading links to the sort, and
?_sort= and ?_sort_desc= take any column. Where no index gives the column's order, SQLite reads and sorts every
row before it can show the first: over a history's millions of binaries that runs out of time, and the
heading's link answers with an error (the spread history: 14 of the binaries view's 16 sort links).

At start-up the plugin looks at each table and view of our databases with more than SORT_ANY_COLUMN_UP_TO rows,
and lets it be sorted (its metadata's sortable_columns) by the columns whose sort SQLite's plan reads in an
index's order, either way, and by the column its metadata sorts it by; smaller ones keep every column. A sort
it leaves out is answered at once, saying which columns the page can be sorted by (errors.py).
"""

import sqlite3

# A sort of this many rows takes a small part of a page's time, even in a view that reads JSON for each row
# (page_stack_counts: about 5 µs a row).
SORT_ANY_COLUMN_UP_TO = 10_000


async def columns_sorted_by_an_index(db, table_metadata):
    """{table or view: [the columns it may be sorted by]} of db's tables and views too big to sort by any column;
    {} when db has no stored row counts. table_metadata(name): that table's metadata, for its own sort."""

    def find(conn):
        try:
            counts = dict(conn.execute("SELECT name, count FROM row_counts"))
        except sqlite3.Error:
            return {}
        largest = max(counts.values(), default=0)
        sortable = {}
        for name, kind in conn.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')"):
            # A view whose rows were not counted is taken to be as big as the biggest table it may read.
            if counts.get(name, largest if kind == "view" else 0) > SORT_ANY_COLUMN_UP_TO:
                sortable[name] = _sortable_columns(conn, name, table_metadata(name))
        return sortable

    return await db.execute_fn(find)


def _sortable_columns(conn, name, metadata):
    columns = [row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (name,))]
    own = {metadata.get("sort"), metadata.get("sort_desc")} - {None}
    return [column for column in columns if column in own or _read_in_order(conn, name, column)]


def _read_in_order(conn, name, column):
    """Whether SQLite reads the rows of name in column's order, either way, as Datasette's first page asks."""
    for direction in ("", " desc"):
        plan = conn.execute(f'EXPLAIN QUERY PLAN SELECT * FROM "{name}" ORDER BY "{column}"{direction} LIMIT 101')
        if any("TEMP B-TREE" in step and "ORDER BY" in step for *_, step in plan):
            return False
    return True
