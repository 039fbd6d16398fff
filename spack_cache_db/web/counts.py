"""Row counts and facet counts of our databases from what the build counted: whole tables and views from
row_counts, a big view's filtered pages from its count tables, which metadata names (counted_by), and a
table's rows per value of a column from the counts the build keeps by it (schema.KEPT_COUNTS): a table page
filtered by that column, and the counts of a row page's links from other tables.

Datasette counts a table page's rows with `select count(*) from <view> where <filters>`: for the binaries of
a whole history filtered by a target or a stack, millions of rows through a dozen joins, past its time
limit. When a page of an immutable database is filtered only by a few exact values of its facet columns (or
values an array column contains), the count tables have the answer at a cost of about the values a facet
shows: filters_from_request works it out for the request, and the database's execute answers that one
count query with it. Any other count is counted live, within what is left of Datasette's SQL time limit
once a facet's time limit is kept for the rest of the page, and never less than a facet's (a count, like a
facet, is something a page can do without): a page whose count would take longer shows no count rather
than time out, and a live count that took longer than a facet may leaves the facets counted live out (they
read what it read). A page filtered by nothing but the columns of narrow_by and a search is counted on the table
with one row per row of the view (narrow_by's rows), without the view's joins, or from the rows per key the
build counted (narrow_by's per_key), at a cost of the keys it matches rather than of its rows.

counted_by names either a cube (a table with a row per combination of the values of the facets, in count),
for a view whose combinations are few, or three tables: binaries per value of each facet (values), per pair
of values of two facets (pairs, each pair both ways; an array facet paired with itself counts the rows
that contain both values), and per pair of values per value of one facet, in the first column (per).
"""

import asyncio
import contextvars
import re
import sqlite3
import urllib.parse
import weakref
from pathlib import Path
from time import monotonic
from typing import NamedTuple

from datasette.database import Results
from datasette.filters import FilterArguments, Filters
from datasette.inspect import inspect_hash
from datasette.utils import escape_sqlite

from spack_cache_db.db import schema
from spack_cache_db.web.metadata import PLUGIN

# Request arguments that change how a page looks, not which rows it has.
NOT_FILTERS = {
    "_size", "_sort", "_sort_desc", "_next", "_nocount", "_nofacet", "_nosuggest", "_trace", "_shape",
    "_labels", "_nolabels", "_json", "_json_infinity", "_col", "_nocol", "_timelimit", "_ttl", "_context",
}  # fmt: skip
COLUMN_FACET, ARRAY_FACET = "precounted", "precounted_array"  # the plugin's facet types (facets.py)
NARROWING = "narrowing_"  # the prefix of the parameters filters_from_request adds
# The parameter of a searched page's filters that the full-text index can check: a query of its columns' phrases
# (search.py adds it to the page's searches).
FILTERS_IN_INDEX = "spack_filters_in_index"


class Count(NamedTuple):
    """How the count query of the page being answered is answered: its rows when the build counted them,
    or else SQL that counts them (with the page's parameters and its own) within the time the page has left;
    when the request's filters were read, and the request's scope, where how long a live count took is kept."""

    database: str
    table: str
    started: float
    scope: dict
    rows: int | None = None
    sql: str | None = None
    params: dict | None = None
    searches_unnarrowed: bool = False  # sql checks every filter: the search need not check them too (search.py)


LIVE_COUNT_TOOK = "spack_cache_db.live_count_took"  # in a request's scope: its live count's seconds
PAGE_ROWS = "spack_cache_db.page_rows"  # in a request's scope: the rows its count gave, None if it ran out of time


_COUNTED = contextvars.ContextVar("spack_cache_db_count", default=None)
_TABLES = weakref.WeakKeyDictionary()  # a database that cannot change: the names of its tables and views


def column_and_lookup(key):
    """A filter argument as Datasette reads it: os__not is column os, lookup not; os alone is exact."""
    column, _, lookup = key.rpartition("__")
    return (column, lookup) if column else (key, "exact")


def _special(key):
    """Whether a request argument is one of Datasette's (_size, _search, _where...), not a column's filter."""
    return key.startswith("_") and "__" not in key


def filter_pairs(request, columns=None):
    """The page's filters as Datasette reads them, [(argument, value)], only those on these columns if given."""
    return [
        (key, value)
        for key in request.args
        if not _special(key) and (columns is None or column_and_lookup(key)[0] in columns)
        for value in request.args.getlist(key)
    ]


def combined(*arguments):
    """FilterArguments with the clauses and parameters of each of these that is not None; None if none is."""
    given = [each for each in arguments if each is not None]
    if not given:
        return None
    return FilterArguments(
        [clause for each in given for clause in each.where_clauses],
        {name: value for each in given for name, value in each.params.items()},
    )


def _shows_only(key):
    """Whether a special argument changes how a page looks, not which rows it has."""
    return key in NOT_FILTERS or key.startswith("_facet")


def facet_filters(query_string, facets):
    """[(facet, value)] of a page filtered only by exact values of facet columns and values their arrays
    contain (facets: {column: whether an array}); None for any other filter, a search or SQL."""
    selected = []
    for key, value in urllib.parse.parse_qsl(query_string, keep_blank_values=True):
        if _special(key):
            if _shows_only(key):
                continue
            return None
        column, lookup = column_and_lookup(key)
        if column not in facets or lookup != ("arraycontains" if facets[column] else "exact"):
            return None
        selected.append((column, value))
    return selected


def counted_facets(datasette, database, table):
    """{column: whether an array} of the facets metadata gives the table that the build counted."""
    configs = (datasette.table_metadata(database, table) or {}).get("facets") or []
    types = {COLUMN_FACET: False, ARRAY_FACET: True}
    return {
        config[kind]: is_array
        for config in configs
        if isinstance(config, dict)
        for kind, is_array in types.items()
        if kind in config
    }


class Cube:
    """A table with one row per combination of the values of some columns of the view (its own columns), and
    how many rows of the view have them (in its count column): it answers pages filtered by and faceted on
    these columns alone, at a cost of its rows that match. element_of: an array column of the view whose
    elements the cube counts one per row (a row per stack): a row of the view is in as many rows of the cube, so
    the cube answers a page filtered by exactly one element, or a facet of that column on a page filtered by
    none."""

    def __init__(self, cube, count, columns, element_of=None):
        self.tables, self.columns = {cube}, {column: column == element_of for column in columns}
        self.cube, self.count = escape_sqlite(cube), escape_sqlite(count)
        self.element_of = element_of

    def count_query(self, selected):
        if not selected or not _covers(self, selected) or self._elements(selected) not in (None, 1):
            return None
        where, params = self._where(selected)
        return f"select coalesce(sum({self.count}), 0) from {self.cube} where {where}", params

    def facet_query(self, selected, column):
        if not _covers(self, selected, column):
            return None
        if self._elements(selected) not in (None, 0 if column == self.element_of else 1):
            return None
        where, params = self._where(selected)
        return (
            f"select {escape_sqlite(column)} as value, sum({self.count}) as count from {self.cube} where {where}"
            " group by value order by count desc, value",
            params,
        )

    def _elements(self, selected):
        """How many elements of element_of these selections filter by; None for a cube without one."""
        if self.element_of is None:
            return None
        return sum(column == self.element_of for column, _ in selected)

    @staticmethod
    def _where(selected):
        return " and ".join(f"{escape_sqlite(column)} = ?" for column, _ in selected) or "1", [v for _, v in selected]


class FacetTables:
    """Rows per value of each facet (values), per pair of values (pairs) and per pair per value of one facet
    (per), for the facets columns names ({column: whether an array}): a count of a page filtered by one, two or
    (one of them per's) three values, and the facets of a page filtered by none, one, or per's and one, are
    rows read from one index, about as many as the values shown."""

    def __init__(self, values, pairs, per, per_facet, columns):
        self.tables, self.columns = {values, pairs, per}, columns
        self.values, self.pairs, self.per = (escape_sqlite(table) for table in (values, pairs, per))
        self.per_facet = per_facet

    def count_query(self, selected):
        if not _covers(self, selected):
            return None
        selected = sorted(set(selected))
        if len(selected) == 1:
            return f"select coalesce(sum(binaries), 0) from {self.values} where facet = ? and value = ?", selected[0]
        if len(selected) == 2:
            return (
                f"select coalesce(sum(binaries), 0) from {self.pairs}"
                " where facet = ? and value = ? and other = ? and other_value = ?",
                [*selected[0], *selected[1]],
            )
        per, others = self._split(selected)
        if per is not None and len(others) == 2:
            return (
                f"select coalesce(sum(binaries), 0) from {self.per}"
                f" where {escape_sqlite(self.per_facet)} = ? and facet = ? and value = ? and other = ? and other_value = ?",
                [per, *others[0], *others[1]],
            )
        return None

    def facet_query(self, selected, column):
        if not _covers(self, selected, column):
            return None
        selected = sorted(set(selected))
        order = " order by count desc, value"
        if not selected:
            return f"select value, binaries as count from {self.values} where facet = ?{order}", [column]
        if len(selected) == 1:
            return (
                f"select other_value as value, binaries as count from {self.pairs}"
                f" where facet = ? and value = ? and other = ?{order}",
                [*selected[0], column],
            )
        per, others = self._split(selected)
        if per is not None and len(others) == 1 and column != self.per_facet:
            return (
                f"select other_value as value, binaries as count from {self.per}"
                f" where {escape_sqlite(self.per_facet)} = ? and facet = ? and value = ? and other = ?{order}",
                [per, *others[0], column],
            )
        return None

    def _split(self, selected):
        """(the value of per's facet, the other selections), or (None, selected) unless exactly one is per's."""
        per = [value for facet, value in selected if facet == self.per_facet]
        if len(per) != 1:
            return None, selected
        return per[0], [(facet, value) for facet, value in selected if facet != self.per_facet]


def _covers(tables, selected, *columns):
    """Whether count tables count every column of these selections and these columns."""
    return {column for column, _ in selected} | set(columns) <= set(tables.columns)


async def unchanging_names(datasette, database):
    """The names of the tables and views of a database that cannot change (read once); an empty set for one
    that can: the counts the build took would not follow its changes."""
    db = datasette.get_database(database)
    if db.is_mutable:
        return frozenset()
    if db not in _TABLES:
        _TABLES[db] = frozenset({*await db.table_names(), *await db.view_names()})
    return _TABLES[db]


async def count_tables(datasette, database, table):
    """The count tables of a table page (Cube or FacetTables, in the order metadata's counted_by names them)
    that the database has, when it cannot change: none when it can (a database built before a count table
    was, counted live)."""
    names = await unchanging_names(datasette, database)
    facets = counted_facets(datasette, database, table)
    counted = [
        Cube(**tables) if "cube" in tables else FacetTables(**tables, columns=facets)
        for tables in _plugin_config(datasette, database, table).get("counted_by") or []
    ]
    counted += [Cube(kept, count, columns) for kept, count, columns in _KEPT_BY_COLUMNS.get(table, ())]
    return [tables for tables in counted if tables.tables <= names]


def _kept_by_columns():
    """{table: [(a count the build keeps of its rows, its count column, the table's columns it is keyed by)]}:
    the key columns that are the counted rows' own (edges by kind_id; binaries by listing_id), not worked out
    from them (edges by their dependency's version)."""
    kept_by = {}
    for kept in schema.KEPT_COUNTS:
        columns = [
            column
            for column, key in zip(schema.COLUMNS[kept.table], kept.key, strict=False)
            if key == f"{{row}}.{column}"
        ]
        if columns:
            kept_by.setdefault(kept.rows, []).append((kept.table, kept.count_column, columns))
    return kept_by


_KEPT_BY_COLUMNS = _kept_by_columns()


def countable(tables):
    """{column: whether an array} of every column some count tables count."""
    return {column: is_array for counted in tables for column, is_array in counted.columns.items()}


def count_query(tables, selected):
    """SQL and parameters counting the rows of a page with these selections, from the first count tables that
    answer it cheaply; None when none does."""
    return next(filter(None, (counted.count_query(selected) for counted in tables)), None)


def facet_query(tables, selected, column, is_array):
    """SQL and parameters of a facet's (value, count) rows in Datasette's order, from the first count tables
    that answer it cheaply; None when none does. A column filtered by one value shows that value and the
    page's rows."""
    if not is_array and column in dict(selected):
        counted = count_query(tables, selected)
        if counted is None:
            return None
        sql, params = counted
        return f"with counted(rows) as ({sql}) select ? as value, rows as count from counted where rows > 0", [
            *params,
            dict(selected)[column],
        ]
    return next(filter(None, (counted.facet_query(selected, column) for counted in tables)), None)


async def remember_count(request, database, table, datasette):
    """Work out how the page's count query is answered (a Count), for answer_counts to give."""
    if datasette.get_database(database).is_mutable:
        return
    started = monotonic()
    rows = await counted_rows(datasette, database, table, request)
    if rows is not None:
        _COUNTED.set(Count(database, table, started, request.scope, rows))
        return
    names = await unchanging_names(datasette, database)
    through_rows = _count_through_rows(request, database, table, datasette, names)
    _COUNTED.set(Count(database, table, started, request.scope, None, *through_rows))


async def counted_rows(datasette, database, table, request):
    """The rows of a page of a database that cannot change, as the count tables count them; None when they
    cannot (its filters are not a few exact values of facet columns)."""
    tables = await count_tables(datasette, database, table)
    return await _stored_count(datasette, database, tables, facet_filters(request.query_string, countable(tables)))


async def _stored_count(datasette, database, tables, selected):
    """The rows of a page with these selections as the count tables count them; None when they cannot."""
    counted = None if selected is None else count_query(tables, selected)
    if counted is None:
        return None
    return (await datasette.get_database(database).execute(*counted)).rows[0][0]


def _count_through_rows(request, database, table, datasette, names):
    """(SQL, its parameters but Datasette's, whether it checks every filter itself) counting the page's rows on
    narrow_by's rows table, or summing its rows per key where the build counted them, or (None, None, False)
    when rows_where cannot give them."""
    rows = rows_where(request, database, table, datasette, names)
    if rows is None:
        return None, None, False
    if rows.per_key is not None:
        counted, count = rows.per_key
        sql = f"select coalesce(sum({counted}.{count}), 0) {_rows_of(rows, counted)}"
        # Every filter checked on the row read per match: the full-text index checking them too can only cost
        # more (a broad search with ?os=ubuntu22.04 in the spread history: 0.66 s against 0.44 s).
        return sql, rows.params, rows.only_on_per_key
    return f"select count(*) {_rows_of(rows, escape_sqlite(rows.narrow_by['rows']))}", rows.params, False


class RowsWhere(NamedTuple):
    """A page's rows as conditions on the key of narrow_by's rows table, and their parameters but Datasette's;
    narrow_by's per_key, the table of the rows per key the build counted and its count column (escaped), when
    the database has it (names); the full-text index the page searches (escaped), if it does."""

    narrow_by: dict
    where: list
    params: dict
    per_key: tuple[str, str] | None
    search: str | None
    by_rows: bool = False  # filtered on a part the rows table reaches (a tag): read those rows, not the matches'
    on_per_key: tuple = ()  # conditions on the row of per_key's table of each match (_checked_on_per_key)
    only_on_per_key: bool = False  # on_per_key checks every filter of the page


def _rows_of(rows, table):
    """FROM and WHERE of the page's rows of a table keyed by narrow_by's key. A search leads: its matches are
    read in the index's order and each looked up by key, not first gathered into a list (Datasette's `in
    (select rowid ...)`: 1.5 million matches of a broad search took 464 ms to sum that way, 255 ms this way)."""
    if rows.search is None:
        return f"from {table} where {' and '.join(rows.where)}"
    key = escape_sqlite(rows.narrow_by["key"])
    matches = f"{rows.search} match escape_fts(:search)"
    if rows.by_rows:
        # The matches gathered once (LIMIT -1: never asked again for each row's key), and the rows read by the
        # filters on the parts they reach (a tag's pages), not by key (+): a tag's binaries, not the matches'.
        gathered = (
            f"(select search_match from (select rowid as search_match from {rows.search} where {matches} limit -1))"
        )
        return f"from {table} where {' and '.join([*rows.where, f'+{table}.{key} in {gathered}'])}"
    on_per_key = list(rows.on_per_key)
    if on_per_key and rows.per_key[0] != table:  # per_key's row of each row of table, looked up by its key
        counted = rows.per_key[0]
        looked_up = f"{counted}.{key} = {table}.{key}"
        on_per_key = [f"exists (select 1 from {counted} where {' and '.join([looked_up, *on_per_key])})"]
    return f"from {rows.search} join {table} on {table}.{key} = {rows.search}.rowid where {' and '.join([matches, *rows.where, *on_per_key])}"


def rows_where(request, database, table, datasette, names):
    """The page's rows as rows of narrow_by's rows table (one row per row of the view, with its key) when the
    page is filtered by nothing but narrow_by's columns, or with a search of the full-text index on the key by
    nothing but columns the key determines (its parts'); None otherwise. names: those of the database's
    tables, for a database that cannot change (unchanging_names)."""
    narrow_by = _plugin_config(datasette, database, table).get("narrow_by") or {}
    metadata = datasette.table_metadata(database, table) or {}
    if not narrow_by.get("rows") or metadata.get("searchmode") == "raw":
        return None
    search = (
        escape_sqlite(metadata["fts_table"])
        if "_search" in request.args and _searches_by_key(metadata, narrow_by)
        else None
    )
    # With a search leading, a filter on any part the key determines is checked per match, and one value of a
    # part the rows reach (a tag) picks the rows to read; else only narrow_by's own columns narrow (a stack's
    # listings, gathered, can be most of them).
    row_parts = [part for part in narrow_by.get("other_parts", []) if "rows_column" in part] if search else []
    columns = (
        [column for part in _key_parts(narrow_by) for column in part["columns"]] if search else narrow_by["columns"]
    )
    one_value_of = [column for part in row_parts for column in part["columns"]]
    for key in request.args:
        if _special(key) and not (key == "_search" and search) and not _shows_only(key):
            return None
        column, lookup = column_and_lookup(key)
        if not _special(key) and column not in columns and not (column in one_value_of and lookup == "exact"):
            return None
    by_rows = _filtered_rows(request, narrow_by, row_parts)
    per_key = narrow_by.get("per_key")
    counted = (
        (escape_sqlite(per_key["table"]), escape_sqlite(per_key["rows"]))
        if per_key and per_key["table"] in names and by_rows is None  # its rows per key are those of every tag
        else None
    )
    on_per_key = _checked_on_per_key(request, per_key) if search and counted else None
    if search and "through" in narrow_by:
        apart = (
            {column for part in (per_key or {}).get("parts", []) for column in part["columns"]} if on_per_key else ()
        )
        narrowed = _checked_per_match(request, narrow_by, apart)
    else:
        narrowed = _narrowing(request, narrow_by, *_narrowing_parts(narrow_by)[0])  # its rows are those of its columns
    narrowed = combined(narrowed, by_rows)
    where, params = (narrowed.where_clauses, narrowed.params) if narrowed else ([], {})
    if not where and search is None:
        return None
    on_per_key = on_per_key or FilterArguments([], {})
    return RowsWhere(
        narrow_by,
        where,
        {**params, **on_per_key.params},
        counted,
        search,
        by_rows is not None,
        tuple(on_per_key.where_clauses),
        bool(on_per_key.where_clauses) and not where and not _selects_elements(request),
    )


def _selects_elements(request):
    """Whether the page selects rows by an element of an array column: checked on per_key's row, a match's set
    is looked up among those that hold it (18,239 sets hold a stack in the spread history), which costs more
    than the full-text index finding the matches that hold it (a broad search of 1.5M listings with a stack
    that a third of them hold: 0.79 s checked on the rows, 0.62 s with the index finding them first)."""
    return any(column_and_lookup(key)[1] == "arraycontains" for key, _ in filter_pairs(request))


def _filtered_rows(request, narrow_by, parts):
    """The page's filters on parts the rows table reaches by a column of its own (a page's tag): rows_column
    in (the parts' keys they select), one clause a part; None without such a filter."""
    rows = escape_sqlite(narrow_by["rows"])
    clauses, params = [], {}
    for n, part in enumerate(parts):
        where, part_params = _part_filters(request, part, f"{NARROWING}rows{n}_")
        if where:
            selected = f"select {escape_sqlite(part['table_key'])} from {escape_sqlite(part['table'])}"
            clauses.append(f"{rows}.{escape_sqlite(part['rows_column'])} in ({selected} where {' and '.join(where)})")
            params.update(part_params)
    return FilterArguments(clauses, params) if clauses else None


def per_key_groups_query(request, database, table, datasette, columns, names):
    """(SQL, its parameters but Datasette's) counting the page's rows per value of each part of a row that
    holds some of these columns, or None unless rows_where gives the page's rows and the parts hold every
    column. The rows are counted per key on the rows table (through its index on the key), or read from the
    build's rows per key when no part is of the rows table; then per value of each part, and a part's columns
    are read once per value, never once per row: each row of the result has the values of one part's columns
    (the other columns NULL) and its rows. A part is narrow_by's table, reached through through's column, or
    one of its other_parts: through a column of through's table (column) or of the rows table (rows_column)."""
    rows = rows_where(request, database, table, datasette, names)
    if rows is None or "through" not in rows.narrow_by:
        return None
    through = rows.narrow_by["through"]
    parts = _parts(rows.narrow_by)
    holders = {column: _holder(parts, column) for column in columns}
    if None in holders.values():
        return None
    used = dict(enumerate(part for part in parts if any(holder is part for holder in holders.values())))
    of_rows = {n: part for n, part in used.items() if "rows_column" in part}
    of_key = {n: part for n, part in used.items() if n not in of_rows}
    ctes = [_per_key(rows, of_rows), *([_per_through(through, of_key, bool(of_rows))] if of_key else [])]
    selects = [
        _part_counts(
            n, part, "per_key" if n in of_rows else "per_through", [c if holders[c] is part else None for c in columns]
        )
        for n, part in used.items()
    ]
    return f"with {', '.join(ctes)} {' union all '.join(selects)}", rows.params


def counted_apart(request, database, table, datasette, columns, names):
    """The columns in groups that per_key_groups_query counts one query each: when the build counted the
    rows per key, the columns a key determines apart from those of the rows table's parts, which are counted
    per row (a broad search's tag facet can run out of time, and the others, read per key, need not with it);
    else all together."""
    rows = rows_where(request, database, table, datasette, names)
    if rows is None or rows.per_key is None or "through" not in rows.narrow_by:
        return [columns]
    parts = _parts(rows.narrow_by)
    of_rows = [column for column in columns if "rows_column" in (_holder(parts, column) or {})]
    return [group for group in ([column for column in columns if column not in of_rows], of_rows) if group]


def _parts(narrow_by):
    """narrow_by's table (reached through through's column) and its other_parts."""
    return [{**narrow_by, "column": narrow_by["through"]["column"]}, *narrow_by.get("other_parts", [])]


def _holder(parts, column):
    return next((part for part in parts if column in part["columns"]), None)


def _per_key(rows, of_rows):
    """The page's rows counted per key (and per value of the rows table's columns that parts are reached by)."""
    key = escape_sqlite(rows.narrow_by["key"])
    if rows.per_key is not None and not of_rows:
        counted, count = rows.per_key
        return f"per_key as materialized (select {counted}.{key} as key, {counted}.{count} as rows {_rows_of(rows, counted)})"
    table = escape_sqlite(rows.narrow_by["rows"])
    columns = {n: f"{table}.{escape_sqlite(part['rows_column'])}" for n, part in of_rows.items()}
    chosen = ", ".join([f"{table}.{key} as key", *(f"{column} as part{n}" for n, column in columns.items())])
    grouped = ", ".join([f"{table}.{key}", *columns.values()])
    return f"per_key as materialized (select {chosen}, count(*) as rows {_rows_of(rows, table)} group by {grouped})"


def _per_through(through, of_key, per_row):
    """The rows per key with the values of the columns of through's table that parts are reached by."""
    keys = "(select key, sum(rows) as rows from per_key group by key)" if per_row else "per_key"
    table = escape_sqlite(through["table"])
    chosen = ", ".join(f"{table}.{escape_sqlite(part['column'])} as part{n}" for n, part in of_key.items())
    return (
        f"per_through as materialized (select {chosen}, keys.rows from {keys} as keys"
        f" join {table} on {table}.{escape_sqlite(through['key'])} = keys.key)"
    )


def _part_counts(n, part, source, shown):
    """The rows per combination of the part's columns (shown: the columns in order, None where another part's)."""
    table = escape_sqlite(part["table"])
    grouped = ", ".join(escape_sqlite(column) for column in shown if column is not None)
    return (
        f"select {', '.join('null' if column is None else escape_sqlite(column) for column in shown)},"
        f" sum(counted.rows) from (select part{n}, sum(rows) as rows from {source} group by part{n}) as counted"
        f" join {table} on {table}.{escape_sqlite(part['table_key'])} = counted.part{n} group by {grouped}"
    )


def answer_counts(datasette, db, database):
    """Make db answer the count query of a table page as remember_count worked out: with the rows the build
    counted, or counted live within the facet time limit (a count that takes longer is left out)."""
    execute = db.execute

    async def execute_or_answer(sql, params=None, *args, **kwargs):
        counted = _COUNTED.get()
        if counted is not None and counted.database == database:
            if sql.startswith(f"select count(*) from {escape_sqlite(counted.table)} "):
                _COUNTED.set(None)
                counted.scope[PAGE_ROWS] = counted.rows
                if counted.rows is not None:
                    return Results([(counted.rows,)], False, [("count(*)",)])
                if counted.sql is not None:
                    sql, params = counted.sql, {**(params or {}), **counted.params}
                    if counted.searches_unnarrowed:
                        params.pop(FILTERS_IN_INDEX, None)
                started = monotonic()
                try:
                    results = await execute(sql, params, custom_time_limit=_time_left(datasette, counted))
                finally:
                    counted.scope[LIVE_COUNT_TOOK] = monotonic() - started
                counted.scope[PAGE_ROWS] = results.single_value()
                return results
        if sql.startswith(_ROW_PAGE_COUNTS):
            for counted, kept in _KEPT_ROW_COUNTS.items():
                sql = sql.replace(counted, kept)
        return await execute(sql, params, *args, **kwargs)

    db.execute = execute_or_answer


# Datasette's row page counts the rows of each table that name the row in one statement (views/row.py):
# {its count of a table's rows by a column: the same count summed from a count the build keeps by it}. The edges
# of a dependency kind have no index of their own: counted row by row, the page of a kind ran out of time (22.8
# million edges in the history from indexes) and lost every such link; summed, about the versions with edges.
_ROW_PAGE_COUNTS = "select (select count(*) from "
_KEPT_ROW_COUNTS = {
    f"(select count(*) from {escape_sqlite(rows)} where {escape_sqlite(column)}=:id)": (
        f"(select coalesce(sum({count}), 0) from {kept} where {column} = :id)"
    )
    for rows, kept_by in _KEPT_BY_COLUMNS.items()
    for kept, count, columns in kept_by
    for column in columns
}


def live_count_limit_ms(settings, spent_ms=0):
    """How long a live count may take (ms), spent_ms after the request's filters were read: what is left of
    Datasette's SQL time limit, less half a facet's time limit kept for the rest of the page, and never less
    than a facet's limit. A count that takes longer than a facet may leaves the live facets out
    (count_outlasted_facets): the rest of the page is then its rendering, 20-60 ms after the count of the
    spread history's broad search. A search is counted after its rows were read (1.5 million listings of the
    spread history: 2-200 ms, search.py, then 500-700 ms to count)."""
    facets = settings["facet_time_limit_ms"]
    return max(facets, round(settings["sql_time_limit_ms"] - spent_ms - facets / 2))


def _time_left(datasette, counted):
    settings = {name: datasette.setting(name) for name in ("sql_time_limit_ms", "facet_time_limit_ms")}
    return live_count_limit_ms(settings, (monotonic() - counted.started) * 1000)


def count_outlasted_facets(request, datasette):
    """Whether the page's live count took longer than a facet may: a facet counted live reads the rows that
    count read, and more, so it would run out of time."""
    took = request.scope.get(LIVE_COUNT_TOOK)
    return took is not None and took * 1000 > datasette.setting("facet_time_limit_ms")


def filters_from_request(request, database, table, datasette):
    """The page's row count, from the count tables when the filters allow (remember_count); and a filter on
    columns that a row's key determines also selects the keys (narrow_by), so that the view's rows come
    through its index on the key instead of a scan of every row, unless the count tables say the filter
    selects more than below_share of the rows (a scan then finds a page of them sooner than the keys are
    gathered), or the page searches the full-text index on the key (its matches lead). The clause never
    changes which rows match."""

    async def count_and_narrow():
        await remember_count(request, database, table, datasette)
        narrow_by = _plugin_config(datasette, database, table).get("narrow_by")
        if "_search" in request.args and _searches_by_key(datasette.table_metadata(database, table) or {}, narrow_by):
            # The matches lead (search.py) and each is checked against the filters as it comes: the keys the
            # filters pick, gathered first, took 300-470 ms in the spread history before a search of hdf5 read
            # its first match; checked per match by key, 150 ms in the usual shape; not at all, 1-13 ms.
            return None
        if not narrow_by:
            return None
        narrowed = [
            _narrowing(request, narrow_by, part, prefix)
            for part, prefix in _narrowing_parts(narrow_by)
            if not await _selects_many(request, database, table, datasette, part)
        ]
        return combined(*narrowed)

    # Datasette calls it when it gets to it; a coroutine made here would be left unawaited (a warning in the
    # server's log) when another filter raises first, as a bad _through does.
    return count_and_narrow


def _plugin_config(datasette, database, table):
    return datasette.plugin_config(PLUGIN, database=database, table=table, fallback=False) or {}


def _searches_by_key(metadata, narrow_by):
    """Whether the table's full-text index (in its metadata) is on narrow_by's key."""
    return bool(narrow_by) and metadata.get("fts_pk") == narrow_by["key"]


def _narrowing_parts(narrow_by):
    """(part, the prefix of its parameters) of each part whose filters can narrow the keys: narrow_by's own
    table and, with through, the other parts reached through its columns (a binary's set of stacks)."""
    parts = _key_parts(narrow_by) if "through" in narrow_by else [narrow_by]
    return [(part, f"{NARROWING}{n}_") for n, part in enumerate(parts)]


def _narrowing(request, narrow_by, part, prefix):
    """key in (the table_keys of the rows of the part's table that the page's filters on its columns select
    or, with through, the keys of the rows of through whose column is one of them): the matching rows of the
    table first, then their keys by index; None when the page does not filter on its columns."""
    where, params = _part_filters(request, part, prefix)
    if not where:
        return None
    key, rows, rows_key = (
        escape_sqlite(narrow_by["key"]),
        escape_sqlite(part["table"]),
        escape_sqlite(part["table_key"]),
    )
    selected = f"select {rows_key} from {rows} where {' and '.join(where)}"
    if "through" in narrow_by:
        through, through_key = (escape_sqlite(narrow_by["through"][name]) for name in ("table", "key"))
        selected = f"select {through_key} from {through} where {escape_sqlite(part['column'])} in ({selected})"
    return FilterArguments([f"{key} in ({selected})"], params)


def _checked_per_match(request, narrow_by, apart=()):
    """The page's filters on the columns a key determines (narrow_by's, and its other parts' reached through
    through's columns) but those checked apart, each part's as one clause that looks the outer row's key up:
    where a search leads, each match is checked as it comes. Gathered first (_narrowing), an os's listings took
    800 ms in the spread history, which the 100,000 listings that zlib matches were checked against in 100 ms."""
    through = {name: escape_sqlite(narrow_by["through"][name]) for name in ("table", "key", "column")}
    key = escape_sqlite(narrow_by["key"])
    clauses, params = [], {}
    for n, part in enumerate(_key_parts(narrow_by)):
        checked = {**part, "columns": [column for column in part["columns"] if column not in apart]}
        where, part_params = _part_filters(request, checked, f"{NARROWING}{n}_")
        if where:
            table, table_key, column = (escape_sqlite(part[name]) for name in ("table", "table_key", "column"))
            joined = f"{through['table']} join {table} on {table}.{table_key} = {through['table']}.{column}"
            # The key, named alone, is the outer row's: no table in here has a column of that name.
            looked_up = f"{through['table']}.{through['key']} = {key}"
            clauses.append(f"exists (select 1 from {joined} where {looked_up} and {' and '.join(where)})")
            params.update(part_params)
    return FilterArguments(clauses, params) if clauses else None


def _checked_on_per_key(request, per_key):
    """The page's filters on the columns of per_key's parts, each part's as one clause on its key column in
    per_key's table (its values' ids, beside each key's rows): true of the rows of the keys whose values the
    filters select. None without such a filter."""
    counted = escape_sqlite(per_key["table"])
    clauses, params = [], {}
    for n, part in enumerate(per_key.get("parts", [])):
        where, part_params = _part_filters(request, {**part, "columns": list(part["columns"])}, f"{NARROWING}k{n}_")
        if where:
            table, table_key = escape_sqlite(part["table"]), escape_sqlite(part["table_key"])
            named = ", ".join(
                [
                    table_key,
                    *(f"{escape_sqlite(own)} as {escape_sqlite(column)}" for column, own in part["columns"].items()),
                ]
            )
            selected = f"select {table_key} from (select {named} from {table}) as {table} where {' and '.join(where)}"
            clauses.append(f"{counted}.{escape_sqlite(part['column'])} in ({selected})")
            params.update(part_params)
    return FilterArguments(clauses, params) if clauses else None


def _key_parts(narrow_by):
    """The parts of a row that its key determines: those reached through through's columns."""
    return [part for part in _parts(narrow_by) if "column" in part]


def _part_filters(request, part, prefix):
    """The page's filters on a part's columns as SQL on its table (where clauses, their parameters), the
    parameters named with prefix (Datasette's own filters already use :p0, :p1...). An element asked of an array
    column whose elements the part names in a table of their own (elements: {column: {table, key, column}})
    selects the part's keys from there, by index, where Datasette's arraycontains reads every array through
    json_each (the 39,018 stack sets of the spread history: 114 ms, against 1 ms)."""
    pairs, clauses, params = [], [], {}
    for key, value in filter_pairs(request, part["columns"]):
        column, lookup = column_and_lookup(key)
        elements = part.get("elements", {}).get(column)
        if lookup != "arraycontains" or elements is None:
            pairs.append((key, value))
            continue
        name = f"{prefix}e{len(params)}"
        clauses.append(
            f"{escape_sqlite(part['table'])}.{escape_sqlite(part['table_key'])} in (select {escape_sqlite(elements['key'])}"
            f" from {escape_sqlite(elements['table'])} where {escape_sqlite(elements['column'])} = :{name})"
        )
        params[name] = value
    where, filtered = Filters(sorted(pairs)).build_where_clauses(part["table"])
    where = [re.sub(r":(p\d+)\b", rf":{prefix}\1", clause) for clause in where]
    return [*clauses, *where], {**params, **{f"{prefix}{name}": value for name, value in filtered.items()}}


async def _selects_many(request, database, table, datasette, part):
    """Whether the page's filters on a narrowing part's columns, exact values of counted facets, select more
    than its below_share of the view's rows, as the count tables count them (never, without a share)."""
    if "below_share" not in part:
        return False
    narrowing = urllib.parse.urlencode(filter_pairs(request, part["columns"]))
    tables = await count_tables(datasette, database, table)
    rows = await _stored_count(datasette, database, tables, facet_filters(narrowing, countable(tables)))
    if rows is None:
        return False
    stored = await datasette.get_database(database).execute("select count from row_counts where name = ?", [table])
    return bool(stored.rows) and rows > part["below_share"] * stored.rows[0][0]


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
