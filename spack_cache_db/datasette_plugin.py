"""Datasette plugin: serves any database this project built with its metadata (served_metadata) and its
pages (web_pages: questions with forms, answers that read as text, the package page), caps what one SQL
statement may build (serving_limits), answers bad requests with what was wrong (bad_requests), and counts
and facets the big views from counts taken at build time.

Counting the binaries view, or faceting it, means joining a million rows: seconds, past Datasette's
time limits. A database served immutable (`datasette -i cache.db`) cannot change, so the counts the
build stored are exact: row_counts gives the whole table's row count, and a view's cube
(<view>_cube: rows per combination of the columns people facet by) gives its facets on any page
filtered by those columns alone. Other filters count live, as Datasette does; so that such a count
reads only the rows it counts, a filter on columns that a row's key determines also picks the keys
from a smaller table (filters_from_request, narrow_by in metadata).
"""

import asyncio
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

from datasette import hookimpl
from datasette.database import QueryInterrupted
from datasette.facets import Facet, load_facet_configs
from datasette.filters import FilterArguments, Filters
from datasette.inspect import inspect_hash
from datasette.utils import escape_sqlite, path_with_added_args, path_with_removed_args

from spack_cache_db import bad_requests, cube_counts, served_metadata, serving_limits, web_pages
from spack_cache_db.cube_counts import column_and_lookup
from spack_cache_db.served_metadata import PLUGIN, built_by_us


@hookimpl
def startup(datasette):
    async def serve_our_databases():
        names = [name for name, db in datasette.databases.items() if not db.is_memory and await built_by_us(db)]
        served_metadata.remember(datasette, names)
        for name in names:
            db = datasette.databases[name]
            if not db.is_mutable and name not in (datasette.inspect_data or {}):
                await _use_stored_row_counts(datasette, name, db)
            if not db.is_mutable:
                cube_counts.answer_counts(db, name)

    return serve_our_databases


async def _use_stored_row_counts(datasette, name, db):
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


@hookimpl
def get_metadata(datasette, key, database, table):
    return served_metadata.asked(datasette, key, database, table)


@hookimpl
def prepare_jinja2_environment(env):
    web_pages.use_our_templates(env)


@hookimpl
def register_routes():
    return web_pages.routes()


@hookimpl
def extra_css_urls(template, database, datasette):
    return web_pages.static_urls(datasette, template, database, "css")


@hookimpl
def extra_js_urls(template, database, datasette):
    return web_pages.static_urls(datasette, template, database, "js")


@hookimpl
def extra_template_vars(template, database, request, datasette):
    async def our_pages_vars():
        return await web_pages.template_vars(datasette, template, database, request)

    return our_pages_vars


@hookimpl
def render_cell(value, column, table, database, datasette):
    return web_pages.cell(datasette, database, table, column, value)


@hookimpl
def prepare_connection(conn):
    serving_limits.cap(conn)


@hookimpl
def handle_exception(datasette, request, exception):
    async def say_what_was_wrong():
        return await bad_requests.response_for(datasette, request, exception)

    return say_what_was_wrong


@hookimpl
def register_facet_classes():
    return FACET_CLASSES


_NARROWING = "narrowing_"  # the prefix of the parameters filters_from_request adds


@hookimpl
def filters_from_request(request, database, table, datasette):
    """The page's row count, from the view's cube when the filters allow (cube_counts); and a filter on columns
    that a row's key determines also selects the keys, from a smaller table or view with one row per key that
    has the same columns (narrow_by: key, table, table_key, columns): the view's rows then come through its
    index on the key instead of a scan of every row. The clause never changes which rows match."""

    async def count_and_narrow():
        await cube_counts.remember_count(request, database, table, datasette)
        return _narrowing(request, database, table, datasette)

    return count_and_narrow()


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
    where = [re.sub(r":(p\d+)\b", rf":{_NARROWING}\1", clause) for clause in where]
    key, rows, rows_key = (escape_sqlite(narrow_by[name]) for name in ("key", "table", "table_key"))
    return FilterArguments(
        [f"{key} in (select {rows_key} from {rows} where {' and '.join(where)})"],
        {f"{_NARROWING}{name}": value for name, value in params.items()},
    )


def _column(config):
    return config.get("column") or config["simple"]


def _datasette_order(value_and_count):
    """Most rows first, then by value as SQLite orders them (numbers before text before blobs)."""
    value, count = value_and_count
    kind = 0 if isinstance(value, int | float) else 1 if isinstance(value, str) else 2
    return -count, kind, value


class _Precounted(Facet):
    """A facet read from the view's cube (<view>_cube, counted by the build) when an immutable
    database's page is filtered by nothing but cube columns; counted live (with Datasette's facet time
    limit) under any other filter."""

    async def suggest(self):
        return []  # Datasette's own column and array facets already suggest these columns

    async def facet_results(self):
        configs = [(_column(config["config"]), config["source"]) for config in self.get_configs()]
        if not configs:
            return [], []
        facet_size = self.get_facet_size()
        columns = [column for column, _ in configs]
        counts = await self._count_from_cube(columns)
        timed_out = []
        if counts is None:
            try:
                counts = await self._count_live(columns)
            except QueryInterrupted:
                counts, timed_out = {}, columns
        results = [
            {
                "name": column,
                "type": self.shown_as,  # the page names a facet's type unless it is "column"
                "hideable": source != "metadata",
                "toggle_url": self.ds.urls.path(path_with_removed_args(self.request, {f"_facet_{self.type}": column})),
                "results": [self._value(column, value, count) for value, count in counts.get(column, [])[:facet_size]],
                "truncated": len(counts.get(column, [])) > facet_size,
            }
            for column, source in configs
            if column not in timed_out
        ]
        return results, timed_out

    def _value(self, column, value, count):
        arg = self.filter_arg(column)
        selected = (arg, str(value)) in self.get_querystring_pairs()
        toggle = (path_with_removed_args if selected else path_with_added_args)(self.request, {arg: value})
        return {
            "value": value,
            "label": value,
            "count": count,
            "toggle_url": self.ds.absolute_url(self.request, self.ds.urls.path(toggle)),
            "selected": selected,
        }

    async def _count_live(self, columns):
        """{column: [(value, count), ...] in Datasette's order} of the filtered rows."""
        grouped_by, groups = await self._live_groups()
        counts = {}
        for column in columns:
            counted, position = Counter(), grouped_by.index(column)
            for values, count in groups:
                self.add_counts(counted, values[position], count)
            counts[column] = sorted(counted.items(), key=_datasette_order)
        return counts

    async def _live_groups(self):
        """(columns, [(their values, rows), ...]): the filtered rows counted per combination of the values
        of every precounted column the page shows. The column and the array facets, which Datasette runs
        at the same time, share this one query: the rows are read once, with only these columns, into a
        materialized table (SQLite drops the joins a query does not need only when it is no aggregate)."""
        configs = load_facet_configs(self.request, self.metadata)
        columns = sorted({_column(config["config"]) for kind in FACET_CLASSES for config in configs.get(kind.type, [])})
        shared = self.request.scope.setdefault("spack_cache_db.live_groups", {})
        key = (self.database, self.sql, json.dumps(self.params, sort_keys=True, default=str), tuple(columns))
        if key not in shared:
            selected = ", ".join(escape_sqlite(column) for column in columns)
            shared[key] = asyncio.ensure_future(
                self.ds.execute(
                    self.database,
                    f"with facet as materialized (select {selected} from ({self.sql}))"
                    f" select {selected}, count(*) from facet group by {selected}",
                    self.params,
                    truncate=False,
                    custom_time_limit=self.ds.setting("facet_time_limit_ms"),
                )
            )
        rows = (await shared[key]).rows
        return columns, [(tuple(row)[:-1], row[-1]) for row in rows]

    async def _count_from_cube(self, columns):
        """{column: [(value, count), ...] in Datasette's order}, or None when the cube cannot answer."""
        db = self.ds.get_database(self.database)
        filters = self._filters()  # first: a search or other filter needs no look at the database
        if filters is None:
            return None
        available = await cube_counts.cube_columns(db, self.table)
        if available is None or not {column for column, _, _ in filters} | set(columns) <= available:
            return None
        where, params = cube_counts.cube_where(filters)
        cube = escape_sqlite(f"{self.table}_cube")
        counts = {}
        for column in columns:
            rows = await db.execute(self.cube_sql(cube, escape_sqlite(column), where), params)
            counts[column] = [(value, count) for value, count in rows.rows]
        return counts

    def _filters(self):
        """cube_counts.cube_filters of the page, when Datasette's SQL filters by those and nothing else (it made
        one parameter of each, and filters_from_request its copies)."""
        filters = cube_counts.cube_filters(self.request.query_string)
        own = [name for name in self.params if not name.startswith(_NARROWING)]
        return filters if filters is not None and len(own) == len(filters) else None


class PrecountedColumnFacet(_Precounted):
    type = "precounted"
    shown_as = "column"

    @staticmethod
    def filter_arg(column):
        return f"{column}__exact" if column.startswith("_") else column

    @staticmethod
    def add_counts(counted, value, count):
        if value is not None:
            counted[value] += count

    @staticmethod
    def cube_sql(cube, column, where):
        return (
            f"select {column} as value, sum(count) as count from {cube} where {where}"
            " group by value order by count desc, value"
        )


class PrecountedArrayFacet(_Precounted):
    type = "precounted_array"
    shown_as = "array"

    @staticmethod
    def filter_arg(column):
        return f"{column}__arraycontains"

    @staticmethod
    def add_counts(counted, array, count):
        # Datasette 0.65's own array facet puts json_each before the rows it reads ("json_each(inner.x)
        # join inner"); over this view SQLite 3.40 then finds no rows at all. Here rows come grouped by
        # their array, and each value an array holds counts the group's rows (the arrays here are sets).
        try:
            values = json.loads(array) if isinstance(array, str) else None
        except ValueError:
            values = None
        for value in values if isinstance(values, list) else []:
            counted[json.dumps(value, separators=(",", ":")) if isinstance(value, list | dict) else value] += count

    @staticmethod
    def cube_sql(cube, column, where):
        return (
            f"select j.value as value, sum({cube}.count) as count from {cube} join json_each({cube}.{column}) j"
            f" where {where} group by j.value order by count desc, value"
        )


FACET_CLASSES = [PrecountedColumnFacet, PrecountedArrayFacet]
