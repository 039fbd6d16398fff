"""A search of a page of ours, read in its full-text index's order. Datasette filters a searched table page
with `<fts_pk> in (select rowid from <fts_table> where <fts_table> match ...)`, for which SQLite first gathers
every match into a list: a broad search of the spread history (1.5 million listings) took 450-800 ms before the
page's first row, and as long again for each statement counted live. Each statement of such a page is run
with the matches leading instead, read once as they come and joined to the table by its full-text key: a page
of rows reads about a page of matches (1-2 ms). The rows, and their order, are the same: each match is one key,
and SQLite read the list in key order, the order in which the index gives its matches. (A filter that narrows
the page by that key is checked per match too: counts.py.)

A filter on one value of a column that the full-text index holds too (a package, an os, a stack) is added to
the search, so that the index gives only the matches that can pass it: otherwise a broad search that a filter
narrows reads every match to check it (ubuntu22.04 with package=zlib in the spread history: 1.5 million
listings, past the time limit). A row the filter selects holds its value in that column, so the value's words,
as a phrase in that column, match it: the search selects no fewer rows, and the filter stays as it was.
"""

import re
from typing import NamedTuple

from datasette.filters import FilterArguments
from datasette.utils import escape_sqlite

from spack_cache_db.web import metadata
from spack_cache_db.web.counts import FILTERS_IN_INDEX, column_and_lookup, filter_pairs

# How Datasette's search filter asks for the matches: escaped, or as the user typed them (searchmode raw).
MATCHED_BY = ("escape_fts(:search)", ":search")
# The lookups whose rows hold the value in the column, as text: exact, and an element of a JSON array.
_LOOKUPS_IN_INDEX = ("exact", "arraycontains")


class Rewrite(NamedTuple):
    """Datasette's search clause for a table (escaped names), the FROM and WHERE it is in, and what they
    become: the clause true, the matches leading."""

    searched: str
    source: str
    leading: str

    def apply(self, sql):
        if self.searched in sql and self.source in sql:
            return sql.replace(self.searched, "1", 1).replace(self.source, self.leading, 1)
        return sql


class Narrowing(NamedTuple):
    """The searches of a full-text index in a statement, and the clauses of the filters it checks
    (filters_in_index_clause, one per key column of a table it covers): each search is made one of both, and
    the clauses true."""

    searched: re.Pattern
    clauses: re.Pattern

    def apply(self, sql):
        sql, narrowed = self.searched.subn(rf"\g<1>'(' || \g<2> || ') AND (' || :{FILTERS_IN_INDEX} || ')'", sql)
        return self.clauses.sub("1", sql) if narrowed else sql


def rewrites(table, fts_table, fts_pk):
    """The Rewrites of a table that a full-text index covers (escaped names), one per way of matching."""
    source = f" from {table} where "
    made = []
    for match in MATCHED_BY:
        # LIMIT -1 keeps SQLite from merging the matches into the query, and CROSS JOIN keeps them the outer
        # loop: read once, as they come. Merged, SQLite may read them again for each row of a loop it puts
        # outside them (a package's pages, one per tag).
        matches = f"(select rowid as search_match from {fts_table} where {fts_table} match {match} limit -1)"
        leading = (
            f" from (select {table}.* from {matches} as search_matches cross join {table}"
            f" on {table}.{fts_pk} = search_matches.search_match) as {table} where "
        )
        searched = f"{fts_pk} in (select rowid from {fts_table} where {fts_table} match {match})"
        made.append(Rewrite(searched, source, leading))
    return made


def narrowing(fts_table, fts_pks):
    """The Narrowing of the searches of a full-text index (escaped names), whichever way they match."""
    ways = "|".join(re.escape(match) + r"(?!\w)" for match in MATCHED_BY)
    searched = re.compile(rf"(\b{re.escape(fts_table)} match )({ways})")
    clauses = "|".join(re.escape(filters_in_index_clause(fts_table, fts_pk)) for fts_pk in fts_pks)
    return Narrowing(searched, re.compile(rf"(?<![\w\"])(?:{clauses})"))  # a whole clause: not id in listing_id's


def filters_in_index_clause(fts_table, fts_pk):
    """The rows whose key the full-text index matches with the query of the page's filters in it (escaped
    names): true of every row the filters select, whether the search leads or not."""
    return f"{fts_pk} in (select rowid from {fts_table} where {fts_table} match :{FILTERS_IN_INDEX})"


async def filters_in_index(request, database, table, datasette):
    """FilterArguments that add to a searched page the clause of its filters that the full-text index can
    check (filters_in_index_clause), or None: no search, or no such filter."""
    if database not in metadata.ours(datasette) or not request.args.get("_search"):
        return None
    table_metadata = datasette.table_metadata(database, table)
    fts_table = table_metadata.get("fts_table")
    if not fts_table:
        return None
    db = datasette.get_database(database)
    in_index = set(await db.table_columns(fts_table)) & set(await db.table_columns(table))
    phrases = [
        f"{column} : {_phrase(value)}"
        for key, value in filter_pairs(request, in_index)
        for column, lookup in [column_and_lookup(key)]
        if column.isidentifier() and lookup in _LOOKUPS_IN_INDEX and _holds_as_words(value, lookup)
    ]
    if not phrases:
        return None
    clause = filters_in_index_clause(escape_sqlite(fts_table), escape_sqlite(table_metadata.get("fts_pk", "rowid")))
    return FilterArguments([clause], {FILTERS_IN_INDEX: " AND ".join(phrases)})


def _phrase(value):
    return '"' + value.replace('"', '""') + '"'


def _holds_as_words(value, lookup):
    """Whether a row the filter selects holds the value's words in the column's text, in order: the value has
    words, and an element of a JSON array is written there as it is (no escapes: printable ASCII, no quote
    or backslash)."""
    if not any(character.isalnum() for character in value):
        return False
    return lookup == "exact" or (value.isascii() and value.isprintable() and not {'"', "\\"} & set(value))


def searched_tables(datasette, database):
    """(table, its full-text index, the index's key column) of each table of a database that its metadata
    gives a full-text index (escaped names)."""
    tables = datasette.metadata("tables", database=database) or {}
    return [
        (escape_sqlite(table), escape_sqlite(meta["fts_table"]), escape_sqlite(meta.get("fts_pk", "rowid")))
        for table, meta in tables.items()
        if meta.get("fts_table")
    ]


def lead_with_matches(datasette, db, database):
    """Make db run each statement that searches one of its tables with the matches leading, and those of a
    page with filters in the index with them in its searches."""
    tables = searched_tables(datasette, database)
    searched = [rewrite for table in tables for rewrite in rewrites(*table)]
    keys = {}  # full-text index -> the key columns of the tables it covers
    for _, fts_table, fts_pk in tables:
        keys.setdefault(fts_table, set()).add(fts_pk)
    narrowings = [narrowing(fts_table, fts_pks) for fts_table, fts_pks in keys.items()]
    execute = db.execute

    async def execute_with_matches_leading(sql, params=None, *args, **kwargs):
        for rewrite in searched:
            sql = rewrite.apply(sql)
        if isinstance(params, dict) and FILTERS_IN_INDEX in params:
            for narrowed in narrowings:
                sql = narrowed.apply(sql)
        return await execute(sql, params, *args, **kwargs)

    if searched:
        db.execute = execute_with_matches_leading
