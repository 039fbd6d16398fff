"""Facets of the big views read from their count tables (counted by the build) when an immutable database's
page is filtered by few enough facet values for them to answer (counts.py has the tables and the filters
both share), and counted live otherwise, within Datasette's facet time limit."""

import asyncio
import json
from collections import Counter

from datasette import hookimpl
from datasette.database import QueryInterrupted
from datasette.facets import Facet, load_facet_configs
from datasette.utils import escape_sqlite, path_with_added_args, path_with_removed_args

from spack_cache_db.web import counts
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
    """A facet read from the view's count tables (counted by the build) when an immutable database's page is
    filtered by few enough facet values for them to answer; counted live (with Datasette's facet time limit)
    otherwise."""

    async def suggest(self):
        return []  # Datasette's own column and array facets already suggest these columns

    async def facet_results(self):
        configs = [(_column(config["config"]), config["source"]) for config in self.get_configs()]
        if not configs:
            return [], []
        facet_size = self.get_facet_size()
        stored = await self._stored_queries()
        counted, timed_out = {}, []
        for column, _ in configs:
            if column in stored:
                counted[column] = (await self.ds.get_database(self.database).execute(*stored[column])).rows
        live = [column for column, _ in configs if column not in stored]
        if live:
            found, timed_out = await self._count_live(live, stored)
            counted.update(found)
        results = [
            {
                "name": column,
                "type": self.shown_as,  # the page names a facet's type unless it is "column"
                "hideable": source != "metadata",
                "toggle_url": self.ds.urls.path(path_with_removed_args(self.request, {f"_facet_{self.type}": column})),
                "results": [self._value(column, value, count) for value, count in counted[column][:facet_size]],
                "truncated": len(counted[column]) > facet_size,
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

    async def _stored_queries(self):
        """{column: (SQL, parameters)} of every precounted facet of the page the count tables answer."""
        tables = await counts.count_tables(self.ds, self.database, self.table)
        facets = counts.counted_facets(self.ds, self.database, self.table)
        selected = counts.facet_filters(self.request.query_string, counts.countable(tables))
        if not tables or selected is None or not self._filters_alone(selected):
            return {}
        queries = {
            column: counts.facet_query(tables, selected, column, is_array) for column, is_array in facets.items()
        }
        return {column: query for column, query in queries.items() if query is not None}

    def _filters_alone(self, selected):
        """Whether Datasette's SQL filters by these and nothing else (it made one parameter of each, and
        filters_from_request its copies)."""
        return len([name for name in self.params if not name.startswith(NARROWING)]) == len(selected)

    async def _count_live(self, columns, stored):
        """({column: [(value, count), ...] in Datasette's order} of the filtered rows, [the columns whose
        count ran out of time, or would: all of them when the page's live count took longer than a facet may])."""
        if counts.count_outlasted_facets(self.request, self.ds):
            return {}, list(columns)
        counted, timed_out = {}, []
        for grouped_by, groups in await self._live_groups(stored, columns):
            mine = [(position, column) for position, column in enumerate(grouped_by) if column in columns]
            if groups is None:
                timed_out += [column for _, column in mine]
                continue
            for position, column in mine:
                values = Counter()
                for group, count in groups:
                    self.add_counts(values, group[position], count)
                counted[column] = sorted(values.items(), key=_datasette_order)
        return counted, timed_out

    async def _live_groups(self, stored, wanted):
        """[(columns, [(their values, rows), ...] or None when the count ran out of time)] for the groups of
        columns that hold one of wanted: the filtered rows counted per combination of the values of the
        precounted columns the page shows that the count tables do not answer, in the groups
        counts.counted_apart makes. The column and the array facets, which Datasette runs at the same time,
        share each group's query. When the page's rows are those of a key's rows table and the key determines
        a group's columns (counts.per_key_groups_query), the rows are counted per key and then per value, a
        group of one part's columns at a time (the others None); otherwise the rows are read once, with only
        these columns, into a materialized table (SQLite drops the joins a query does not need only when it is
        no aggregate)."""
        configs = load_facet_configs(self.request, self.metadata)
        shown = {_column(config["config"]) for kind in FACET_CLASSES for config in configs.get(kind.type, [])}
        # Awaited before the futures are looked up: an await between the check and the making would let the
        # other facet class make a second one.
        names = await counts.unchanging_names(self.ds, self.database)
        groups = counts.counted_apart(
            self.request, self.database, self.table, self.ds, sorted(shown - set(stored)), names
        )
        shared = self.request.scope.setdefault("spack_cache_db.live_groups", {})
        params = json.dumps(self.params, sort_keys=True, default=str)
        futures = []
        for columns in groups:
            if set(columns) & set(wanted):
                key = (self.database, self.sql, params, tuple(columns))
                if key not in shared:
                    shared[key] = asyncio.ensure_future(self._count_groups(columns, names))
                futures.append((columns, shared[key]))
        found = []
        for columns, future in futures:
            try:
                rows = (await future).rows
            except QueryInterrupted:
                found.append((columns, None))
                continue
            found.append((columns, [(tuple(row)[:-1], row[-1]) for row in rows]))
        return found

    def _count_groups(self, columns, names):
        per_key = counts.per_key_groups_query(self.request, self.database, self.table, self.ds, columns, names)
        if per_key is not None:
            # Datasette's Facet keeps a page without parameters (os__notblank=1) as [], not {}
            sql, params = per_key[0], {**(self.params or {}), **per_key[1]}
        else:
            selected = ", ".join(escape_sqlite(column) for column in columns)
            sql, params = (
                f"with facet as materialized (select {selected} from ({self.sql}))"
                f" select {selected}, count(*) from facet group by {selected}",
                self.params,
            )
        return self.ds.execute(
            self.database, sql, params, truncate=False, custom_time_limit=self.ds.setting("facet_time_limit_ms")
        )


class PrecountedColumnFacet(_Precounted):
    type = counts.COLUMN_FACET
    shown_as = "column"

    @staticmethod
    def filter_arg(column):
        return f"{column}__exact" if column.startswith("_") else column

    @staticmethod
    def add_counts(counted, value, count):
        if value is not None:
            counted[value] += count


class PrecountedArrayFacet(_Precounted):
    type = counts.ARRAY_FACET
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


FACET_CLASSES = [PrecountedColumnFacet, PrecountedArrayFacet]
