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


class SearchedTable(NamedTuple):
    """A table or view of ours that metadata gives a full-text index (escaped names)."""

    table: str
    fts_table: str
    fts_pk: str

    def matches_leading(self, sql):
        """The statement with the search's matches leading, or as it was when it does not search this table."""
        source = f" from {self.table} where "
        for match in MATCHED_BY:
            searched = f"{self.fts_pk} in (select rowid from {self.fts_table} where {self.fts_table} match {match})"
            if searched in sql and source in sql:
                # LIMIT -1 keeps SQLite from merging the matches into the query, and CROSS JOIN keeps them
                # the outer loop: read once, as they come. Merged, SQLite may read them again for each row
                # of a loop it puts outside them (a package's pages, one per tag).
                matches = (
                    f"(select rowid as search_match from {self.fts_table} where {self.fts_table} match {match}"
                    " limit -1)"
                )
                leading = (
                    f" from (select {self.table}.* from {matches} as search_matches cross join {self.table}"
                    f" on {self.table}.{self.fts_pk} = search_matches.search_match) as {self.table} where "
                )
                return sql.replace(searched, "1", 1).replace(source, leading, 1)
        return sql


def searched_tables(datasette, database):
    """The tables of a database that its metadata gives a full-text index, as Datasette names them in SQL."""
    tables = datasette.metadata("tables", database=database) or {}
    return [
        SearchedTable(
            escape_sqlite(table), escape_sqlite(meta["fts_table"]), escape_sqlite(meta.get("fts_pk", "rowid"))
        )
        for table, meta in tables.items()
        if meta.get("fts_table")
    ]


def lead_with_matches(datasette, db, database):
    """Make db run each statement that searches one of its tables with the matches leading."""
    searched = searched_tables(datasette, database)
    execute = db.execute

    async def execute_with_matches_leading(sql, *args, **kwargs):
        for table in searched:
            sql = table.matches_leading(sql)
        return await execute(sql, *args, **kwargs)

    if searched:
        db.execute = execute_with_matches_leading
