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

A filter can turn an ordered read into a sort: binary_stacks unfiltered reads packages in order, but with
stack=root SQLite starts from the stack and sorts every row it finds. A sort whose plan sorts more than
SORT_FILTERED_UP_TO filtered rows is answered at once too, saying how to narrow them.
"""

import sqlite3

from datasette.database import QueryInterrupted
from datasette.filters import FilterArguments, Filters, search_filters
from datasette.utils import escape_sqlite

from spack_cache_db.web import counts, metadata, search
from spack_cache_db.web.errors import BadArgument

# A sort of this many rows takes a small part of a page's time, even in a view that reads JSON for each row
# (about 5 µs a row).
SORT_ANY_COLUMN_UP_TO = 10_000
# The rows a page filtered by its columns may have SQLite sort, where its plan sorts them: sorting the usual
# history's binary_stacks by package took 262 ms for hep's 145,182 rows and 765 ms for e4s's 729,188.
SORT_FILTERED_UP_TO = 200_000
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
        if _sorts(plan):
            return False
    return True


def _sorts(plan):
    """Whether a query plan sorts rows it has read (rather than reading them in order)."""
    return any("TEMP B-TREE" in step and "ORDER BY" in step for *_, step in plan)


async def _more_rows_than(up_to, db, table, page):
    """Whether a page's rows (page: FilterArguments) are more than up_to, or too many to count in
    COUNT_MATCHES_FOR_MS."""
    # Written as Datasette writes a searched page's statement, so that its matches lead here too (search.py).
    sql = (
        f"select count(*) from (select 1 from {escape_sqlite(table)} where {' and '.join(page.where_clauses)}"
        f" limit {up_to + 1})"
    )
    try:
        result = await db.execute(sql, page.params, custom_time_limit=COUNT_MATCHES_FOR_MS)
    except QueryInterrupted:
        return True
    except sqlite3.Error:  # what the page asks cannot be asked (a raw search that is no query): it says so itself
        return False
    return result.single_value() > up_to


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
    return await _more_rows_than(SORT_ANY_COLUMN_UP_TO, datasette.get_database(database), table, page)


async def filters_leave_too_many_to_sort(datasette, database, table, request, column, descending):
    """Whether a page filtered by its columns (not searched) would have SQLite sort more rows than
    SORT_FILTERED_UP_TO by column (as the count tables count them, or counted up to that): a filter may lead
    SQLite's plan to start from the filter's index and sort all it finds there, where the page unfiltered reads
    the column's index in order (binary_stacks?stack=root sorted by package: every binary of the history, past
    the time limit)."""
    pairs = counts.filter_pairs(request)
    if database not in metadata.ours(datasette) or request.args.get("_search") or not pairs:
        return False
    page = FilterArguments(*Filters(sorted(pairs)).build_where_clauses(table))
    db = datasette.get_database(database)
    sql = (
        f"explain query plan select * from {escape_sqlite(table)} where {' and '.join(page.where_clauses)}"
        f" order by {escape_sqlite(column)}{' desc' if descending else ''} limit 101"
    )
    try:
        plan = (await db.execute(sql, page.params)).rows
    except sqlite3.Error:  # a column or a filter the page cannot have: Datasette says so itself
        return False
    if not _sorts(plan):
        return False
    rows = await counts.counted_rows(datasette, database, table, request)
    return (
        rows > SORT_FILTERED_UP_TO if rows is not None else await _more_rows_than(SORT_FILTERED_UP_TO, db, table, page)
    )


async def refuse_sorting_too_many_rows(datasette, database, table, request):
    """Raise BadArgument for a sort of a search too broad to sort in time, or of a page whose filters leave too
    many rows for SQLite to sort."""
    key = next((key for key in ("_sort", "_sort_desc") if key in request.args), None)
    if key and await search_too_broad_to_sort(datasette, database, table, request):
        raise BadArgument(
            f"{key}: this search matches more than {SORT_ANY_COLUMN_UP_TO:,} rows of {table}, too many to sort in"
            " time; narrow it (a filter or a facet, such as a tag or an os) to sort it"
        )
    if key and await filters_leave_too_many_to_sort(
        datasette, database, table, request, request.args[key], key == "_sort_desc"
    ):
        raise BadArgument(
            f"{key}: these filters leave more than {SORT_FILTERED_UP_TO:,} rows of {table} to sort by"
            f" {request.args[key]}, too many to sort in time; narrow them (another filter or a facet, such as a"
            " tag) to sort it"
        )
