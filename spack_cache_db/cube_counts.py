"""Counts of a big view's filtered pages from its cube (<view>_cube, counted at build time).

Datasette counts a table page's rows with `select count(*) from <view> where <filters>`: for the binaries of
a whole history filtered by a target or a stack, millions of rows through a dozen joins, past its time
limit, so the page shows no count. When a page of an immutable database is filtered only by exact values
of the cube's columns (and by a value an array column contains), the cube has the answer: filters_from_request
works it out for the request, and the database's execute answers that one count query with it.
"""

import contextvars
import urllib.parse

from datasette.database import Results
from datasette.utils import escape_sqlite

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
