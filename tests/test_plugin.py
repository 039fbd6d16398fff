"""The Datasette plugin: binaries and binary_stacks pages count and facet from the build's counts."""

import gc
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import urllib.parse

import pytest
from datasette import hookimpl
from datasette.app import Datasette
from datasette.database import QueryInterrupted
from datasette.utils import escape_fts
from paths import ROOT

from spack_cache_db.web import describe

METADATA = describe.build_metadata()
FACETS = {
    "binaries": {"tag": "column", "os": "column", "target": "column", "compiler": "column", "stacks": "array"},
    "binary_stacks": {"stack": "column", "tag": "column"},
}


def served(db_path, immutable=True):
    if immutable:
        return Datasette(immutables=[str(db_path)], metadata=METADATA)
    return Datasette([str(db_path)], metadata=METADATA)


def live_facet(db_path, table, column, kind, where="", params=()):
    """Datasette's answer computed the slow way: {value: count}, every value."""
    conn = sqlite3.connect(db_path)
    if kind == "array":
        sql = f"SELECT j.value, count(*) FROM {table}, json_each({table}.{column}) j {where} GROUP BY j.value"
    else:
        sql = f"SELECT {column}, count(*) FROM {table} {where} GROUP BY {column}"
    return dict(conn.execute(sql, params).fetchall())


def shown(facet):
    return {value["value"]: value["count"] for value in facet["results"]}


async def get_json(ds, path):
    response = await ds.client.get(path)
    assert response.status_code == 200, response.text[:500]
    return response.json()


@pytest.mark.parametrize("table", sorted(FACETS))
@pytest.mark.asyncio
async def test_unfiltered_page_counts_and_facets_equal_live_counts(cache_db, table):
    data = await get_json(served(cache_db), f"/cache/{table}.json?_facet_size=max")
    live_count = sqlite3.connect(cache_db).execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    assert data["filtered_table_rows_count"] == live_count
    assert sorted(data["facet_results"]) == sorted(FACETS[table])
    for column, kind in FACETS[table].items():
        facet = data["facet_results"][column]
        assert shown(facet) == live_facet(cache_db, table, column, kind), column
        counts = [(-value["count"], value["value"]) for value in facet["results"]]
        assert counts == sorted(counts), f"{column}: not in Datasette's order (count, then value)"


@pytest.mark.asyncio
async def test_immutable_and_mutable_serving_show_the_same_facets(cache_db):
    """Mutable serving cannot trust stored counts and computes them: both must agree, values and links."""
    answers = [await get_json(served(cache_db, immutable), "/cache/binaries.json") for immutable in (True, False)]
    precounted, live = (answer["facet_results"] for answer in answers)
    assert precounted == live
    assert answers[0]["filtered_table_rows_count"] == answers[1]["filtered_table_rows_count"]


@pytest.mark.asyncio
async def test_default_facet_size_truncates_like_datasette(cache_db):
    data = await get_json(served(cache_db), "/cache/binaries.json?_facet_size=3")
    facet = data["facet_results"]["compiler"]
    everything = live_facet(cache_db, "binaries", "compiler", "column")
    assert len(facet["results"]) == 3 and facet["truncated"] == (len(everything) > 3)


@pytest.mark.asyncio
async def test_a_filtered_page_counts_live(cache_db):
    ds = served(cache_db)
    data = await get_json(ds, "/cache/binaries.json?tag=develop")
    assert shown(data["facet_results"]["tag"]) == {"develop": data["filtered_table_rows_count"]}
    assert shown(data["facet_results"]["os"]) == live_facet(
        cache_db, "binaries", "os", "column", "WHERE tag = ?", ["develop"]
    )
    assert shown(data["facet_results"]["stacks"]) == live_facet(
        cache_db, "binaries", "stacks", "array", "WHERE tag = ?", ["develop"]
    )


@pytest.mark.asyncio
async def test_a_search_counts_its_facets_live_per_listing_and_its_tags_per_binary(cache_db):
    """A search's facets equal SQL's. Those a listing determines add up the binaries the build counted per
    listing, in one query; the tag facet counts the binaries themselves, in another, which the column and the
    array facets share too."""
    ds = Datasette(immutables=[str(cache_db)], metadata=METADATA, settings={"trace_debug": True})
    data = await get_json(ds, "/cache/binaries.json?_search=mpi&_facet_size=max&_trace=1")
    where = "WHERE listing_id IN (SELECT rowid FROM listings_fts WHERE listings_fts MATCH ?)"
    assert 0 < data["filtered_table_rows_count"] < live_facet(cache_db, "binaries", "platform", "column")["linux"]
    for column, kind in FACETS["binaries"].items():
        facet = data["facet_results"][column]
        assert shown(facet) == live_facet(cache_db, "binaries", column, kind, where, ["mpi"]), column
        counts = [(-value["count"], value["value"]) for value in facet["results"]]
        assert counts == sorted(counts), f"{column}: not in Datasette's order (count, then value)"
    facet_queries = [
        trace["sql"]
        for trace in data["_trace"]["traces"]
        if trace["sql"].startswith(("with facet as materialized", "with per_key as materialized"))
    ]
    per_listing, per_binary = sorted(facet_queries, key=lambda sql: "page_specs" in sql)
    assert "join listing_binaries" in per_listing and "page_specs" not in per_listing
    assert "join page_specs" in per_binary and "page_tags" in per_binary and "listing_binaries" not in per_binary


@pytest.mark.asyncio
async def test_a_search_whose_tags_take_too_long_still_shows_its_other_facets(cache_db, monkeypatch):
    """The tag facet of a broad search counts millions of binaries and may run out of time: only it is left
    out, not the facets counted per listing."""
    ds = Datasette(immutables=[str(cache_db)], metadata=METADATA)
    execute = ds.execute

    async def tags_time_out(database, sql, *args, **kwargs):
        if "page_tags" in sql:
            raise QueryInterrupted(sqlite3.OperationalError("interrupted"), sql, kwargs.get("params"))
        return await execute(database, sql, *args, **kwargs)

    monkeypatch.setattr(ds, "execute", tags_time_out)
    data = await get_json(ds, "/cache/binaries.json?_search=mpi")
    assert set(data["facet_results"]) == {"os", "target", "compiler", "stacks"}
    assert data["filtered_table_rows_count"] > 0
    page = await ds.client.get("/cache/binaries?_search=mpi")
    assert re.search(r'class="facets-timed-out">These facets timed out: tag<', page.text)


@pytest.mark.parametrize("column", ["os", "stacks"])
@pytest.mark.asyncio
async def test_following_a_facet_value_shows_that_many_rows(cache_db, column):
    ds = served(cache_db)
    facet = (await get_json(ds, "/cache/binaries.json"))["facet_results"][column]
    first = facet["results"][0]
    target = urllib.parse.urlsplit(first["toggle_url"])
    filtered = await get_json(ds, f"{target.path}?{target.query}&_shape=objects")
    assert filtered["filtered_table_rows_count"] == first["count"]
    assert all(
        (first["value"] in json.loads(row[column])) if column == "stacks" else row[column] == first["value"]
        for row in filtered["rows"]
    )


@pytest.mark.asyncio
async def test_html_page_shows_facets_and_the_row_count(cache_db):
    response = await served(cache_db).client.get("/cache/binaries")
    assert response.status_code == 200
    live_count = sqlite3.connect(cache_db).execute("SELECT count(*) FROM binaries").fetchone()[0]
    assert re.search(rf">\s*{live_count:,} rows\s*<", response.text), "the page should say how many rows"
    assert "These facets timed out" not in response.text
    assert "precounted" not in response.text, "a facet's heading should not name the plugin's facet type"
    assert re.search(r"stacks \(array\)", response.text)
    develop = live_facet(cache_db, "binaries", "tag", "column")["develop"]
    assert re.search(rf'href="[^"]*\?tag=develop"[^>]*>develop</a>\s*{develop:,}', response.text)


async def started(ds):
    """Datasette as `datasette serve` runs it: the start-up hooks before the first request."""
    await ds.invoke_startup()
    return ds


@pytest.mark.asyncio
async def test_start_up_keeps_what_lasts_out_of_full_collections(cache_db):
    """Otherwise every few pages a full collection walks all of it: 40 ms on the history built from indexes."""
    gc.unfreeze()
    ds = served(cache_db)
    assert gc.get_freeze_count() == 0
    await started(ds)
    assert gc.get_freeze_count() > 10_000


@pytest.mark.asyncio
async def test_database_page_counts_every_table(cache_db):
    data = await get_json(await started(served(cache_db)), "/cache.json")
    conn = sqlite3.connect(cache_db)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {table["name"] for table in data["tables"]} == tables
    for table in data["tables"]:
        assert table["count"] == conn.execute(f'SELECT count(*) FROM "{table["name"]}"').fetchone()[0], table["name"]
    views = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
    assert {view["name"] for view in data["views"]} == views


@pytest.mark.parametrize("path", ["/", "/cache", "/cache.json", "/.json"])
@pytest.mark.asyncio
async def test_pages_listing_tables_answer_after_start_up(cache_db, path):
    """The stored counts include the views; the pages that list tables must not take them for tables."""
    response = await (await started(served(cache_db))).client.get(path)
    assert response.status_code == 200, response.text[:500]


@pytest.mark.parametrize("view", ["binaries", "binary_stacks", "dependencies"])
@pytest.mark.asyncio
async def test_a_whole_view_is_counted_from_the_stored_row_counts(cache_db, tmp_path, view):
    copy = tmp_path / "cache.db"
    copy.write_bytes(cache_db.read_bytes())
    with sqlite3.connect(copy) as conn:
        conn.execute("UPDATE row_counts SET count = 123456 WHERE name = ?", [view])
    data = await get_json(await started(served(copy)), f"/cache/{view}.json?_size=1")
    assert data["filtered_table_rows_count"] == 123456


@pytest.mark.asyncio
async def test_an_inspect_file_given_to_datasette_is_left_as_it_is(cache_db):
    inspect_data = {"cache": {"hash": "given", "size": 1, "file": "cache.db", "tables": {"binaries": {"count": 7}}}}
    ds = Datasette(immutables=[str(cache_db)], metadata=METADATA, inspect_data=inspect_data)
    data = await get_json(ds, "/cache/binaries.json")
    assert data["filtered_table_rows_count"] == 7
    assert ds.inspect_data == inspect_data


@pytest.mark.parametrize("tag", ["develop", "v0.23.1"])
@pytest.mark.asyncio
async def test_a_page_of_one_tag_facets_from_stored_counts_that_equal_live_ones(cache_db, tag):
    data = await get_json(served(cache_db), f"/cache/binaries.json?tag={tag}&_facet_size=max")
    tag_facet = data["facet_results"]["tag"]["results"]
    assert [(v["value"], v["count"], v["selected"]) for v in tag_facet] == [
        (tag, data["filtered_table_rows_count"], True)
    ]
    assert "tag" not in urllib.parse.parse_qs(urllib.parse.urlsplit(tag_facet[0]["toggle_url"]).query)
    for column, kind in FACETS["binaries"].items():
        expected = live_facet(cache_db, "binaries", column, kind, "WHERE tag = ?", [tag])
        assert shown(data["facet_results"][column]) == expected, column


def count_columns(table):
    """{count table: its column of counts} of the count tables metadata names for a table page."""
    columns = {}
    for tables in METADATA["databases"]["cache"]["tables"][table]["plugins"]["spack-cache-db"]["counted_by"]:
        if "cube" in tables:
            columns[tables["cube"]] = tables["count"]
        else:
            columns.update({tables[kind]: "binaries" for kind in ("values", "pairs", "per")})
    return columns


def mark_counts(db_path, change):
    """Change every count of the binaries page's count tables in a copy: SET count = <change>, the count
    column called {count}."""
    with sqlite3.connect(db_path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table, column in count_columns("binaries").items():
            if table in tables:  # not version_tags, a view of tag_version_counts
                conn.execute(f"UPDATE {table} SET {column} = {change.format(count=column)}")


@pytest.mark.asyncio
async def test_pages_the_count_tables_answer_read_them_and_others_do_not(cache_db, tmp_path):
    """Marked counts in a copy show where the plugin reads the count tables, and only there."""
    copy = tmp_path / "cache.db"
    copy.write_bytes(cache_db.read_bytes())
    mark_counts(copy, "{count} + 1000")
    ds = served(copy)
    from_tables = ["", "?tag=develop", "?os=ubuntu22.04", "?tag=develop&os__exact=ubuntu22.04", "?stacks__arraycontains=e4s",
                   "?tag=develop&_sort=package&_size=5"]  # fmt: skip
    for query in from_tables:
        data = await get_json(ds, f"/cache/binaries.json{query}")
        assert all(count >= 1000 for count in shown(data["facet_results"]["os"]).values()), query
    live = ["?package=bolt", "?tag=develop&package=bolt", "?tag__not=develop", "?_search=bolt", "?_where=1"]
    for query in live:
        data = await get_json(ds, f"/cache/binaries.json{query}")
        assert all(count < 1000 for count in shown(data["facet_results"]["os"]).values()), query


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "query",
    [
        "os=ubuntu22.04",
        "tag=develop&target=x86_64_v3",
        "stacks__arraycontains=e4s",
        "compiler=gcc@11.4.0&os=ubuntu22.04",
    ],
)
async def test_facets_from_the_count_tables_equal_live_ones(cache_db, query):
    data = await get_json(served(cache_db), f"/cache/binaries.json?{query}&_facet_size=max")
    conditions, params = [], []
    for pair in query.split("&"):
        key, value = pair.split("=", 1)
        column, _, lookup = key.partition("__")
        conditions.append(f"EXISTS (SELECT 1 FROM json_each({column}) WHERE value = ?)" if lookup else f"{column} = ?")
        params.append(value)
    where = "WHERE " + " AND ".join(conditions)
    assert data["filtered_table_rows_count"] > 0
    for column, kind in FACETS["binaries"].items():
        assert shown(data["facet_results"][column]) == live_facet(cache_db, "binaries", column, kind, where, params), (
            column
        )


def test_every_precounted_facet_in_metadata_is_counted_by_the_build(cache_db):
    """Each precounted facet is a column the first count tables metadata names for its table count: the facets
    the values table has, or the columns of a cube (which the cube has)."""
    tables = METADATA["databases"]["cache"]["tables"]
    configured = {
        (table, next(iter(facet.values())))
        for table, settings in tables.items()
        for facet in settings.get("facets", [])
        if isinstance(facet, dict) and next(iter(facet)).startswith("precounted")
    }
    conn = sqlite3.connect(cache_db)
    counted = set()
    for table in FACETS:
        first = tables[table]["plugins"]["spack-cache-db"]["counted_by"][0]
        if "cube" in first:
            assert set(first["columns"]) <= {row[1] for row in conn.execute(f"PRAGMA table_info({first['cube']})")}
            counted |= {(table, column) for column in first["columns"]}
        else:
            counted |= {(table, row[0]) for row in conn.execute(f"SELECT DISTINCT facet FROM {first['values']}")}
    assert configured == {(table, column) for table, columns in FACETS.items() for column in columns}
    assert configured <= counted


@pytest.mark.asyncio
async def test_another_database_with_a_row_counts_table_is_served_as_it_is(cache_db, tmp_path):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE row_counts (what TEXT)")
        conn.execute("CREATE TABLE build_info (key TEXT, value TEXT)")
    ds = Datasette(immutables=[str(cache_db), str(other)], metadata=METADATA)
    assert (await get_json(ds, "/other.json"))["tables"]
    assert (await get_json(ds, "/cache/binaries.json"))["filtered_table_rows_count"] == sqlite3.connect(
        cache_db
    ).execute("SELECT count(*) FROM binaries").fetchone()[0]
    assert set(ds.inspect_data) == {"cache"}


def notes_database(folder, column, note):
    """other.db, a database beside ours: a table of notes with one row."""
    other = folder / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute(f"CREATE TABLE notes ({column} TEXT)")
        conn.execute("INSERT INTO notes VALUES (?)", [note])
    return other


@pytest.mark.asyncio
async def test_our_cells_are_not_asked_of_markdown_and_another_databases_still_are(cache_db, tmp_path, monkeypatch):
    """datasette-render-markdown (which datasette-dashboards installs) renders no cell of ours, yet looked its
    settings up for every cell: half the CPU of a 613-row answer. A database beside ours keeps it."""
    other = notes_database(tmp_path, "body_markdown", "**bold**")
    looked_up = []
    plugin_config = Datasette.plugin_config

    def recorded(self, plugin_name, database=None, table=None, fallback=True):
        looked_up.append((plugin_name, database))
        return plugin_config(self, plugin_name, database=database, table=table, fallback=fallback)

    monkeypatch.setattr(Datasette, "plugin_config", recorded)
    ds = await started(Datasette(immutables=[str(cache_db), str(other)], metadata=METADATA))
    for path in ("/cache/binaries?_size=100", "/cache/find_binaries?package=bolt"):
        response = await ds.client.get(path)
        assert response.status_code == 200 and response.text.count("<tr") > 10, path
    assert ("datasette-render-markdown", "cache") not in looked_up
    assert "<strong>bold</strong>" in (await ds.client.get("/other/notes")).text
    assert ("datasette-render-markdown", "other") in looked_up


@pytest.mark.asyncio
async def test_our_cells_are_rendered_without_a_plugin_call_each_and_another_databases_still_are(
    cache_db, tmp_path, monkeypatch
):
    """Where this plugin alone renders our cells, they are rendered without pluggy's call for each: it took 6 of
    the 10 µs of a cell (find_binaries of a package in every tag of the usual history: 13,000 cells). Another
    database's cells still go to every plugin."""
    from datasette.plugins import pm

    other = notes_database(tmp_path, "body", "a note")
    calls = []
    inner = pm._inner_hookexec

    def counted(hook_name, methods, kwargs, firstresult):
        calls.append((hook_name, kwargs.get("database")))
        return inner(hook_name, methods, kwargs, firstresult)

    monkeypatch.setattr(pm, "_inner_hookexec", counted)
    ds = await started(Datasette(immutables=[str(cache_db), str(other)], metadata=METADATA))
    response = await ds.client.get("/cache/find_binaries?package=bolt")
    assert response.status_code == 200 and response.text.count("<tr") > 10
    assert response.text.count('<a class="spack-hash" href="/cache/hash_lookup?hash=') == response.text.count("<tr") - 1
    assert ("render_cell", "cache") not in calls
    assert "a note" in (await ds.client.get("/other/notes")).text
    assert ("render_cell", "other") in calls


class LaterCells:
    """A plugin that renders cells, registered once Datasette has started."""

    __name__ = "later-cells"

    @hookimpl
    def render_cell(self, value, column, table, database, datasette):
        return "LATER" if column == "package" else None


@pytest.mark.asyncio
async def test_a_plugin_registered_after_start_up_is_asked_for_our_cells(cache_db):
    from datasette.plugins import pm

    ds = await started(Datasette(immutables=[str(cache_db)], metadata=METADATA))
    later = LaterCells()
    pm.register(later, name=later.__name__)
    try:
        response = await ds.client.get("/cache/binaries?_size=5")
    finally:
        pm.unregister(later)
    assert response.status_code == 200 and response.text.count("LATER") == 5


NARROWED = [
    "os=ubuntu20.04",
    "version=1.14.6",
    "tag=develop&package=bolt",
    "os__not=ubuntu22.04&compiler__startswith=gcc",
    "variants__contains=%2Bmpi",
    "stacks__arraycontains=e4s&os=ubuntu20.04",
]
NARROWING = re.compile(
    r" and listing_id in \(select id from listings where configuration_id in \(select .*?\)\)\s*(?=limit|order|$)"
)


def connect_as_datasette(db_path):
    conn = sqlite3.connect(db_path)
    conn.create_function("escape_fts", 1, escape_fts)  # as Datasette registers it
    return conn


def rows_without_narrowing(db_path, sql, params):
    """(tag, hash) of the rows of a page's SQL without the clause that narrows it, sorted."""
    without = NARROWING.sub(" ", sql)
    assert "select configuration_id from configuration_specs" not in without
    conn = connect_as_datasette(db_path)
    return sorted((row[0], row[4]) for row in conn.execute(without.replace("limit 1001", ""), params))


@pytest.mark.parametrize("query", NARROWED)
@pytest.mark.asyncio
async def test_filters_on_what_a_listing_determines_go_through_the_listings_and_keep_the_rows(cache_db, query):
    """The plugin adds a clause that picks the configurations the filters match, then their listings; the rows
    stay those the filters alone give, and SQLite reads them through page_specs' index on listings."""
    data = await get_json(served(cache_db), f"/cache/binaries.json?{query}&_size=max&_shape=objects")
    sql, params = data["query"]["sql"], data["query"]["params"]
    assert NARROWING.search(sql)
    expected = rows_without_narrowing(cache_db, sql, params)
    assert 0 < len(expected) == data["filtered_table_rows_count"]
    assert sorted((row["tag"], row["hash"]) for row in data["rows"]) == expected
    plan = " ".join(row[3] for row in connect_as_datasette(cache_db).execute(f"EXPLAIN QUERY PLAN {sql}", params))
    assert "page_specs_by_listing" in plan


@pytest.mark.parametrize(
    "query",
    [
        "os=ubuntu22.04",
        "target=x86_64_v3&compiler=gcc@11.4.0",
        "_search=mpi&os=sequoia",
        "package=py-mpi4py",
        "_search=mpi&target=x86_64_v4",
    ],
)
@pytest.mark.asyncio
async def test_filters_that_match_a_large_share_of_the_binaries_are_not_narrowed_and_keep_the_rows(cache_db, query):
    """Values the count tables count on more than a tenth of the binaries: a scan finds a page of them sooner
    than their listings are gathered. Nor any filter of a search (its matches lead: search.py)."""
    data = await get_json(served(cache_db), f"/cache/binaries.json?{query}&_size=max&_shape=objects")
    assert not NARROWING.search(data["query"]["sql"])
    expected = rows_without_narrowing(cache_db, data["query"]["sql"], data["query"]["params"])
    assert 0 < len(expected) == data["filtered_table_rows_count"]
    assert sorted((row["tag"], row["hash"]) for row in data["rows"]) == expected


STACK_NARROWING = re.compile(
    r" and listing_id in \(select id from listings where stack_set_id in \(select id from stack_sets where"
    r" stack_sets\.id in \(select stack_set_id from stack_memberships where stack = :\w+\)\)\)"
)


@pytest.mark.asyncio
async def test_a_stack_of_few_binaries_goes_through_its_sets_and_listings_and_keeps_the_rows(cache_db):
    """A stack of few binaries (they may all lie at the end of the view: a scan for a page of them read most of
    the history, past the time limit) picks its sets of stacks and their listings by index; the rows stay those
    of the filter alone. A stack of most binaries (root) is found sooner by a scan."""
    conn = connect_as_datasette(cache_db)
    (stack,) = conn.execute(
        "SELECT value FROM binaries_facet_counts WHERE facet = 'stacks' ORDER BY binaries, value LIMIT 1"
    ).fetchone()
    data = await get_json(served(cache_db), f"/cache/binaries.json?stacks__arraycontains={stack}&_size=max")
    sql, params = data["query"]["sql"], data["query"]["params"]
    assert STACK_NARROWING.search(sql)
    expected = sorted(conn.execute(STACK_NARROWING.sub(" ", sql).replace("limit 1001", ""), params).fetchall())
    assert 0 < len(expected) == data["filtered_table_rows_count"] == len(data["rows"])
    assert sorted(map(tuple, data["rows"])) == expected
    plan = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
    assert all(index in plan for index in ("page_specs_by_listing", "listings_by_stack_set")), plan
    assert "stack_set_members_by_stack" in plan, plan
    root = await get_json(served(cache_db), "/cache/binaries.json?stacks__arraycontains=root")
    assert not STACK_NARROWING.search(root["query"]["sql"])


@pytest.mark.parametrize("query", ["tag=develop&hash__startswith=a", "stacks__arraycontains=e4s"])
@pytest.mark.asyncio
async def test_filters_on_other_columns_add_nothing(cache_db, query):
    data = await get_json(served(cache_db), f"/cache/binaries.json?{query}")
    assert not NARROWING.search(data["query"]["sql"])


@pytest.mark.asyncio
async def test_a_narrowed_page_describes_only_the_filters_people_chose(cache_db):
    response = await served(cache_db).client.get("/cache/binaries?os=ubuntu22.04&version__startswith=1")
    assert response.status_code == 200
    heading = re.search(r"<h3>(.*?)</h3>", response.text, re.S).group(1)
    count = (
        sqlite3.connect(cache_db)
        .execute("SELECT count(*) FROM binaries WHERE os = 'ubuntu22.04' AND version LIKE '1%'")
        .fetchone()[0]
    )
    assert (
        " ".join(heading.split())
        == f"{count:,} rows where os = &#34;ubuntu22.04&#34; and version starts with &#34;1&#34;"
    )


@pytest.mark.parametrize("key", ["os", "os__exact", "os__not", "stacks__arraycontains", "odd__name__exact"])
def test_the_plugin_reads_a_filter_argument_as_datasette_does(key):
    from datasette.filters import Filters

    from spack_cache_db.web.counts import column_and_lookup

    [(column, lookup, _)] = Filters([(key, "x")]).selections()
    assert column_and_lookup(key) == (column, lookup)


COUNTED_FILTERS = [
    "target=x86_64_v3",
    "os=ubuntu22.04",
    "tag=develop&target=neoverse_v2",
    "compiler=gcc@11.4.0&os=ubuntu22.04",
    "stacks__arraycontains=e4s",
    "stacks__arraycontains=root&target=x86_64_v3&_facet=os",
]


def sql_count(db_path, query):
    """The binaries a page's filters select, counted with SQL."""
    where, params = [], []
    for key, value in urllib.parse.parse_qsl(query):
        if key.startswith("_"):
            continue
        column, _, lookup = key.rpartition("__")
        if lookup == "arraycontains":
            where.append(f"? IN (SELECT value FROM json_each({column}))")
        else:
            where.append(f"{key} = ?")
        params.append(value)
    return (
        sqlite3.connect(db_path)
        .execute(f"SELECT count(*) FROM binaries WHERE {' AND '.join(where)}", params)
        .fetchone()[0]
    )


@pytest.mark.parametrize("query", COUNTED_FILTERS)
@pytest.mark.asyncio
async def test_a_page_filtered_by_facet_columns_has_its_exact_row_count(cache_db, query):
    data = await get_json(await started(served(cache_db)), f"/cache/binaries.json?{query}")
    assert data["filtered_table_rows_count"] == sql_count(cache_db, query) > 0


@pytest.mark.asyncio
async def test_the_row_count_of_such_a_page_comes_from_the_count_tables(cache_db, tmp_path):
    """Count tables that say twice as much show: the count was read there, not counted live."""
    doubled = tmp_path / "cache.db"
    shutil.copy(cache_db, doubled)
    mark_counts(doubled, "{count} * 2")
    ds = await started(served(doubled))
    data = await get_json(ds, "/cache/binaries.json?target=x86_64_v3")
    assert data["filtered_table_rows_count"] == 2 * sql_count(cache_db, "target=x86_64_v3")
    conn = sqlite3.connect(cache_db)
    for other, where in (  # filters on other columns, or other lookups: counted live
        ("package=bolt", "package = 'bolt'"),
        ("target=x86_64_v3&version=1.0.1", "target = 'x86_64_v3' AND version = '1.0.1'"),
        ("target__not=x86_64_v3", "target <> 'x86_64_v3'"),
    ):
        data = await get_json(ds, f"/cache/binaries.json?{other}")
        assert (
            data["filtered_table_rows_count"]
            == conn.execute(f"SELECT count(*) FROM binaries WHERE {where}").fetchone()[0]
        )
    served_mutable = await started(served(doubled, immutable=False))
    data = await get_json(served_mutable, "/cache/binaries.json?target=x86_64_v3")
    assert data["filtered_table_rows_count"] == sql_count(cache_db, "target=x86_64_v3")  # may change: counted live


IMPORTED_FIRST = """
import asyncio, sys
import spack_cache_db.web  # before Datasette, as a script that builds metadata and then serves may
from datasette.app import Datasette

async def main():
    ds = Datasette(immutables=[sys.argv[1]])
    questions = await ds.client.get("/cache/find_binaries.json?package=cli11&_shape=objects")
    binaries = await ds.client.get("/cache/binaries.json?_size=0")
    print(questions.status_code, len(questions.json().get("rows", [])), binaries.json()["filtered_table_rows_count"])

asyncio.run(main())
"""


def test_the_plugin_keeps_its_hooks_when_a_program_imports_it_before_datasette(cache_db):
    """Importing datasette.plugins loads the installed plugins, this package among them: done while this
    package was being imported, Datasette registered it half made, with none of its hooks (no start-up, no
    metadata, no counts), in any program that imported it first."""
    run = subprocess.run(
        [sys.executable, "-c", IMPORTED_FIRST, str(cache_db)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    status, rows, binaries = map(int, run.stdout.split())
    assert status == 200 and rows > 0  # a question of this project's metadata
    assert binaries == sqlite3.connect(cache_db).execute("SELECT count(*) FROM page_specs").fetchone()[0]
