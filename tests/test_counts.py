"""The binaries page's row counts and facets from the build's count tables, on databases of both shapes: the
samples, and a spread corpus (each binary built in one of many os x target x compiler combinations and listed
in a random subset of its tag's stacks). They equal SQL's counts on pages filtered by each facet value, by
pairs and by a tag and a pair; they are read from the count tables wherever those answer, at a cost of about
the values a facet shows whatever the combinations the data holds; a count they cannot answer is counted
live within the facet time limit, or left out."""

import asyncio
import itertools
import json
import re
import shutil
import sqlite3
import urllib.parse

import pytest
from datasette.app import Datasette
from datasette.utils import escape_fts
from datasette.utils.asgi import Request
from pagemaker import spec, write_page, write_spread_corpus

from spack_cache_db.build import build
from spack_cache_db.db import maintenance, schema
from spack_cache_db.query import canned
from spack_cache_db.web import counts, describe, search

METADATA = describe.build_metadata()
FACETS = {"tag": False, "os": False, "target": False, "compiler": False, "stacks": True}  # column: an array
TAGS = ["develop", "develop-2025-05-04", "v0.23.1"]
# The tables a recount keeps, found in its statements: those it writes, but its own temporary ones.
KEPT_PER_TAG = sorted(
    set(re.findall(r"(?:INSERT INTO|DELETE FROM) (\w+)", "\n".join(schema.RECOUNT_TAGS)))
    - set(schema.RECOUNT_TEMPORARIES)
)


def spread_db(folder, tags, packages, specs_per_page):
    build([str(write_spread_corpus(folder / "site", tags, packages, specs_per_page))], folder / "cache.db")
    return folder / "cache.db"


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    return spread_db(tmp_path_factory.mktemp("spread"), TAGS, 12, 25)


@pytest.fixture(params=["usual", "spread"])
def shaped(request, cache_db, spread):
    return {"usual": cache_db, "spread": spread}[request.param]


def where(filters):
    """SQL's WHERE clause (and parameters) of a page's filters [(facet, value)]."""
    conditions = [f"? IN (SELECT value FROM json_each({f}))" if FACETS[f] else f"{f} = ?" for f, _ in filters]
    return (" WHERE " + " AND ".join(conditions) if conditions else ""), [value for _, value in filters]


def sql_count(db, clause, params):
    """The binaries a WHERE clause (or "") selects, counted with SQL."""
    conn = sqlite3.connect(db)
    conn.create_function("escape_fts", 1, escape_fts)  # as Datasette registers it
    return conn.execute(f"SELECT count(*) FROM binaries{clause}", params).fetchone()[0]


def sql_facets(db, clause, params):
    """{facet: {value: rows}} of the binaries a WHERE clause (or "") selects, counted with SQL."""
    conn = sqlite3.connect(db)
    conn.create_function("escape_fts", 1, escape_fts)  # as Datasette registers it
    facets = {}
    for facet, is_array in FACETS.items():
        sql = (
            f"SELECT j.value, count(*) FROM binaries, json_each(binaries.{facet}) j{clause} GROUP BY j.value"
            if is_array
            else f"SELECT {facet}, count(*) FROM binaries{clause} GROUP BY {facet}"
        )
        facets[facet] = dict(conn.execute(sql, params).fetchall())
    return facets


def sql_counts(db, filters):
    """(rows, {facet: {value: rows}}) of the binaries a page's filters select, counted with SQL."""
    clause, params = where(filters)
    rows = sqlite3.connect(db).execute(f"SELECT count(*) FROM binaries{clause}", params).fetchone()[0]
    return rows, sql_facets(db, clause, params)


def query_string(filters):
    return urllib.parse.urlencode([(f"{f}__arraycontains" if FACETS[f] else f, value) for f, value in filters])


def pages(db):
    """{kind: [filters]}: a page per value, per pair of values (of two facets, or two stacks), per tag and pair
    of values of two other facets, and per stack and pair of values of two facets of a binary's configuration,
    with and without a tag."""
    _, facets = sql_counts(db, [])
    top = [(facet, value) for facet in FACETS for value in sorted(facets[facet], key=lambda v: -facets[facet][v])[:2]]
    pairs = [[a, b] for a, b in itertools.combinations(top, 2) if a[0] != b[0] or FACETS[a[0]]]
    tag = top[0]
    others = [selected for selected in top if selected[0] != "tag"]
    stacks = [selected for selected in others if FACETS[selected[0]]]
    configuration_pairs = [(a, b) for a, b in itertools.combinations(others, 2) if a[0] != b[0] and not FACETS[b[0]]]
    configuration_pairs = [(a, b) for a, b in configuration_pairs if not FACETS[a[0]]]
    return {
        "one": [[selected] for selected in top],
        "two": pairs,
        "tag and one": [[tag, selected] for selected in others],
        "tag and two": [[tag, a, b] for a, b in itertools.combinations(others, 2) if a[0] != b[0]],
        "stack and two": [[stack, a, b] for stack in stacks for a, b in configuration_pairs],
        "tag, stack and two": [[tag, stack, a, b] for stack in stacks for a, b in configuration_pairs],
    }


def traced(ds, path):
    return ds.client.get(f"{path}&_trace=1" if "?" in path else f"{path}?_trace=1")


async def answer(ds, filters):
    response = await traced(ds, f"/cache/binaries.json?{query_string(filters)}&_facet_size=max")
    assert response.status_code == 200, response.text[:300]
    data = response.json()
    sql = [" ".join(trace["sql"].split()) for trace in data["_trace"]["traces"] if trace["type"] == "sql"]
    return data, sql


def served(db, **settings):
    return Datasette(immutables=[str(db)], metadata=METADATA, settings={"trace_debug": True, **settings})


LIVE_COUNT = ("select count(*) from binaries", "select count(*) from page_specs")
LIVE_FACETS = "with facet as materialized"
PER_KEY = "with per_key as materialized"


@pytest.mark.asyncio
async def test_counts_and_facets_equal_sql_and_come_from_the_count_tables(shaped):
    """Every page filtered by one value, a tag and one value, two values, a tag and two values, or a stack and
    two values of a binary's configuration (with a tag or not): its count and every facet equal SQL's. One
    value, or a tag and one: all from the count tables; the others: the count from the tables (a stack and two
    more from the cells of each tag's stacks: they were counted live, past the time limit at real size), the
    facets that they cannot answer counted live."""
    ds = served(shaped)
    for kind, filter_sets in pages(shaped).items():
        for filters in filter_sets:
            data, sql = await answer(ds, filters)
            rows, facets = sql_counts(shaped, filters)
            assert data["filtered_table_rows_count"] == rows, (kind, filters)
            assert {f: {v["value"]: v["count"] for v in data["facet_results"][f]["results"]} for f in FACETS} == facets
            assert not any(statement.startswith(LIVE_COUNT) for statement in sql), (kind, filters)
            if kind in ("one", "tag and one"):
                assert not any(statement.startswith(LIVE_FACETS) for statement in sql), (kind, filters)


@pytest.mark.asyncio
async def test_facets_in_datasette_order_and_truncated_as_datasette_does(spread):
    data, _ = await answer(served(spread), [("os", "rhel8")])
    for facet in FACETS:
        counted = [(-value["count"], value["value"]) for value in data["facet_results"][facet]["results"]]
        assert counted == sorted(counted), facet
    response = await served(spread).client.get("/cache/binaries.json?os=rhel8&_facet_size=2")
    stacks = response.json()["facet_results"]["stacks"]
    assert len(stacks["results"]) == 2 and stacks["truncated"]


@pytest.mark.asyncio
async def test_a_count_the_tables_cannot_give_is_left_out_when_it_takes_longer_than_the_time_left(spread, monkeypatch):
    """An os and two stacks, or a filter on another column: no count table answers. Within the time the page
    has left (a count, like a facet, is something the page can do without) the count is given; past it the
    page answers at once with its rows and no count, and the facets it cannot count in time are named."""
    filters = [("os", "rhel8"), ("stacks", "e4s"), ("stacks", "root")]
    for query in (query_string(filters), f"{query_string(filters[:1])}&version__startswith=1"):
        counted = (await served(spread).client.get(f"/cache/binaries.json?{query}")).json()
        assert counted["filtered_table_rows_count"] > 0
        monkeypatch.setattr(counts, "_time_left", lambda datasette, counted: 1)
        response = await served(spread, facet_time_limit_ms=1).client.get(f"/cache/binaries.json?{query}")
        assert response.status_code == 200
        data = response.json()
        assert data["filtered_table_rows_count"] is None
        assert data["rows"] and "stacks" not in data["facet_results"]
        page = await served(spread, facet_time_limit_ms=1).client.get(f"/cache/binaries?{query}")
        assert page.status_code == 200 and "<tbody>" in page.text
        assert not re.search(r"[\d,]+ rows? where", page.text) and re.search(
            "These facets timed out: [^<]*stacks", page.text
        )
        monkeypatch.undo()


def test_a_live_count_has_the_time_the_page_has_left_and_never_less_than_a_facet(monkeypatch):
    """What is left of the SQL time limit since the filters were read, less half a facet's limit kept for
    the rest of the page: a broad search counted after its rows were read still gets its count."""
    ds = Datasette(settings={"sql_time_limit_ms": 1000, "facet_time_limit_ms": 200})
    monkeypatch.setattr(counts, "monotonic", lambda: 10.0)
    for spent, left in ((0.0, 900), (0.3, 600), (0.7, 200), (5.0, 200)):
        assert counts._time_left(ds, counts.Count("cache", "binaries", 10.0 - spent, {})) == left, spent


@pytest.mark.asyncio
async def test_a_live_count_that_took_longer_than_a_facet_may_leaves_the_live_facets_out(spread, monkeypatch):
    """A facet counted live reads the rows the live count read, and more: when the count took longer than a
    facet may, the page keeps its count and names those facets as timed out without counting them (here, none
    of them is in the count tables). With a quick count, they are counted."""
    query = query_string([("os", "rhel8"), ("stacks", "e4s"), ("stacks", "root")])
    quick = (await traced(served(spread), f"/cache/binaries.json?{query}")).json()
    assert set(quick["facet_results"]) == set(FACETS)
    clock = iter(range(0, 10**6, 300))  # each reading of the clock 300 ms after the last
    monkeypatch.setattr(counts, "monotonic", lambda: next(clock) / 1000)
    ds = served(spread, facet_time_limit_ms=200)
    slow = (await traced(ds, f"/cache/binaries.json?{query}")).json()
    assert slow["filtered_table_rows_count"] == quick["filtered_table_rows_count"] > 0
    live = set(FACETS) - set(slow["facet_results"])
    assert live == set(FACETS)
    for data, counted in ((quick, True), (slow, False)):
        sql = [trace["sql"] for trace in data["_trace"]["traces"] if trace["type"] == "sql"]
        assert any(statement.startswith((LIVE_FACETS, PER_KEY)) for statement in sql) == counted
    page = (await ds.client.get(f"/cache/binaries?{query}")).text
    [timed_out] = re.findall("These facets timed out: ([^<]*)", page)
    assert sorted(timed_out.strip().split(", ")) == sorted(live)


@pytest.mark.parametrize("search", ["pkg1", "rhel8 zen3", "e4s"])
@pytest.mark.asyncio
async def test_a_search_is_counted_from_its_listings_binaries_and_equals_sql(shaped, search):
    """A search (alone or with columns a listing determines) adds up the binaries the build counted for each
    listing it matches, read by the listing's key: not the view's rows through a dozen joins, nor each binary
    (a broad search matches millions). A filter on a facet whose ids listing_binaries holds (os, target,
    compiler, stacks; any lookup) is checked on that row, not on the listing and its configuration (a stack asked
    for, by the sets that hold it); the full-text index leaves such filters to it but an element of the stacks,
    and checks the others (a package) itself."""
    conn = sqlite3.connect(shaped)
    conn.create_function("escape_fts", 1, escape_fts)  # as Datasette registers it
    matches = "listing_id IN (SELECT rowid FROM listings_fts WHERE listings_fts MATCH ?)"
    [(compiler, stack, package)] = conn.execute(
        "SELECT compiler, stacks ->> '$[0]', package FROM binaries GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
    )
    for extra, condition, params, on_listing in (
        ("", "", [], False),
        ("&os=rhel8", " AND os = ?", ["rhel8"], False),
        (
            f"&compiler={compiler}&target__not=zen3",
            " AND compiler = ? AND target <> ?",
            [compiler, "zen3"],
            False,
        ),
        (f"&stacks__arraycontains={stack}", " AND ? IN (SELECT value FROM json_each(stacks))", [stack], False),
        (f"&os=rhel8&package={package}", " AND os = ? AND package = ?", ["rhel8", package], True),
    ):
        response = await traced(
            served(shaped),
            f"/cache/binaries.json?_search={urllib.parse.quote(search)}{urllib.parse.quote(extra, '&=')}",
        )
        data = response.json()
        expected = conn.execute(f"SELECT count(*) FROM binaries WHERE {matches}{condition}", [search, *params])
        assert data["filtered_table_rows_count"] == expected.fetchone()[0], extra
        [count] = [trace for trace in data["_trace"]["traces"] if trace["sql"].startswith(LISTINGS_SUM)]
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {count['sql']}", count["params"])]
        assert plan[:2] == [
            "SCAN listings_fts VIRTUAL TABLE INDEX 0:M8",
            "SEARCH listing_binaries USING INTEGER PRIMARY KEY (rowid=?)",
        ], plan
        assert not any("page_specs" in step or "SUBQUERY" in step for step in plan[:2]), plan
        looked_up = {step.split()[1] for step in plan if step.startswith("SEARCH ")}
        assert ({"listings", "configurations"} <= looked_up) == on_listing, (extra, plan)
        # The sets that hold a stack are read by index from its elements, not every set through json_each.
        assert ("stack_set_members" in looked_up) == ("stacks" in extra), (extra, plan)
        assert not any("json_each" in step for step in plan), (extra, plan)
        narrowed = counts.FILTERS_IN_INDEX in count["sql"]
        assert narrowed == ("stacks" in extra or "package" in extra), extra


LISTINGS_SUM = "select coalesce(sum(listing_binaries.binaries), 0) from"
GATHERED = "in (select rowid from listings_fts"  # Datasette's search filter: every match gathered first


@pytest.mark.parametrize(
    "query",
    [
        "_search=rhel8",
        "_search=ubuntu22.04&os=ubuntu22.04&_size=7&_next=14",
        "_search=e4s&_sort_desc=version&_size=20",
        "_search=e4s&_facet=version&_facet_size=max&_nocount=1",
        "_searchmode=raw&_search=rhel8 OR rocky9",
        "_search=rhel8&package={package}",
    ],
)
@pytest.mark.asyncio
async def test_a_search_reads_its_matches_in_the_index_order_and_gives_datasette_s_rows(shaped, query):
    """Every statement of a searched page is run with the full-text index's matches leading, joined to the
    binaries by listing: it gathers no list of the matches first (Datasette's `listing_id in (select rowid
    ...)`, for which a broad search of the spread history gathered 1.5 million listings before its first row),
    and a filter on a column a listing determines is checked on each match, not gathered as a list of
    listings either (an os's: 300-470 ms before a search of hdf5 read its first match). The page's rows, in their
    order, and a facet Datasette counts live are those of Datasette's statement as written."""
    conn = sqlite3.connect(shaped)
    conn.create_function("escape_fts", 1, escape_fts)  # as Datasette registers it
    package = conn.execute(  # the least listed of those rhel8 matches: its keys are few enough to narrow by
        f"SELECT package FROM binaries WHERE {SEARCHED} GROUP BY package ORDER BY count(*), package", ["rhel8"]
    ).fetchone()[0]
    data = (await traced(served(shaped), f"/cache/binaries.json?{query.format(package=package)}")).json()
    written = data["query"]
    assert GATHERED in written["sql"]
    expected = [list(row) for row in conn.execute(written["sql"], written["params"])]
    assert data["rows"] == expected[: len(data["rows"])] and len(expected) == len(data["rows"]) + bool(data["next"])
    assert data["rows"]
    run = [trace for trace in data["_trace"]["traces"] if trace["type"] == "sql"]
    assert not any(GATHERED in trace["sql"] for trace in run)
    columns = written["sql"].split(" from ")[0]
    [rows] = [trace for trace in run if trace["sql"].startswith(f"{columns} from ")]
    plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {rows['sql']}", rows["params"])]
    # The matches are the outer loop, read once as they come (never again per row of another loop).
    assert plan[:3] == [
        "CO-ROUTINE search_matches",
        "SCAN listings_fts VIRTUAL TABLE INDEX 0:M8",
        "SCAN search_matches",
    ]
    assert plan.count("SCAN listings_fts VIRTUAL TABLE INDEX 0:M8") == 1, plan
    assert not any(step.startswith(("LIST SUBQUERY", "MATERIALIZE")) for step in plan[:4]), plan
    # A filter on a column the key determines is checked on each match as it comes: no list of the keys it selects.
    assert "select configuration_id from configuration_specs" not in rows["sql"]
    gathered = [then for step, then in zip(plan, plan[1:], strict=False) if step.startswith("LIST SUBQUERY")]
    assert not any(" listings " in then for then in gathered), plan
    if "_facet=version" in query:
        searched = written["sql"].split(" where ", 1)[1].split(" limit ")[0]
        versions = f"SELECT version, count(*) FROM binaries WHERE {searched} GROUP BY version"
        faceted = {value["value"]: value["count"] for value in data["facet_results"]["version"]["results"]}
        assert faceted == dict(conn.execute(versions, written["params"]))


def facet_questions():
    """(selections, facet) the count tables answer: every facet unfiltered, filtered by one value, and by a tag and
    one value."""
    values = [("tag", "develop"), ("os", "rhel8"), ("target", "zen3"), ("compiler", "gcc@13.2.0"), ("stacks", "e4s")]
    selections = [[], *([selected] for selected in values), *([values[0], selected] for selected in values[1:])]
    return [(selected, facet) for selected in selections for facet in FACETS]


def count_tables(db):
    """The count tables the plugin reads for the binaries page of a database called cache."""
    return asyncio.run(counts.count_tables(served(db), "cache", "binaries"))


def vm_steps(db, sql, params):
    """(rows, SQLite virtual machine steps) of a query, once the connection has read the schema."""
    conn = sqlite3.connect(db)
    conn.execute("SELECT 1 FROM sqlite_master").fetchall()
    steps = [0]

    def step():
        steps[0] += 1

    conn.set_progress_handler(step, 1)
    rows = conn.execute(sql, params).fetchall()
    return len(rows), steps[0]


def combinations(db):
    return (
        sqlite3.connect(db)
        .execute("SELECT count(*) FROM (SELECT DISTINCT tag, os, target, compiler, stacks FROM binaries)")
        .fetchone()[0]
    )


def test_the_work_of_a_facet_is_bounded_by_its_values_not_by_the_combinations(tmp_path):
    """Two spread databases with the same values, one with 25 times the binaries and many times the combinations
    of os, target, compiler and stacks: answering each facet from the count tables takes about the same
    number of SQLite steps in both, a few per value shown; counting it live takes steps per binary."""
    small = spread_db(tmp_path / "small", TAGS[:2], 6, 6)
    big = spread_db(tmp_path / "big", TAGS[:2], 6, 150)
    assert combinations(big) > 10 * combinations(small)
    tables = count_tables(big)
    for selected, facet in facet_questions():
        sql, params = counts.facet_query(tables, selected, facet, FACETS[facet])
        (small_rows, small_steps), (big_rows, big_steps) = (vm_steps(db, sql, params) for db in (small, big))
        assert big_rows <= 7 and big_steps <= 40 + 25 * big_rows, (selected, facet)  # 7: the stacks and root
        assert big_steps <= 40 + 2 * small_steps, (selected, facet)
    clause, params = where([("os", "rhel8")])
    live = f"SELECT target, count(*) FROM binaries{clause} GROUP BY target"
    assert vm_steps(big, live, params)[1] > 10 * vm_steps(small, live, params)[1]


def test_the_count_tables_are_read_through_their_primary_keys(spread):
    conn = sqlite3.connect(spread)
    tables = count_tables(spread)
    for selected, facet in facet_questions():
        sql, params = counts.facet_query(tables, selected, facet, FACETS[facet])
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        reads = [step for step in plan if " binaries_" in step]
        assert reads and all(step.startswith("SEARCH") and "USING PRIMARY KEY" in step for step in reads), plan


def test_a_stack_with_values_of_a_binary_s_configuration_is_counted_from_the_cells_of_each_tag_s_stacks(spread):
    """A page filtered by one stack and by the tag, os, target or compiler: its count, and the facets of the other
    columns, read the cells of that stack in each tag (tag_stack_cell_names), by their key. A row counts one
    stack: two stacks, the facet of the stacks of a page filtered by one, or any facet of a page filtered by none
    would be counted wrong from them, and are not."""
    conn = sqlite3.connect(spread)
    cells = next(tables for tables in count_tables(spread) if tables.tables == {"tag_stack_cell_names"})
    stack, os_, compiler = ("stacks", "e4s"), ("os", "rhel8"), ("compiler", "gcc@13.2.0")
    questions = [cells.count_query([stack, os_, compiler])] + [
        cells.facet_query([stack, os_, compiler], facet) for facet in ("tag", "target")
    ]
    for sql, params in questions:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        assert any(step.startswith("SEARCH cells USING PRIMARY KEY (tag_id=? AND stack=?") for step in plan), plan
        assert not any(step.startswith("SCAN cells") for step in plan), plan
    assert cells.count_query([stack, ("stacks", "root"), os_]) is None
    assert cells.count_query([os_, compiler]) is None
    assert cells.facet_query([stack, os_], "stacks") is None
    assert cells.facet_query([os_], "target") is None
    assert cells.facet_query([os_, compiler], "stacks") is not None


@pytest.mark.asyncio
async def test_tag_matrix_of_each_stack_of_each_tag_counts_what_binaries_holds(shaped):
    """tag_matrix with a stack (as a user asks it): the binaries of the tag in the stack and their packages, per
    os, target and compiler, as SQL counts them from the binaries view, pages partly in the stack included."""
    conn = sqlite3.connect(shaped)
    expected = {}
    for tag, stack, *cell in conn.execute(
        "SELECT tag, stack.value, os, target, compiler, count(*), count(DISTINCT package)"
        " FROM binaries, json_each(binaries.stacks) AS stack GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5"
    ):
        expected.setdefault((tag, stack), []).append(tuple(cell))
    assert len(expected) > 10
    ds = served(shaped)
    for (tag, stack), cells in expected.items():
        query = urllib.parse.urlencode({"tag": tag, "stack": stack, "_shape": "objects"})
        rows = (await ds.client.get(f"/cache/tag_matrix.json?{query}")).json()["rows"]
        assert [(r["os"], r["target"], r["compiler"], r["specs"], r["packages"]) for r in rows] == cells, (tag, stack)


@pytest.mark.parametrize("stack", ["", "e4s"])
def test_tag_matrix_reads_the_cells_the_build_counted_by_their_key(spread, stack):
    """Whether it is asked for a whole tag or a stack of it, tag_matrix reads the cells it shows, by their key
    (tag_cells, tag_stack_cells), whatever the number of the tag's binaries; it scans no table but the tags'
    names (the newest when none is given: default_tag)."""
    sql = canned.named("tag_matrix").sql
    plan = [
        row[3] for row in sqlite3.connect(spread).execute(f"EXPLAIN QUERY PLAN {sql}", {"tag": TAGS[0], "stack": stack})
    ]
    reads = [step for step in plan if step.startswith(("SCAN", "SEARCH")) and "CONSTANT ROW" not in step]
    assert [step for step in reads if step.split()[1] == "cells"] == [
        "SEARCH cells USING PRIMARY KEY (tag=?)",  # tag_cells
        "SEARCH cells USING PRIMARY KEY (tag_id=? AND stack=?)",  # tag_stack_cells
    ], plan
    assert {step.split()[1] for step in reads if step.startswith("SCAN")} <= {
        "args",
        "default_tag",
        "row_limit",
        "tags",
    }, plan


def test_adding_changing_and_removing_tags_counts_as_a_fresh_build(tmp_path):
    """The counts of every tag are kept by taking away what the recounted tags had and adding what they have:
    after tags are added, changed and removed, every count table equals a fresh build's; the binaries of each
    listing, kept as binaries are written and deleted, equal SQL's count."""
    site = write_spread_corpus(tmp_path / "site", TAGS[:2], 6, 10)
    db = tmp_path / "cache.db"
    build([str(site)], db)
    write_spread_corpus(site, TAGS[2:], 6, 10)
    shutil.rmtree(site / "_cache" / TAGS[0] / "pkg3")
    shutil.rmtree(site / "_cache" / TAGS[1])
    page = site / "_cache" / TAGS[0] / "pkg1" / "specs.md"
    page.write_text(page.read_text().replace('"rhel8"', '"rocky9"'))
    assert build([str(site)], db).incremental
    fresh = tmp_path / "fresh.db"
    build([str(site)], fresh)
    assert kept_counts(db) == kept_counts(fresh)
    for built in (db, fresh):
        stored, counted = listing_binaries(built)
        assert stored == counted and len(stored) > 50


def listing_binaries(db):
    """(the rows of listing_binaries the build kept, those SQL gives: each listing's facet ids and binaries):
    every listing has binaries."""
    conn = sqlite3.connect(db)
    try:
        return (
            conn.execute("SELECT * FROM listing_binaries ORDER BY 1").fetchall(),
            conn.execute(
                "SELECT listings.id, os_id, target_id, compiler_id, stack_set_id, count(*) FROM listings"
                " JOIN configurations ON configurations.id = configuration_id"
                " JOIN page_specs ON listing_id = listings.id GROUP BY 1"
            ).fetchall(),
        )
    finally:
        conn.close()


# Those whose rows are ids, read by what they name, so that databases numbered differently compare.
NAMED = {
    "tag_version_counts": "SELECT package, version, tag, binaries FROM version_tags",
    "tag_stack_cells": "SELECT tags.name, stack, oss.name, targets.name, compilers.label, binaries, packages"
    " FROM tag_stack_cells JOIN tags ON tags.id = tag_id"
    " JOIN oss ON oss.id = os_id JOIN targets ON targets.id = target_id JOIN compilers ON compilers.id = compiler_id",
}


def kept_counts(db):
    assert {r.child for r in schema.REFERENCES} & set(KEPT_PER_TAG) <= NAMED.keys()
    conn = sqlite3.connect(db)
    return {table: sorted(conn.execute(NAMED.get(table, f"SELECT * FROM {table}"))) for table in KEPT_PER_TAG}


def counted_from_nothing(db):
    """kept_counts of a copy of db whose every tag is counted again from empty count tables."""
    copy = db.with_name("counted again.db")
    shutil.copyfile(db, copy)
    conn = sqlite3.connect(copy, isolation_level=None)
    conn.execute("BEGIN")
    for table in KEPT_PER_TAG:
        conn.execute(f"DELETE FROM {table}")
    maintenance.refresh_counts(
        conn, [tag_id for (tag_id,) in conn.execute("SELECT id FROM tags")], count_every_row=True
    )
    conn.execute("COMMIT")
    return kept_counts(copy)


def test_a_full_build_counts_each_tag_while_it_reads_the_next(tmp_path, monkeypatch):
    """The writer process counts a tag once its pages are written, while the build reads on; the end of a full
    build counts no tag. A tag whose pages come again after it was counted (a second checkout, read last) is
    counted again."""
    site = write_spread_corpus(tmp_path / "site", TAGS, 6, 10)
    later = write_page(tmp_path / "zz-checkout", "zlib", TAGS[0], [spec("later", stacks=["e4s"])]).parents[3]
    left_to_the_end = []
    refresh = maintenance.refresh_counts

    def recorded(conn, tag_ids, count_every_row):
        left_to_the_end.append(set(tag_ids))
        refresh(conn, tag_ids, count_every_row)

    monkeypatch.setattr(maintenance, "refresh_counts", recorded)
    db = tmp_path / "cache.db"
    build([str(site), str(later)], db)
    assert left_to_the_end == [set()]
    counted = kept_counts(db)
    assert ("tag", TAGS[0], "stacks", "e4s") in {row[:4] for row in counted["binaries_facet_pairs"]}
    assert counted == counted_from_nothing(db)


def test_pages_left_out_after_their_tag_was_counted_are_counted_out(tmp_path):
    """With --keep-going, a page that gives a hash other facts than an earlier tag is left out once the writer
    has found it, after its tag was counted: that tag is counted again without it."""
    write_page(tmp_path, "bolt", TAGS[0], [spec(1)])
    write_page(tmp_path, "bolt", TAGS[2], [spec(1, target="zen3"), spec(2)])
    write_page(tmp_path, "cli11", TAGS[2], [spec(3)])
    db = tmp_path / "cache.db"
    summary = build([str(tmp_path / "_cache")], db, keep_going=True)
    assert len(summary.rejected) == 1
    counted = kept_counts(db)
    assert ("tag", TAGS[2], 1) in counted["binaries_facet_counts"]
    assert counted == counted_from_nothing(db)


@pytest.mark.asyncio
async def test_a_database_without_the_count_tables_is_counted_live(spread, tmp_path):
    """A database built before these count tables were (served by this plugin, metadata and all): its pages
    answer, counted live; a search without the binaries per listing counts each binary."""
    older = tmp_path / "cache.db"
    shutil.copy(spread, older)
    with sqlite3.connect(older) as conn:
        for table in ("binaries_facet_counts", "binaries_facet_pairs", "binaries_tag_facet_pairs", "listing_binaries"):
            conn.execute(f"DROP TABLE {table}")
    for filters in ([], [("os", "rhel8")], [("tag", "develop"), ("stacks", "e4s")]):
        data, sql = await answer(served(older), filters)
        rows, facets = sql_counts(spread, filters)
        assert data["filtered_table_rows_count"] == rows
        assert {f: {v["value"]: v["count"] for v in data["facet_results"][f]["results"]} for f in FACETS} == facets
    data = (await traced(served(older), "/cache/binaries.json?_search=rhel8&_facet_size=max")).json()
    facets = sql_facets(spread, f" WHERE {SEARCHED}", ["rhel8"])
    assert data["filtered_table_rows_count"] == sum(facets["tag"].values()) > 0
    assert {f: {v["value"]: v["count"] for v in data["facet_results"][f]["results"]} for f in FACETS} == facets
    assert not any("listing_binaries" in trace["sql"] for trace in data["_trace"]["traces"])


@pytest.mark.asyncio
async def test_a_package_is_counted_from_its_versions_counts(shaped):
    """A page of a package (and a tag): its count and its tags from the binaries per version and tag the build
    counted (version_tags), the other facets live."""
    conn = sqlite3.connect(shaped)
    package, tag = conn.execute("SELECT package, tag FROM binaries GROUP BY 1, 2 ORDER BY count(*) DESC").fetchone()
    for query, condition, params in (
        (f"package={package}", "package = ?", [package]),
        (f"package={package}&tag={tag}", "package = ? AND tag = ?", [package, tag]),
    ):
        response = await traced(served(shaped), f"/cache/binaries.json?{query}&_facet_size=max")
        data = response.json()
        sql = [trace["sql"] for trace in data["_trace"]["traces"]]
        assert (
            data["filtered_table_rows_count"]
            == conn.execute(f"SELECT count(*) FROM binaries WHERE {condition}", params).fetchone()[0]
        )
        assert not any(statement.startswith(LIVE_COUNT) for statement in sql)
        tags = dict(conn.execute(f"SELECT tag, count(*) FROM binaries WHERE {condition} GROUP BY tag", params))
        assert {value["value"]: value["count"] for value in data["facet_results"]["tag"]["results"]} == tags
        # The other facets in one live query, which does not count the tags again: through the view's rows
        # (with a tag) or per listing (a package alone, whose binaries' pages are not grouped for their tag).
        [live] = [statement for statement in sql if statement.startswith((LIVE_FACETS, PER_KEY))]
        if query == f"package={package}":
            assert live.startswith(PER_KEY) and "page_tags" not in live
        else:
            assert live.startswith(LIVE_FACETS) and "select compiler, os, stacks, target from" in live


SEARCHED = "listing_id IN (SELECT rowid FROM listings_fts WHERE listings_fts MATCH escape_fts(?))"


@pytest.mark.asyncio
async def test_facets_a_listing_determines_are_counted_per_listing_and_equal_sql(shaped):
    """A page filtered by nothing but columns a binary's listing determines (its package, os... and, searched,
    its stacks or its tag) and a search of listings: the facets the count tables cannot answer are counted per
    listing on page_specs (a tag's binaries, with a tag), then per configuration and per set of stacks, never
    through the view's rows; they equal SQL's. The most listed
    package of the spread shape counted through the view took 513 ms, past the facet time limit."""
    conn = sqlite3.connect(shaped)
    package, os_name = conn.execute("SELECT package, os FROM binaries GROUP BY 1, 2 ORDER BY count(*) DESC").fetchone()
    (stack,) = conn.execute(  # the least listed stack of the os: a set of stacks is a part its listing determines
        "SELECT j.value FROM binaries, json_each(stacks) j WHERE os = ? GROUP BY 1 ORDER BY count(*), 1", [os_name]
    ).fetchone()
    (tag,) = conn.execute("SELECT tag FROM binaries WHERE os = ? GROUP BY 1 ORDER BY count(*), 1", [os_name]).fetchone()
    in_stack = "? IN (SELECT value FROM json_each(stacks))"
    for query, condition, params in (
        (f"package={package}", "package = ?", [package]),
        (f"package={package}&os={os_name}", "package = ? AND os = ?", [package, os_name]),
        (f"_search={os_name}&package={package}", f"{SEARCHED} AND package = ?", [os_name, package]),
        (f"_search={os_name}&stacks__arraycontains={stack}", f"{SEARCHED} AND {in_stack}", [os_name, stack]),
        (
            f"_search={os_name}&stacks__arraycontains={stack}&package={package}",
            f"{SEARCHED} AND {in_stack} AND package = ?",
            [os_name, stack, package],
        ),
        (f"_search={os_name}&tag={tag}", f"{SEARCHED} AND tag = ?", [os_name, tag]),
        (
            f"_search={os_name}&tag={tag}&package={package}",
            f"{SEARCHED} AND tag = ? AND package = ?",
            [os_name, tag, package],
        ),
        ("version__startswith=1&compiler__not=none", "version LIKE '1%' AND compiler <> 'none'", []),
    ):
        response = await traced(served(shaped), f"/cache/binaries.json?{query}&_facet_size=max")
        data = response.json()
        sql = [trace["sql"] for trace in data["_trace"]["traces"] if trace["type"] == "sql"]
        facets = {f: {v["value"]: v["count"] for v in data["facet_results"][f]["results"]} for f in FACETS}
        assert facets == sql_facets(shaped, f" WHERE {condition}", params), query
        expected = sql_count(shaped, f" WHERE {condition}", params)
        assert data["filtered_table_rows_count"] == expected, query
        assert any(statement.startswith(PER_KEY) for statement in sql), query
        assert not any(statement.startswith(LIVE_FACETS) for statement in sql), query


@pytest.mark.asyncio
async def test_facets_of_a_page_filtered_by_another_column_are_counted_through_the_view(shaped):
    """A filter on a column a binary's listing does not determine (its hash): the page's facets are counted
    through the view's rows, and equal SQL's."""
    conn = sqlite3.connect(shaped)
    package, prefix = conn.execute("SELECT package, substr(hash, 1, 1) FROM binaries ORDER BY hash").fetchone()
    response = await traced(
        served(shaped), f"/cache/binaries.json?package={package}&hash__startswith={prefix}&_facet_size=max"
    )
    data = response.json()
    sql = [trace["sql"] for trace in data["_trace"]["traces"] if trace["type"] == "sql"]
    facets = {f: {v["value"]: v["count"] for v in data["facet_results"][f]["results"]} for f in FACETS}
    assert facets == sql_facets(shaped, " WHERE package = ? AND hash LIKE ?", [package, f"{prefix}%"])
    assert any(statement.startswith(LIVE_FACETS) for statement in sql)
    assert not any(statement.startswith(PER_KEY) for statement in sql)


@pytest.mark.parametrize("lookup", ["isnull", "notnull", "isblank", "notblank"])
@pytest.mark.asyncio
async def test_a_filter_without_a_value_on_a_column_a_listing_determines_counts_like_sql(cache_db, lookup):
    """The filter form offers "is null", "is not blank"... on every column: a filter that takes no value gives
    Datasette no parameters (it passes a list, not a dict), and the facets counted per listing must still
    answer, and equal SQL's."""
    response = await served(cache_db).client.get(f"/cache/binaries.json?os__{lookup}=1&_facet_size=max")
    assert response.status_code == 200, response.text[:300]
    data = response.json()
    clause = {
        "isnull": "os IS NULL",
        "notnull": "os IS NOT NULL",
        "isblank": "(os IS NULL OR os = '')",
        "notblank": "(os IS NOT NULL AND os <> '')",
    }[lookup]
    assert data["filtered_table_rows_count"] == sql_count(cache_db, f" WHERE {clause}", [])
    facets = {f: {v["value"]: v["count"] for v in data["facet_results"][f]["results"]} for f in FACETS}
    assert facets == sql_facets(cache_db, f" WHERE {clause}", [])


def test_a_package_s_facets_per_listing_read_indexes_only(spread):
    """What the per-listing count of a package's page reads: its configurations from its versions by index
    (the view once scanned every configuration), the binaries the build counted per listing, and every
    listing, configuration and set of stacks by key, never a binary. No table is scanned but platforms (linux, darwin...),
    which SQLite reads whole rather than by key."""
    ds = served(spread)
    request = Request.fake("/cache/binaries?package=pkg1")
    sql, params = counts.per_key_groups_query(
        request,
        "cache",
        "binaries",
        ds,
        ["compiler", "os", "stacks", "target"],
        asyncio.run(counts.unchanging_names(ds, "cache")),
    )
    conn = sqlite3.connect(spread)
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
    scanned = {step.split()[1] for step in plan if step.startswith("SCAN ")} & tables
    assert scanned <= {"platforms"}, plan
    assert "SEARCH listing_binaries USING INTEGER PRIMARY KEY (rowid=?)" in plan
    assert not any("page_specs" in step for step in plan), plan
    assert any(step.startswith("SEARCH configurations USING COVERING INDEX") for step in plan), plan


@pytest.mark.asyncio
async def test_a_search_with_filters_the_index_holds_finds_the_rows_sql_finds(shaped):
    """A filter on a column the full-text index holds too joins the search (search.py): the page's rows and its
    count are those SQL finds with the search and the filter alone, for the values found most and least of
    each such column (words, versions, compilers, variants' punctuation) and an element of the stacks."""
    conn = sqlite3.connect(shaped)
    conn.create_function("escape_fts", 1, escape_fts)  # as Datasette registers it
    columns = [row[1] for row in conn.execute("PRAGMA table_info(binaries)")]
    in_index = [row[1] for row in conn.execute("PRAGMA table_info(listings_fts)") if row[1] in columns]
    assert {"package", "os", "compiler", "variants", "stacks"} <= set(in_index)
    ds = served(shaped)
    for column in in_index:
        found = conn.execute(
            f"SELECT {column} FROM binaries WHERE {SEARCHED} GROUP BY 1 ORDER BY count(*) DESC, 1", ["linux"]
        ).fetchall()
        for (value,) in {found[0], found[-1]}:
            if column == "stacks":
                key, value, condition = (
                    "stacks__arraycontains",
                    json.loads(value)[-1],
                    "? IN (SELECT value FROM json_each(stacks))",
                )
            else:
                key, condition = column, f"{column} = ?"
            expected = conn.execute(
                f"SELECT * FROM binaries WHERE {SEARCHED} AND {condition}", ["linux", value]
            ).fetchall()
            query = urllib.parse.urlencode({"_search": "linux", key: value})
            data = (await ds.client.get(f"/cache/binaries.json?{query}&_size=max")).json()
            assert sorted(map(tuple, data["rows"])) == sorted(expected), (key, value)
            assert data["filtered_table_rows_count"] == len(expected) > 0, (key, value)
            # (Datasette leaves a response of over 256 KB unfinished when it adds a trace to it: one row here.)
            traces = (await traced(ds, f"/cache/binaries.json?{query}&_size=1")).json()["_trace"]["traces"]
            run = [trace["sql"] for trace in traces if trace["type"] == "sql"]
            assert any(search.FILTERS_IN_INDEX in sql and " limit " in sql for sql in run), (key, value)
