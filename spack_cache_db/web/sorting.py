"""Sorting offered only where it answers in time, whatever the database's size.

Datasette lets a table or view be sorted by any of its columns: each column's heading links to the sort, and
?_sort= and ?_sort_desc= take any column. Where no index gives the column's order, SQLite reads and sorts every
row before it can show the first: over a history's millions of binaries that runs out of time, and the
heading's link answers with an error (the spread history: 14 of the binaries view's 16 sort links).

At start-up the plugin looks at each table and view of our databases with more than SORT_ANY_COLUMN_UP_TO rows,
and lets it be sorted (its metadata's sortable_columns) by the columns whose sort SQLite's plan reads in an
index's order, either way, and by the column its metadata sorts it by; smaller ones keep every column. A sort
it leaves out is answered at once, saying which columns the page can be sorted by (errors.py).

A searched page reads its rows in the full-text index's order (search.py), so any sort of it reads every match
first: a broad search of the spread history (ubuntu22.04, 1.5 million listings) ran out of time sorted by any
column. Such a page counts its matches first, up to SORT_ANY_COLUMN_UP_TO: beyond, its headings are no links
(templates/_table.html) and a sort of it is answered at once, saying how to narrow it.
"""

import sqlite3

from datasette.database import QueryInterrupted
from datasette.filters import FilterArguments, Filters, search_filters
from datasette.utils import escape_sqlite

from spack_cache_db.web import counts, metadata, search
from spack_cache_db.web.errors import BadArgument

# A sort of this many rows takes a small part of a page's time, even in a view that reads JSON for each row
# (page_stack_counts: about 5 µs a row).
SORT_ANY_COLUMN_UP_TO = 10_000
# The time a searched page may take to count its matches: counting SORT_ANY_COLUMN_UP_TO rows of a broad
# search took 9-12 ms in the spread history. A search whose rows come slower than this (a broad search that a
# filter narrows: each match is checked in turn) is taken to be too broad to sort.
COUNT_MATCHES_FOR_MS = 100


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


async def search_too_broad_to_sort(datasette, database, table, request):
    """Whether the page searches the table's full-text index (?_search=) for more rows, with its filters, than
    a sort answers in time: more than SORT_ANY_COLUMN_UP_TO, or too many to count in COUNT_MATCHES_FOR_MS (or
    in the time its own count had, once the page has counted them: counts.py)."""
    if database not in metadata.ours(datasette) or not request.args.get("_search"):
        return False
    if not datasette.table_metadata(database, table).get("fts_table"):
        return False
    if counts.PAGE_ROWS in request.scope:
        rows = request.scope[counts.PAGE_ROWS]
        return rows is None or rows > SORT_ANY_COLUMN_UP_TO
    page = counts.combined(
        await search_filters(request, database, table, datasette)(),
        FilterArguments(*Filters(sorted(counts.filter_pairs(request))).build_where_clauses(table)),
        await search.filters_in_index(request, database, table, datasette),
    )
    # Written as Datasette writes a searched page's statement, so that its matches lead here too (search.py).
    sql = (
        f"select count(*) from (select 1 from {escape_sqlite(table)} where {' and '.join(page.where_clauses)}"
        f" limit {SORT_ANY_COLUMN_UP_TO + 1})"
    )
    try:
        result = await datasette.get_database(database).execute(
            sql, page.params, custom_time_limit=COUNT_MATCHES_FOR_MS
        )
    except QueryInterrupted:
        return True
    except sqlite3.Error:  # what the page asks cannot be asked (a raw search that is no query): it says so itself
        return False
    return result.single_value() > SORT_ANY_COLUMN_UP_TO


async def refuse_sorting_a_broad_search(datasette, database, table, request):
    """Raise BadArgument for a sort of a search too broad to sort in time."""
    key = next((key for key in ("_sort", "_sort_desc") if key in request.args), None)
    if key and await search_too_broad_to_sort(datasette, database, table, request):
        raise BadArgument(
            f"{key}: this search matches more than {SORT_ANY_COLUMN_UP_TO:,} rows of {table}, too many to sort in"
            " time; narrow it (a filter or a facet, such as a tag or an os) to sort it"
        )
