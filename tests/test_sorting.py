"""Sorting is offered only where it answers in time (web/sorting.py): a table or view of more rows than
SORT_ANY_COLUMN_UP_TO offers to sort by the columns an index orders, and says so of the others."""

import html
import itertools
import re
import sqlite3
import urllib.parse

import pytest
from datasette.app import Datasette

from spack_cache_db.web import describe, sorting

METADATA = describe.build_metadata()
SORT_LINK = re.compile(r'href="([^"]*(?:\?|&amp;)_sort(?:_desc)?=[^"]*)"')


def served(db, with_metadata):
    """As the README serves it (-m metadata.yml, which is ours), or plainly (datasette cache.db)."""
    metadata = {"metadata": METADATA} if with_metadata else {}
    return Datasette(immutables=[str(db)], settings={"trace_debug": True}, **metadata)


async def pages(ds):
    """Every table and view the database page lists."""
    data = (await ds.client.get("/cache.json")).json()
    return [table["name"] for table in data["tables"] if not table["hidden"]] + [view["name"] for view in data["views"]]


async def sort_links(ds, table):
    response = await ds.client.get(f"/cache/{table}")
    assert response.status_code == 200, (table, response.text[:300])
    return sorted({html.unescape(link) for link in SORT_LINK.findall(response.text)})


def sorted_by(link):
    ((key, column),) = [(k, v) for k, v in urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query) if "_sort" in k]
    return key, column


async def rows_statement(ds, link):
    """The statement Datasette ran for a sort link's rows, and its parameters."""
    path, _, query = link.partition("?")
    response = await ds.client.get(f"{path}.json?{query}&_trace=1")
    assert response.status_code == 200, (link, response.text[:300])
    (trace,) = [
        trace
        for trace in response.json()["_trace"]["traces"]
        if trace["type"] == "sql"
        and " order by " in trace["sql"]
        and trace["sql"].startswith("select")
        and "limit 101" in trace["sql"]
    ]
    return trace["sql"], trace["params"]


def sorts_every_row(db, sql, params):
    plan = sqlite3.connect(db).execute(f"EXPLAIN QUERY PLAN {sql}", params or {}).fetchall()
    return any("TEMP B-TREE" in step and "ORDER BY" in step for *_, step in plan)


@pytest.mark.parametrize("with_metadata", [True, False])
@pytest.mark.asyncio
async def test_a_small_database_offers_every_column_of_the_binaries_view(cache_db, with_metadata):
    ds = served(cache_db, with_metadata)
    await ds.invoke_startup()
    columns = [row[1] for row in sqlite3.connect(cache_db).execute("PRAGMA table_info(binaries)")]
    assert {sorted_by(link)[1] for link in await sort_links(ds, "binaries")} == set(columns)


@pytest.mark.parametrize("with_metadata", [True, False])
@pytest.mark.asyncio
async def test_a_big_database_offers_only_the_sorts_an_index_orders(cache_db, with_metadata, monkeypatch):
    """Every table and view taken as too big to sort by any column: each sort link a page offers answers, and
    its rows come in an index's order (but a table's own sort in its metadata); the binaries view offers fewer
    sorts than it has columns, and one it does not offer is answered at once with those it does."""
    monkeypatch.setattr(sorting, "SORT_ANY_COLUMN_UP_TO", 0)
    ds = served(cache_db, with_metadata)
    await ds.invoke_startup()
    offered = {}
    for table in await pages(ds):
        own = {METADATA["databases"]["cache"]["tables"].get(table, {}).get(key) for key in ("sort", "sort_desc")}
        for link in await sort_links(ds, table):
            column = sorted_by(link)[1]
            offered.setdefault(table, set()).add(column)
            sql, params = await rows_statement(ds, link)
            assert column in own or not sorts_every_row(cache_db, sql, params), (link, sql)
    columns = [row[1] for row in sqlite3.connect(cache_db).execute("PRAGMA table_info(binaries)")]
    assert offered["binaries"] and set(columns) - offered["binaries"]
    left_out = sorted(set(columns) - offered["binaries"])[0]
    response = await ds.client.get(f"/cache/binaries.json?_sort_desc={left_out}")
    assert response.status_code == 400
    assert response.json()["error"] == (
        f'_sort_desc: binaries is too big to sort by "{left_out}" in time (no index gives that order);'
        f" it can be sorted by {', '.join(column for column in columns if column in offered['binaries'])}"
    )
    assert "versions" in offered and (await ds.client.get("/cache/versions")).status_code == 200


def binaries_found(db, search, **filters):
    """The number of rows of the binaries view a search finds, with column filters."""
    sql = (
        "SELECT count(*) FROM binaries WHERE listing_id IN (SELECT rowid FROM listings_fts WHERE listings_fts MATCH ?)"
    )
    sql += "".join(f" AND {column} = ?" for column in filters)
    return sqlite3.connect(db).execute(sql, (search, *filters.values())).fetchone()[0]


@pytest.mark.asyncio
async def test_a_search_too_broad_to_sort_offers_no_sort_and_a_sort_of_it_says_how_to_narrow_it(cache_db, monkeypatch):
    """A searched page reads every match to sort them: beyond SORT_ANY_COLUMN_UP_TO rows found (here, those of
    a narrow search), its headings are no links and a sort of it is answered at once. A narrow search, or a
    broad one that a filter narrows, offers its sorts, and each answers with the rows found, in order."""
    narrow, broad, narrowed = ("hdf5", {}), ("linux", {}), ("linux", {"package": "hdf5"})
    limit = binaries_found(cache_db, narrow[0])
    assert 0 < limit < binaries_found(cache_db, broad[0])
    assert 0 < binaries_found(cache_db, narrowed[0], **narrowed[1]) <= limit
    monkeypatch.setattr(sorting, "SORT_ANY_COLUMN_UP_TO", limit)
    ds = served(cache_db, with_metadata=True)
    await ds.invoke_startup()

    for uncounted in ("", "&_nocount=1"):  # its headings go by its own count, or by counting up to the limit
        broad_page = await ds.client.get(f"/cache/binaries?_search=linux{uncounted}")
        assert broad_page.status_code == 200 and 'class="rows-and-columns"' in broad_page.text
        assert SORT_LINK.findall(broad_page.text) == [], uncounted
    for key in ("_sort", "_sort_desc"):
        refused = await ds.client.get(f"/cache/binaries.json?_search=linux&{key}=package")
        assert refused.status_code == 400
        assert refused.json()["error"] == (
            f"{key}: this search matches more than {limit:,} rows of binaries, too many to sort in time;"
            " narrow it (a filter or a facet, such as a tag or an os) to sort it"
        )

    for (search, filters), uncounted in itertools.product((narrow, narrowed), ({}, {"_nocount": "1"})):
        query = urllib.parse.urlencode({"_search": search, **filters, **uncounted})
        page = await ds.client.get(f"/cache/binaries?{query}")
        links = sorted({html.unescape(link) for link in SORT_LINK.findall(page.text)})
        assert links, query
        for link in links:
            key, column = sorted_by(link)
            path, _, link_query = link.partition("?")
            response = await ds.client.get(f"{path}.json?{link_query}&_shape=objects&_size=max")
            assert response.status_code == 200, (link, response.text[:300])
            values = [row[column] for row in response.json()["rows"]]
            assert len(values) == binaries_found(cache_db, search, **filters)
            assert values == sorted(values, reverse=key == "_sort_desc"), link


@pytest.mark.asyncio
async def test_a_sort_of_more_filtered_rows_than_sqlite_can_sort_in_time_says_how_to_narrow_them(cache_db, monkeypatch):
    """binary_stacks unfiltered reads packages in order, but filtered by a stack SQLite starts from the stack and
    sorts all it finds (stack=root at the usual history's size: 5.4 million rows, past the time limit). Beyond
    SORT_FILTERED_UP_TO rows, as the count tables count them or counted up to it (here, those of e4s), such a
    sort is answered at once with how to narrow it; within it, or read in order (a tag), the rows come sorted."""
    conn = sqlite3.connect(cache_db)
    rows = dict(conn.execute("SELECT stack, count(*) FROM binary_stacks GROUP BY stack"))
    assert rows["e4s"] < rows["root"]
    monkeypatch.setattr(sorting, "SORT_FILTERED_UP_TO", rows["e4s"])
    ds = served(cache_db, with_metadata=True)
    await ds.invoke_startup()
    for key, where in itertools.product(
        ("_sort", "_sort_desc"), ("stack=root", "stack=root&_nocount=1&package__not=x")
    ):
        refused = await ds.client.get(f"/cache/binary_stacks.json?{where}&{key}=package")
        assert refused.status_code == 400, (key, where)
        assert refused.json()["error"] == (
            f"{key}: these filters leave more than {rows['e4s']:,} rows of binary_stacks to sort by package, too many"
            " to sort in time; narrow them (another filter or a facet, such as a tag) to sort it"
        )
    for where in ("stack=e4s", "tag=develop-2025-04-20"):
        link = f"/cache/binary_stacks?{where}&_sort=package"
        sql, params = await rows_statement(ds, link)
        assert sorts_every_row(cache_db, sql, params) == (where == "stack=e4s"), where
        response = await ds.client.get(f"/cache/binary_stacks.json?{where}&_sort=package&_shape=objects&_size=max")
        packages = [row["package"] for row in response.json()["rows"]]
        assert packages and packages == sorted(packages), where
