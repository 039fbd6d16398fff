"""Row counts of our databases from what the build counted: whole tables and views from row_counts, and a
big view's filtered pages from its cube (<view>_cube).

Datasette counts a table page's rows with `select count(*) from <view> where <filters>`: for the binaries of
a whole history filtered by a target or a stack, millions of rows through a dozen joins, past its time
limit, so the page shows no count. When a page of an immutable database is filtered only by exact values
of the cube's columns (and by a value an array column contains), the cube has the answer: filters_from_request
works it out for the request, and the database's execute answers that one count query with it.
"""

import asyncio
import contextvars
import re
import sqlite3
import urllib.parse
from pathlib import Path

from datasette.database import Results
from datasette.filters import FilterArguments, Filters
from datasette.inspect import inspect_hash
from datasette.utils import escape_sqlite

from spack_cache_db.web.metadata import PLUGIN

# Request arguments that change how a page looks, not which rows it has.
NOT_FILTERS = {
    "_size", "_sort", "_sort_desc", "_next", "_nocount", "_nofacet", "_nosuggest", "_trace", "_shape",
    "_labels", "_nolabels", "_json", "_json_infinity", "_col", "_nocol", "_timelimit", "_ttl", "_context",
}  # fmt: skip

# (database, table, rows): the count of the page being answered, when its cube knew it.
_COUNTED = contextvars.ContextVar("spack_cache_db_cube_count", default=None)


def column_and_lookup(key):
    """A filter argument as Datasette reads it: os__not is column os, lookup not; os alone is exact."""
    column, _, lookup = key.rpartition("__")
    return (column, lookup) if column else (key, "exact")


def cube_filters(query_string):
    """[(column, "=" or "contains", value)] for a page filtered only by exact values (and, on an array column,
    by a value it contains); None for any other filter, a search or SQL."""
    filters = []
    for key, value in urllib.parse.parse_qsl(query_string, keep_blank_values=True):
        if key.startswith("_"):
            if key in NOT_FILTERS or key.startswith("_facet"):
                continue
            return None
        column, lookup = column_and_lookup(key)
        if lookup == "exact":
            filters.append((column, "=", value))
        elif lookup == "arraycontains":
            filters.append((column, "contains", value))
        else:
            return None
    return filters


def cube_where(filters):
    """The WHERE clause (and its parameters) that selects the cube rows of these filters."""
    where = " and ".join(
        f"{escape_sqlite(column)} = ?"
        if operator == "="
        else f"exists (select 1 from json_each({escape_sqlite(column)}) where value = ?)"
        for column, operator, _ in filters
    )
    return where or "1", [value for _, _, value in filters]


async def cube_columns(db, table):
    """The columns of table's cube, or None when db may change or has no cube for table."""
    cube = f"{table}_cube"
    if db.is_mutable or not await db.table_exists(cube):
        return None
    return set(await db.table_columns(cube)) - {"count"}


async def remember_count(request, database, table, datasette):
    """Work out a page's row count from the cube when its filters allow, for answer_counts to give."""
    filters = cube_filters(request.query_string)
    if filters is None:
        return
    db = datasette.get_database(database)
    columns = await cube_columns(db, table)
    if columns is None or not {column for column, _, _ in filters} <= columns:
        return
    where, params = cube_where(filters)
    counted = await db.execute(
        f"select coalesce(sum(count), 0) from {escape_sqlite(f'{table}_cube')} where {where}", params
    )
    _COUNTED.set((database, table, counted.rows[0][0]))


def answer_counts(db, database):
    """Make db answer the count query of a page whose count remember_count worked out, without running it."""
    execute = db.execute

    async def execute_or_answer(sql, params=None, *args, **kwargs):
        counted = _COUNTED.get()
        if counted is not None and counted[0] == database:
            _, table, rows = counted
            if sql.startswith(f"select count(*) from {escape_sqlite(table)} "):
                _COUNTED.set(None)
                return Results([(rows,)], False, [("count(*)",)])
        return await execute(sql, params, *args, **kwargs)

    db.execute = execute_or_answer


NARROWING = "narrowing_"  # the prefix of the parameters filters_from_request adds


def filters_from_request(request, database, table, datasette):
    """The page's row count, from the view's cube when the filters allow (remember_count); and a filter on columns
    that a row's key determines also selects the keys, from a smaller table or view with one row per key that
    has the same columns (narrow_by: key, table, table_key, columns): the view's rows then come through its
    index on the key instead of a scan of every row. The clause never changes which rows match."""

    async def count_and_narrow():
        await remember_count(request, database, table, datasette)
        return _narrowing(request, database, table, datasette)

    # Datasette calls it when it gets to it; a coroutine made here would be left unawaited (a warning in the
    # server's log) when another filter raises first, as a bad _through does.
    return count_and_narrow


def _narrowing(request, database, table, datasette):
    narrow_by = (datasette.plugin_config(PLUGIN, database=database, table=table, fallback=False) or {}).get("narrow_by")
    if not narrow_by:
        return None
    pairs = [
        (key, value)
        for key in request.args
        if not (key.startswith("_") and "__" not in key) and column_and_lookup(key)[0] in narrow_by["columns"]
        for value in request.args.getlist(key)
    ]
    where, params = Filters(sorted(pairs)).build_where_clauses(narrow_by["table"])
    if not where:
        return None
    # Datasette's own filters already use :p0, :p1...
    where = [re.sub(r":(p\d+)\b", rf":{NARROWING}\1", clause) for clause in where]
    key, rows, rows_key = (escape_sqlite(narrow_by[name]) for name in ("key", "table", "table_key"))
    return FilterArguments(
        [f"{key} in (select {rows_key} from {rows} where {' and '.join(where)})"],
        {f"{NARROWING}{name}": value for name, value in params.items()},
    )


async def use_stored_row_counts(datasette, name, db):
    counts = await _stored_row_counts(db)
    if counts is None:
        return
    path = Path(db.path)
    # What `datasette inspect` would have written for this file, counts included. The views' counts are
    # there for the table page, which reads a whole view's count from it.
    datasette.inspect_data = {
        **(datasette.inspect_data or {}),
        name: {
            "hash": await asyncio.to_thread(inspect_hash, path),
            "size": path.stat().st_size,
            "file": path.name,
            "tables": {table: {"count": count} for table, count, _ in counts},
        },
    }
    # The database and index pages take every name in their table counts for a table (and look up its
    # foreign keys): Datasette fills these counts from inspect_data, so they get the tables only.
    db._cached_table_counts = {table: count for table, count, is_table in counts if is_table}


async def _stored_row_counts(db):
    """[(name, rows, whether it is a table)] as the build stored them, or None when they cannot be read."""
    try:
        counted = await db.execute(
            "SELECT name, count, name IN (SELECT name FROM sqlite_master WHERE type = 'table') FROM row_counts"
        )
    except sqlite3.Error:
        return None
    return [tuple(row) for row in counted.rows]
