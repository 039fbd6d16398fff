"""The dependencies view's row counts from the edges the build counted per dependency version and kind
(dependency_edge_counts): equal to SQL's counts after fresh and incremental builds, served for a page filtered by
the dependency, its version and the edge's kind from a few rows of that table, whatever the number of edges;
other filters counted live, never wrong."""

import sqlite3
import urllib.parse

import pytest
from mirrors import write_v2
from test_dependents import datasette_for, develop_spec, index, library_tag, plan, whole_reads

from spack_cache_db.build import build

COUNTED = ("dependency", "dependency_version", "deptypes", "virtuals")  # what the count table names
STORED = f"SELECT {', '.join(COUNTED)}, edges FROM dependency_edge_totals ORDER BY 1, 2, 3, 4"
COUNTED_WITH_SQL = f"SELECT {', '.join(COUNTED)}, count(*) FROM dependencies GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"


def edge_counts(db):
    """(the counts stored, the edges counted with SQL)."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(STORED).fetchall(), conn.execute(COUNTED_WITH_SQL).fetchall()
    finally:
        conn.close()


def build_mirrors(folder, db, tags):
    """Build db from one v2 mirror per tag ({tag: [record]}); the mirrors of tags not given go."""
    for tag, records in tags.items():
        write_v2(folder / tag, index(records))
    return build([f"{tag}={folder / tag}" for tag in tags], db)


def test_the_samples_edges_are_counted_as_sql_counts_them(index_db):
    stored, counted = edge_counts(index_db)
    assert stored == counted and len(stored) > 5


# Each build onto the last: zlib@1.0 (every tag has two zlib binaries of that version) keeps edges from the tags
# that stay while those of a tag that goes or changes go, so a count must lose exactly the edges deleted. (A
# release's index is read again only when its mirror moves: develop is the tag that changes.)
BUILDS = {
    "three tags": {tag: (40, 30) for tag in ("develop", "v1", "v2")},
    "a tag added": {tag: (40, 30) for tag in ("develop", "v1", "v2", "v3")},
    "a tag changed": {"develop": (12, 50), "v1": (40, 30), "v2": (40, 30), "v3": (40, 30)},
    "a tag removed": {"develop": (12, 50), "v1": (40, 30), "v3": (40, 30)},
    "a release with no dependent of zlib added": {"develop": (12, 50), "v1": (40, 30), "v3": (40, 30), "v4": (0, 30)},
    # zlib's edges go (a release does not change: those with edges go whole), its version stays (v4 lists it):
    # the counts reach 0 while the version they count remains
    "no dependent of zlib left": {"develop": (0, 50), "v4": (0, 30)},
}


def test_incremental_builds_count_the_edges_they_write_and_delete_as_a_fresh_build_does(tmp_path):
    db = tmp_path / "cache.db"
    for number, (name, shape) in enumerate(BUILDS.items()):
        tags = {tag: library_tag(tag, *sizes) for tag, sizes in shape.items()}
        summary = build_mirrors(tmp_path / "mirrors", db, tags)
        assert summary.incremental == (number > 0), name
        fresh = tmp_path / f"fresh{number}.db"
        build_mirrors(tmp_path / f"fresh{number}", fresh, tags)
        stored, counted = edge_counts(db)
        assert stored == counted, name
        assert edge_counts(fresh) == (stored, counted), name
        zlib_linked = ("zlib", "1.0", '["build", "link"]', "[]") in {row[:4] for row in stored}
        assert zlib_linked == any(dependents for dependents, _ in shape.values()), name


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served")
    db = folder / "cache.db"
    build_mirrors(folder, db, {tag: library_tag(tag, 60, 40) for tag in ("develop", "v1")})
    return db


async def counted(db, filters):
    """(the row count the page of the dependencies view with these filters shows, the SQL that counted it)."""
    path = f"/cache/dependencies.json?{urllib.parse.urlencode(filters)}&_trace=1&_size=1"
    answer = (await datasette_for(db).client.get(path)).json()
    counts = ("select count(*) from ", "select coalesce(sum(edges), 0) from ")
    sql = [(trace["sql"], trace["params"]) for trace in answer["_trace"]["traces"] if trace["sql"].startswith(counts)]
    return answer["filtered_table_rows_count"], sql


def with_sql(db, filters):
    where = " AND ".join(f"{column} = ?" for column, _ in filters)
    conn = sqlite3.connect(db)
    return conn.execute(f"SELECT count(*) FROM dependencies WHERE {where}", [v for _, v in filters]).fetchone()[0]


def count_table_filters(db):
    """Pages filtered by each dependency, and by it with each of its versions and each kind of its edges."""
    conn = sqlite3.connect(db)
    rows = conn.execute(STORED).fetchall()
    pages = [[("dependency", name)] for name in {row[0] for row in rows}]
    pages += [[("dependency", row[0]), ("dependency_version", row[1])] for row in rows]
    pages += [[("dependency", row[0]), ("deptypes", row[2]), ("virtuals", row[3])] for row in rows]
    pages += [[("dependency_version", "1.0"), ("deptypes", '["build"]')], [("dependency", "nothing-is-called-so")]]
    return pages


@pytest.mark.asyncio
async def test_a_page_filtered_by_what_the_count_table_names_is_counted_there(served):
    conn = sqlite3.connect(served)
    for filters in count_table_filters(served):
        rows, sql = await counted(served, filters)
        assert rows == with_sql(served, filters), filters
        assert [query.split(" from ")[1].split()[0] for query, _ in sql] == ["dependency_edge_totals"], sql
        steps = plan(conn, *sql[0])
        assert not any("spec_dependencies" in detail for _, detail in steps.values()), steps
        assert whole_reads(steps) == []


def steps_counting(db, filters):
    """SQLite's virtual machine steps of the count the page with these filters is given."""
    conn = sqlite3.connect(db)
    counter = [0]
    conn.set_progress_handler(lambda: counter.__setitem__(0, counter[0] + 1), 1)
    where = " AND ".join(f"{column} = ?" for column, _ in filters)
    conn.execute(f"SELECT coalesce(sum(edges), 0) FROM dependency_edge_totals WHERE {where}", [v for _, v in filters])
    return counter[0]


def test_counting_a_dependency_costs_the_same_for_ten_times_its_edges(tmp_path):
    """zlib@1.0 with 40 dependents in one tag, then with 400 in each of four: the same count rows are read."""
    small = tmp_path / "small" / "cache.db"
    build_mirrors(tmp_path / "small", small, {"develop": library_tag("develop", 40, 20)})
    large = tmp_path / "large" / "cache.db"
    build_mirrors(tmp_path / "large", large, {tag: library_tag(tag, 400, 20) for tag in ("develop", "v1", "v2", "v3")})
    filters = [("dependency", "zlib")]
    assert with_sql(large, filters) > 10 * with_sql(small, filters) > 0
    assert steps_counting(large, filters) == steps_counting(small, filters)


@pytest.mark.asyncio
async def test_other_filters_are_counted_live_and_right(served):
    conn = sqlite3.connect(served)
    spec_hash = develop_spec(conn, "app3")
    zlib_hash = develop_spec(conn, "zlib")
    for filters in (
        [("hash", spec_hash)],
        [("dependency", "zlib"), ("hash", spec_hash)],
        [("dependency_hash", zlib_hash)],
        [("dependency", "zlib"), ("package", "app1")],
    ):
        rows, sql = await counted(served, filters)
        assert rows == with_sql(served, filters) > 0, filters
        assert [query.split(" from ")[1].split()[0] for query, _ in sql] == ["dependencies"], sql


@pytest.mark.asyncio
async def test_a_row_page_counts_the_rows_that_name_it_from_the_kept_counts(served):
    """The page of a dependency kind (and of a listing) shows how many rows of each table name it, as SQL
    counts them, from the counts the build keeps: the edges of a kind summed from dependency_edge_counts (a
    row per dependency version and kind), not counted edge by edge (spec_dependencies has no index by kind:
    every edge of the history would be read). So does the page of the kind's edges it links to."""
    conn = sqlite3.connect(served)
    ds = datasette_for(served)
    for table, row_id in [
        ("dependency_kinds", conn.execute("SELECT max(kind_id) FROM spec_dependencies").fetchone()[0]),
        ("listings", conn.execute("SELECT max(listing_id) FROM page_specs").fetchone()[0]),
    ]:
        answer = (await ds.client.get(f"/cache/{table}/{row_id}.json?_trace=1&_extras=foreign_key_tables")).json()
        shown = {(fk["other_table"], fk["other_column"]): fk["count"] for fk in answer["foreign_key_tables"]}
        assert shown == {
            (other, column): conn.execute(f"SELECT count(*) FROM {other} WHERE {column} = ?", [row_id]).fetchone()[0]
            for other, column in shown
        }
        assert min(shown.values()) > 0, shown
        (statement,) = [
            trace["sql"] for trace in answer["_trace"]["traces"] if trace["sql"].startswith("select (select")
        ]
        assert "count(*) from spec_dependencies" not in statement and "count(*) from page_specs" not in statement
        steps = [step for *_, step in conn.execute(f"EXPLAIN QUERY PLAN {statement}", {"id": row_id})]
        assert not any(" spec_dependencies" in step or " page_specs" in step for step in steps), steps
    kind = conn.execute("SELECT max(kind_id) FROM spec_dependencies").fetchone()[0]
    answer = (await ds.client.get(f"/cache/spec_dependencies.json?kind_id={kind}&_trace=1")).json()
    assert (
        answer["filtered_table_rows_count"]
        == conn.execute("SELECT count(*) FROM spec_dependencies WHERE kind_id = ?", [kind]).fetchone()[0]
    )
    counting = ("select count(*) from", "select coalesce(sum(")
    counts = [trace["sql"] for trace in answer["_trace"]["traces"] if trace["sql"].startswith(counting)]
    assert counts == ["select coalesce(sum(edges), 0) from dependency_edge_counts where kind_id = ?"]
