"""Sorting is offered only where it answers in time (web/sorting.py): a table or view of more rows than
SORT_ANY_COLUMN_UP_TO offers to sort by the columns an index orders, and says so of the others."""

import html
import re
import sqlite3
import urllib.parse

import pytest
from datasette.app import Datasette

from spack_cache_db.web import describe, sorting

METADATA = describe.build_metadata()
SORT_LINK = re.compile(r'href="([^"]*[?&]_sort(?:_desc)?=[^"]*)"')


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
