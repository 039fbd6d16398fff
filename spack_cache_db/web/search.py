"""A search of a page of ours, read in its full-text index's order. Datasette filters a searched table page
with `<fts_pk> in (select rowid from <fts_table> where <fts_table> match ...)`, for which SQLite first gathers
every match into a list: a broad search of the spread history (1.5 million listings) took 450-800 ms before the
page's first row, and as long again for each statement counted live. Each statement of such a page is run
with the matches leading instead, read once as they come and joined to the table by its full-text key: a page
of rows reads about a page of matches (1-2 ms). The rows, and their order, are the same: each match is one key,
and SQLite read the list in key order, the order in which the index gives its matches. (A filter that narrows
the page by that key is checked per match too: counts.py.)
"""

from typing import NamedTuple

from datasette.utils import escape_sqlite

# How Datasette's search filter asks for the matches: escaped, or as the user typed them (searchmode raw).
MATCHED_BY = ("escape_fts(:search)", ":search")


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


def search_rewrites(datasette, database):
    """The Rewrites of every table of a database that its metadata gives a full-text index, made once."""
    tables = datasette.metadata("tables", database=database) or {}
    return [
        rewrite
        for table, meta in tables.items()
        if meta.get("fts_table")
        for rewrite in rewrites(
            escape_sqlite(table), escape_sqlite(meta["fts_table"]), escape_sqlite(meta.get("fts_pk", "rowid"))
        )
    ]


def lead_with_matches(datasette, db, database):
    """Make db run each statement that searches one of its tables with the matches leading."""
    searched = search_rewrites(datasette, database)
    execute = db.execute

    async def execute_with_matches_leading(sql, *args, **kwargs):
        for rewrite in searched:
            sql = rewrite.apply(sql)
        return await execute(sql, *args, **kwargs)

    if searched:
        db.execute = execute_with_matches_leading
