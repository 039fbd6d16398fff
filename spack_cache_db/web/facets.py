"""Facets of the big views read from their cubes (<view>_cube, counted by the build) when an immutable
database's page is filtered by nothing but cube columns, and counted live otherwise (counts.py has the
filters both share)."""

import asyncio
import json
from collections import Counter

from datasette import hookimpl
from datasette.database import QueryInterrupted
from datasette.facets import Facet, load_facet_configs
from datasette.utils import escape_sqlite, path_with_added_args, path_with_removed_args

from spack_cache_db.web import counts as cube_counts
from spack_cache_db.web.counts import NARROWING


@hookimpl
def register_facet_classes():
    return FACET_CLASSES


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
        own = [name for name in self.params if not name.startswith(NARROWING)]
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
