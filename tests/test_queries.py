"""The canned queries, the download link and search, served by Datasette over the samples' cache.db."""

import html
import json
import re
import sqlite3
import urllib.parse
from pathlib import Path

import pytest
from datasette.app import Datasette
from pagemaker import meta_for, spec, write_page
from test_counts import vm_steps

from spack_cache_db.build import build
from spack_cache_db.query import canned
from spack_cache_db.web import describe

pytestmark = pytest.mark.asyncio

SAMPLE_TAGS = Path(__file__).parent / "data" / "cache.spack.io" / "_cache"
BOLT_PAGE = SAMPLE_TAGS / "develop" / "bolt" / "specs.md"

# Rows each query gives with every field left empty, on the samples (develop is the default tag).
ROWS_WITH_NO_PARAMETERS = {
    "find_binaries": 100,  # develop has 439 binaries; an empty package shows the first 100
    "runs_on_host": 100,
    "search_specs": 100,
    "hash_lookup": 0,  # nothing to look up
    "dependency_tree": 1,  # the sentence saying that dependencies come from build-cache indexes
    "dependents": 1,  # the same sentence
    "package": 0,  # no package chosen
    "package_versions": 14,
    "version_timeline": 14,
    "specs_per_tag": 10,
    "version_tag_specs": 35,
    "tag_diff": 9,  # v0.23.1 -> develop
    "stacks_in_tag": 34,
    "stack_packages": 50,
    "tag_matrix": 17,
    "page_problems": 0,
    "missing_from_root": 0,
    "rebuilt_configurations": 32,
}

HOSTILE = [
    "'",
    '"',
    "*",
    "NEAR(",
    'hdf5" OR "',
    "a AND (b",
    "%_%",
    "'; DROP TABLE specs; --",
    "\\",
    "nul\x00byte",
    "+mpi ~cuda cuda_arch=80 patches:=x ==",
    "zen3\u00e9\u2603",
    "x" * 5000,  # seven parameters of this stay under the 64 kB a URL may have
    " " * 50 + "y " * 2000,
]


METADATA = describe.build_metadata()
QUERIES = METADATA["databases"]["cache"]["queries"]


def datasette_for(db_path):
    return Datasette(immutables=[str(db_path)], metadata=METADATA)


@pytest.fixture(scope="module")
def ds(cache_db):
    return datasette_for(cache_db)


async def query(ds, name, **params):
    """Rows of a canned query, as dicts; fails unless Datasette answered 200 with ok."""
    url = f"/cache/{name}.json?" + urllib.parse.urlencode({**params, "_shape": "objects"})
    response = await ds.client.get(url)
    assert response.status_code == 200, (url[:200], response.text[:500])
    data = response.json()
    assert data["ok"], data
    return data["rows"]


@pytest.mark.parametrize("name", sorted(set(QUERIES) | set(ROWS_WITH_NO_PARAMETERS)))
async def test_query_runs_with_no_parameters(ds, name):
    assert name in QUERIES and name in ROWS_WITH_NO_PARAMETERS
    rows = await query(ds, name)
    assert len(rows) == ROWS_WITH_NO_PARAMETERS[name]


# search_specs calls Datasette's escape_fts, which plain sqlite3 does not have.
@pytest.mark.parametrize("name", sorted(set(ROWS_WITH_NO_PARAMETERS) - {"search_specs"}))
async def test_query_runs_in_sqlite3_as_it_is_with_its_parameters_unset(cache_db, name):
    """What the README promises: queries/<name>.sql runs in sqlite3, unset parameters (the magic :_spec_ ones
    too) counting as empty."""
    sql = QUERIES[name]["sql"]
    unset = dict.fromkeys(re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", sql))
    rows = sqlite3.connect(cache_db).execute(sql, unset).fetchall()
    if name not in ("dependency_tree", "dependents"):  # those two answer Datasette with a sentence row
        assert len(rows) == ROWS_WITH_NO_PARAMETERS[name]


def with_row_limit(sql, rows):
    """The query's SQL with its row_limit set to rows."""
    sql, replaced = re.subn(r"row_limit AS \(SELECT .*? AS rows\b", f"row_limit AS (SELECT {rows} AS rows", sql)
    assert replaced == 1
    return sql


@pytest.mark.parametrize(
    "name",
    sorted(name for name, rows in ROWS_WITH_NO_PARAMETERS.items() if rows > 2 and canned.named(name).row_limit_sql),
)
async def test_each_answer_stops_at_its_row_limit(ds, name):
    """The query's every cap on its answer reads its row_limit: set to 2, the answer is the first 2 rows."""
    sql, db = QUERIES[name]["sql"], ds.get_database("cache")
    unset = dict.fromkeys(re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", sql), "")
    rows = (await db.execute(sql, unset)).rows
    assert [tuple(row) for row in (await db.execute(with_row_limit(sql, 2), unset)).rows] == [
        tuple(row) for row in rows[:2]
    ]


@pytest.mark.parametrize("name", sorted(name for name in QUERIES if canned.named(name).row_limit_sql))
async def test_a_cap_is_written_once_in_its_row_limit(name):
    """No LIMIT or comparison in a query's SQL (comments aside) writes a number of its row_limit again: each
    reads row_limit, so that changing it changes them all. This covers the capped queries whose answers on the
    samples are too short for the test above."""
    sql = re.sub(
        r"'[^']*'|--[^\n]*", lambda match: match.group() if match.group()[0] == "'" else "", QUERIES[name]["sql"]
    )
    definition = re.search(r"row_limit AS \(SELECT .*? AS rows[^)]*\)", sql).group()
    elsewhere = sql.replace(definition, "")
    for number in re.findall(r"\b\d+\b", definition):
        assert not re.search(rf"(?:LIMIT|[<>=])\s*{number}\b|\b{number}\s*[<>=]", elsewhere), (name, number)


@pytest.mark.parametrize(
    "name, params, first",
    [
        ("find_binaries", {}, 100),  # no package: the first 100 of develop's 439
        ("runs_on_host", {}, 100),
        ("search_specs", {}, 100),
        ("find_binaries", {"spec": "bolt"}, None),  # with a package, up to 1,000
        ("search_specs", {"q": "bolt"}, None),
        ("package_versions", {}, None),
        ("stack_packages", {}, None),
        ("version_tag_specs", {}, None),
    ],
)
async def test_a_question_with_more_rows_than_it_shows_says_so(ds, name, params, first):
    response = await ds.client.get(f"/cache/{name}?" + urllib.parse.urlencode(params))
    heading = re.search(r'<h2 class="spack-found">(.*?)</h2>', response.text, re.DOTALL).group(1)
    rows = len(await query(ds, name, **params))
    assert heading.startswith(f"{rows:,} ")
    assert heading.endswith(f": the first {first:,}") if first else "the first" not in heading, heading


@pytest.mark.parametrize("name", sorted(ROWS_WITH_NO_PARAMETERS))
async def test_query_html_page_renders(ds, name):
    response = await ds.client.get(f"/cache/{name}")
    assert response.status_code == 200
    title = QUERIES[name]["title"]
    assert title in response.text


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: repr(v[:20]))
@pytest.mark.parametrize("name", sorted(ROWS_WITH_NO_PARAMETERS))
async def test_hostile_parameters_are_answered_not_failed(ds, name, value):
    params = QUERIES[name]["params"]
    await query(ds, name, **{param: value for param in params})


async def test_no_parameter_defaults_to_develop(ds):
    rows = await query(ds, "find_binaries")
    assert {row["tag"] for row in rows} == {"develop"}
    assert rows[0]["package"] == "bolt"


async def test_without_develop_the_default_tag_is_the_newest(tmp_path):
    db_path = tmp_path / "cache.db"
    build([str(SAMPLE_TAGS / "develop-2025-04-20"), str(SAMPLE_TAGS / "v0.23.1")], db_path)
    rows = await query(datasette_for(db_path), "find_binaries")
    assert {row["tag"] for row in rows} == {"v0.23.1"}


async def test_find_binaries_of_a_package_in_a_tag(ds):
    rows = await query(ds, "find_binaries", package="hdf5", tag="develop-2025-04-20")
    assert len(rows) == 46
    assert [row["version"] for row in rows[:1]] + [rows[-1]["version"]] == ["1.14.6", "1.8.23"]
    first = rows[0]
    assert first["spec"].startswith("hdf5@1.14.6")
    assert first["install"].splitlines() == [
        "spack mirror add develop-2025-04-20 https://binaries.spack.io/develop-2025-04-20",
        "spack buildcache keys --install --trust",
        f"spack install --use-buildcache only /{first['hash']}",
    ]
    assert "root" in json.loads(first["stacks"])
    assert "package_versions?package=hdf5" in first["links"]
    assert all(row["links"] is None for row in rows[1:])


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"version": "1.14"}, 37),  # a prefix: 1.14.6 only
        ({"version": "@1.8.23"}, 7),
        ({"variant": "+mpi", "compiler": "gcc@11"}, 18),
        ({"variant": "+mpi +fortran", "compiler": "%gcc@11.4.0"}, None),
        ({"os": "ubuntu22.04", "target": "neoverse_v2"}, 5),
        ({"compiler": "gcc@=11.4.0", "target": "neoverse_v2"}, 5),
        ({"variant": "patches=f42732a"}, 9),  # matches patches:=f42732a
        ({"variant": "nosuchvariant=1"}, 0),
    ],
)
async def test_find_binaries_filters(ds, params, expected):
    rows = await query(ds, "find_binaries", package="hdf5", tag="develop-2025-04-20", **params)
    if expected is not None:
        assert len(rows) == expected
    for row in rows:
        spec = row["spec"]
        assert spec.startswith("hdf5@" + params.get("version", "").lstrip("@"))
        for variant in params.get("variant", "").split():
            if variant.startswith("+"):
                assert variant in spec
        if "target" in params:
            assert f"-{params['target']} " in spec


async def test_find_binaries_matches_one_value_of_a_multi_valued_variant(ds):
    rows = await query(ds, "find_binaries", package="mpich", tag="develop-2025-04-20", variant="patches=de0de41")
    assert len(rows) == 2
    assert all("db4173c,de0de41" in row["spec"] for row in rows)


async def test_runs_on_host_follows_archspec(ds):
    zen3 = await query(ds, "runs_on_host", host="zen3", package="hdf5", tag="develop-2025-04-20")
    targets = {row["target"] for row in zen3}
    assert "x86_64_v3" in targets
    assert targets.isdisjoint({"neoverse_v2", "x86_64_v4", "zen4", "aarch64"})
    graviton4 = await query(ds, "runs_on_host", host="neoverse_v2", package="hdf5", tag="develop-2025-04-20")
    assert {row["target"] for row in graviton4} == {"neoverse_v2", "aarch64"}
    assert graviton4[0]["target"] == "neoverse_v2"  # the closest fit first
    assert await query(ds, "runs_on_host", host="no-such-cpu") == []


async def test_find_binaries_on_a_host_keeps_what_it_runs(ds, cache_db):
    conn = sqlite3.connect(cache_db)
    targets = dict(
        conn.execute("SELECT hash, target FROM binaries WHERE tag = 'develop-2025-04-20' AND package = 'hdf5'")
    )
    for host in ("zen3", "neoverse_v2", "m1"):
        rows = await query(ds, "find_binaries", package="hdf5", tag="develop-2025-04-20", host=host)
        runnable = {row[0] for row in conn.execute("SELECT target FROM runs_on WHERE host = ?", [host])}
        assert rows and {row["hash"] for row in rows} == {h for h, target in targets.items() if target in runnable}, (
            host
        )
        on_host = await query(ds, "runs_on_host", host=host, package="hdf5", tag="develop-2025-04-20")
        assert {row["hash"] for row in rows} == {row["hash"] for row in on_host}, host
    assert await query(ds, "find_binaries", package="hdf5", tag="develop-2025-04-20", host="no-such-cpu") == []


@pytest.mark.parametrize("host, platform", [("m1", "darwin"), ("neoverse_v2", "linux"), ("aarch64", "linux")])
async def test_runs_on_host_keeps_the_platform_asked_for(ds, host, platform):
    every_platform = await query(ds, "runs_on_host", host=host, package="hdf5", tag="develop-2025-04-20")
    rows = await query(ds, "runs_on_host", host=host, package="hdf5", tag="develop-2025-04-20", platform=platform)
    assert rows and all(f"arch={platform}-" in row["spec"] for row in rows)
    assert rows == [row for row in every_platform if f"arch={platform}-" in row["spec"]]
    assert len(rows) < len(every_platform), "the samples have binaries of both platforms for these hosts"
    os_rows = await query(
        ds, "runs_on_host", host=host, package="hdf5", tag="develop-2025-04-20", platform=platform, os=rows[0]["os"]
    )
    assert os_rows and {row["os"] for row in os_rows} == {rows[0]["os"]}


@pytest.mark.parametrize("package", ["hdf5", "mpich", "bolt"])
async def test_stacks_in_tag_of_one_package_count_its_binaries_per_stack(ds, cache_db, package):
    rows = await query(ds, "stacks_in_tag", tag="develop-2025-04-20", package=package)
    expected = (
        sqlite3.connect(cache_db)
        .execute(
            "SELECT stack, count(*) FROM binary_stacks WHERE tag = 'develop-2025-04-20' AND package = ? GROUP BY stack",
            [package],
        )
        .fetchall()
    )
    assert sorted((row["stack"], row["specs"]) for row in rows) == sorted(expected)
    assert {row["packages"] for row in rows} == {1}
    assert rows[0]["stack"] == "root"


async def test_package_counts_binaries_per_version_and_tag(ds, cache_db):
    rows = await query(ds, "package", package="HDF5 ")
    expected = (
        sqlite3.connect(cache_db)
        .execute(
            "SELECT version, tag, count(*) FROM binaries WHERE package = 'hdf5' GROUP BY version, tag"
            " ORDER BY max(version_rank) DESC, max(tag_order)"
        )
        .fetchall()
    )
    assert [(row["version"], row["tag"], row["binaries"]) for row in rows] == expected
    assert await query(ds, "package", package="no-such-package") == []


async def test_package_versions_in_spack_order(ds):
    rows = await query(ds, "package_versions", package="hdf5")
    assert [row["version"] for row in rows] == ["1.14.6", "1.12.3", "1.8.23"]
    (bolt,) = await query(ds, "package_versions", package="bolt")
    assert bolt["tags"] == 10
    assert json.loads(bolt["specs_per_tag"])["develop"] == 18
    assert list(json.loads(bolt["specs_per_tag"]))[:2] == ["develop", "v0.23.1"]
    assert (bolt["newest_tag"], bolt["oldest_tag"]) == ("develop", "develop-2024-03-17")


async def test_version_timeline(ds):
    (bolt,) = await query(ds, "version_timeline", package="bolt")
    assert (bolt["first_snapshot"], bolt["last_snapshot"], bolt["snapshots"]) == (
        "develop-2024-03-17",
        "develop-2025-04-27",
        5,
    )
    assert json.loads(bolt["releases"]) == ["v0.23.1", "v0.23.0", "v0.22.0", "v0.21.2"]
    assert bolt["in_develop"] == 1


async def test_specs_per_tag_and_version_tag_specs(ds):
    assert await query(ds, "specs_per_tag", package="hdf5") == [
        {
            "tag": "develop-2025-04-20",
            "kind": "snapshot",
            "snapshot_date": "2025-04-20",
            "packages": 1,
            "specs": 46,
            "tag_order": 15,
        }
    ]
    cells = await query(ds, "version_tag_specs", package="hdf5")
    assert [(cell["version"], cell["tag"], cell["specs"]) for cell in cells] == [
        ("1.14.6", "develop-2025-04-20", 37),
        ("1.12.3", "develop-2025-04-20", 2),
        ("1.8.23", "develop-2025-04-20", 7),
    ]


async def test_specs_per_tag_of_every_package_counts_every_page_without_reading_the_pages(ds, cache_db):
    """With no package, each tag's pages and binaries, as SQL counts them on the pages; read from the pages'
    index and the build's counts (a history has 90,000 pages, each with its meta)."""
    conn = sqlite3.connect(cache_db)
    counted = conn.execute(
        "SELECT tags.name, count(*), sum(pages.num_specs) FROM pages JOIN tags ON tags.id = pages.tag_id"
        " GROUP BY tags.id ORDER BY tags.sort_order"
    ).fetchall()
    rows = await query(ds, "specs_per_tag")
    assert [(row["tag"], row["packages"], row["specs"]) for row in rows] == counted
    steps = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {QUERIES['specs_per_tag']['sql']}", {"package": ""})]
    assert [step for step in steps if step.startswith("SCAN pages")] == [], steps


async def test_tag_diff(ds):
    rows = await query(ds, "tag_diff", from_tag="develop-2025-03-23", to_tag="develop-2025-04-20")
    changes = {(row["package"], row["version"]): row["change"] for row in rows}
    assert changes[("hdf5", "1.14.6")] == "package added"
    assert changes[("mpich", "4.0.3")] == "configurations changed"
    assert ("py-optree", "0.10.0") not in changes  # the same configurations in both
    default = await query(ds, "tag_diff")
    assert {(row["from_tag"], row["to_tag"]) for row in default} == {("v0.23.1", "develop")}
    assert await query(ds, "tag_diff", from_tag="no-such-tag") == []
    assert await query(ds, "tag_diff", from_tag="develop", to_tag="develop") == []
    # By default a tag is compared with the one before it of its kind, never across kinds.
    snapshot = await query(ds, "tag_diff", to_tag="develop-2025-04-20")
    assert {(row["from_tag"], row["to_tag"]) for row in snapshot} == {("develop-2025-03-30", "develop-2025-04-20")}
    release = await query(ds, "tag_diff", to_tag="v0.23.0")
    assert {(row["from_tag"], row["to_tag"]) for row in release} == {("v0.22.0", "v0.23.0")}
    assert await query(ds, "tag_diff", to_tag="v0.21.2") == []  # the oldest release: not the newest snapshot


async def test_stacks_of_a_tag(ds):
    rows = await query(ds, "stacks_in_tag", tag="develop-2025-04-20")
    by_stack = {row["stack"]: row for row in rows}
    assert rows[0]["stack"] == "root"
    assert (by_stack["root"]["specs"], by_stack["e4s"]["specs"], by_stack["e4s"]["packages"]) == (80, 19, 4)
    assert by_stack["e4s"]["mirror_url"] == "https://binaries.spack.io/develop-2025-04-20/e4s"
    packages = await query(ds, "stack_packages", stack="e4s", tag="develop-2025-04-20")
    assert [row["package"] for row in packages] == ["bolt", "cli11", "hdf5", "mpich"]
    assert json.loads(packages[2]["versions"]) == ["1.14.6", "1.12.3", "1.8.23"]


def stacked_db(folder, other_stacks):
    """A tag whose every binary has a configuration of its own (a listing each, as where binaries spread over
    many sets of stacks): every other one in the stack "x", all of them in `other_stacks` more stacks."""
    others = [f"other{n}" for n in range(other_stacks)]
    for package in ("aa", "bb", "cc"):
        binaries = [
            spec(f"{package}/{n}", versions=[f"1.{n}"], stacks=["root", *others, *(["x"] if n % 2 else [])])
            for n in range(60)
        ]
        write_page(folder / "site", package, "develop", binaries)
    build([str(folder / "site")], folder / "cache.db")
    return folder / "cache.db"


async def test_the_packages_of_a_stack_are_counted_without_reading_each_binarys_other_stacks(tmp_path):
    """A stack's packages, counted binary by binary where a page has binaries out of the stack: each binary's
    set of stacks is checked for the stack, the same work however many other stacks the binaries are in."""
    sql = QUERIES["stack_packages"]["sql"]
    steps = {}
    for other_stacks in (1, 12):
        db = stacked_db(tmp_path / str(other_stacks), other_stacks)
        asked = {"stack": "x", "tag": "develop", "after_stack": "", "after": ""}
        rows = sqlite3.connect(db).execute(sql, asked).fetchall()
        assert [(row[1], row[3]) for row in rows] == [("aa", 30), ("bb", 30), ("cc", 30)]
        steps[other_stacks] = vm_steps(db, sql, asked)[1]
    assert steps[12] < 1.1 * steps[1], steps


PACKAGES_IN_X = 510  # more than the 500 a stack's answer lists


@pytest.fixture(scope="module")
def many_packages_db(tmp_path_factory):
    """A tag of PACKAGES_IN_X packages, each with a binary of 1.0 in stacks root and x and one of 2.0 in root and
    y. Every seventh page's meta disagrees with its binaries: those are counted from their binaries."""
    folder = tmp_path_factory.mktemp("stacks")
    for n in range(PACKAGES_IN_X):
        package = f"p{n:03d}"
        binaries = [
            spec(f"{package}/x", versions=["1.0"], stacks=["root", "x"]),
            spec(f"{package}/y", versions=["2.0"], stacks=["root", "y"]),
        ]
        write_page(
            folder / "site",
            package,
            "develop",
            binaries,
            {**meta_for(binaries), "num_specs": 3} if n % 7 == 0 else None,
        )
    build([str(folder / "site")], folder / "cache.db")
    return folder / "cache.db"


def stack_packages_in_pages(db, stack):
    """Every row of stack_packages for the stack ('' for all), asked for answer after answer as the link under
    each asks, while an answer reaches its cap: (stack, package, versions, specs), and the rows of each answer."""
    conn, query = sqlite3.connect(db), canned.named("stack_packages")
    listed, answers, after = [], [], {"after_stack": "", "after": ""}
    while True:
        answer = canned.ask(conn, query, {"stack": stack, "tag": "", **after})
        listed += [(row["stack"], row["package"], json.loads(row["versions"]), row["specs"]) for row in answer.rows]
        answers.append(len(answer.rows))
        if not answer.limited:
            return listed, answers
        after = {"after_stack": answer.rows[-1]["stack"], "after": answer.rows[-1]["package"]}


async def test_the_packages_of_a_stack_go_on_after_the_last_one_listed(many_packages_db):
    packages = [f"p{n:03d}" for n in range(PACKAGES_IN_X)]
    listed, answers = stack_packages_in_pages(many_packages_db, "x")
    assert answers == [500, PACKAGES_IN_X - 500]
    assert listed == [("x", package, ["1.0"], 1) for package in packages]
    listed, answers = stack_packages_in_pages(many_packages_db, "")
    assert answers == [100] * (3 * PACKAGES_IN_X // 100) + [3 * PACKAGES_IN_X % 100]
    assert listed == [
        *[("root", package, ["2.0", "1.0"], 2) for package in packages],
        *[("x", package, ["1.0"], 1) for package in packages],
        *[("y", package, ["2.0"], 1) for package in packages],
    ]


async def answers_one_after_another(ds, url, rows, most):
    """The pages of a capped question from url on, each reached by the link under the answer before it ("The
    <rows> after these →"), at most `most` of them: [(page text, heading or None when it has no rows, what its
    link asks or None)]."""
    pages = []
    while url and len(pages) < most:
        page = await ds.client.get(url)
        assert page.status_code == 200, page.text[:300]
        found = re.search(r'<h2 class="spack-found">(.*?)</h2>', page.text, re.DOTALL)
        heading = found and found.group(1)
        following = re.search(rf'<p class="spack-next"><a href="([^"]*)">The {rows} after these →</a>', page.text)
        url = following and html.unescape(following.group(1))
        pages.append((page.text, heading, url and urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)))
    return pages


async def test_the_packages_page_links_to_the_packages_after_those_it_shows(many_packages_db):
    """From the first answer, with a stack and without, the link under it leads to the rest; its heading says
    where it starts (the stack too when the question does not ask one), and the last answer has no link."""
    ds = datasette_for(many_packages_db)
    pages = await answers_one_after_another(ds, "/cache/stack_packages?stack=x&tag=develop", "packages", 3)
    listed = []
    for text, _, asked in pages:
        listed += re.findall(r'<a class="spack-package" href="[^"]*">([^<]*)</a>', text)
        if asked:
            assert (asked["stack"], asked["after_stack"], asked["after"]) == (["x"], ["x"], [listed[-1]])
    assert listed == [f"p{n:03d}" for n in range(PACKAGES_IN_X)]
    assert [heading for _, heading, _ in pages] == [
        "500 packages in develop: the first 500",
        f"{PACKAGES_IN_X - 500} packages in develop after p499",
    ]
    first, second = await answers_one_after_another(ds, "/cache/stack_packages?tag=develop", "packages", 2)
    assert (first[2]["after_stack"], first[2]["after"]) == (["root"], ["p099"])
    assert second[1] == "100 packages in develop: the first 100 after root, p099"


async def test_a_capped_answer_as_json_says_so_and_links_to_the_rows_after_it(many_packages_db):
    """What the page says under a full answer, its JSON says too: truncated, and next_url (and the Link header,
    as for a table's next page) leading to the rows after the last one, until an answer that has them all.
    With _shape=array, where the body is the rows alone, the Link header still leads on."""
    ds = datasette_for(many_packages_db)
    listed, answers, url = [], [], "/cache/stack_packages.json?stack=x&tag=develop&_shape=objects"
    while url:
        response = await ds.client.get(url.removeprefix("http://localhost"))
        data = response.json()
        assert response.status_code == 200, data
        listed += [row["package"] for row in data["rows"]]
        answers.append((len(data["rows"]), data["truncated"]))
        url = data.get("next_url")
        assert response.headers.get("link") == (url and f'<{url}>; rel="next"')
        assert url is None or url.startswith("http://localhost/cache/stack_packages.json?")
    assert answers == [(500, True), (PACKAGES_IN_X - 500, False)]
    assert listed == [f"p{n:03d}" for n in range(PACKAGES_IN_X)]

    response = await ds.client.get("/cache/stack_packages.json?tag=develop&_shape=array")
    after = urllib.parse.parse_qs(urllib.parse.urlsplit(response.headers["link"][1:].split(">")[0]).query)
    assert (len(response.json()), after["after_stack"], after["after"], after["_shape"]) == (
        100,
        ["root"],
        ["p099"],
        ["array"],
    )


async def test_a_capped_answer_with_no_way_on_says_so_as_json(ds):
    """find_binaries without a package lists the first 100 binaries and cannot go on after them: its JSON says
    truncated, with no next_url and no Link header; an answer under its cap (a package's) is not truncated."""
    capped = await ds.client.get("/cache/find_binaries.json")
    assert (len(capped.json()["rows"]), capped.json()["truncated"], "next_url" in capped.json()) == (100, True, False)
    assert "link" not in capped.headers
    whole = (await ds.client.get("/cache/find_binaries.json?spec=bolt")).json()
    assert (len(whole["rows"]) < 100, whole["truncated"], "next_url" in whole) == (True, False, False)


async def test_the_json_of_a_question_says_what_its_page_says_of_the_values_asked(ds):
    """A script reading the JSON can tell a typo or a spec that does not parse from 'no such binary': messages
    holds the page's sentences, as text; an answer with nothing to say has none."""
    said = {
        "/cache/find_binaries.json?spec=hdf5%40%40": [
            "The spec does not parse: hdf5@@: expected a version after '@' (column 5)."
        ],
        "/cache/find_binaries.json?package=hdf&tag=*": ["No package here is called “hdf”. Did you mean hdf5?"],
        "/cache/hash_lookup.json?hash=jr": [
            "Give at least 4 characters of the hash: fewer match too many binaries to tell."
        ],
    }
    for path, messages in said.items():
        data = (await ds.client.get(path)).json()
        assert (data["rows"], data["messages"]) == ([], messages), path
    found = (await ds.client.get("/cache/find_binaries.json?spec=bolt")).json()
    assert found["rows"] and "messages" not in found


async def test_tag_matrix_covers_the_whole_tag(ds):
    rows = await query(ds, "tag_matrix", tag="develop-2025-04-20")
    assert sum(row["specs"] for row in rows) == 80
    assert {
        "os": "ubuntu22.04",
        "target": "neoverse_v2",
        "compiler": "gcc@11.4.0",
        "specs": 12,
        "packages": 2,
        "tag": "develop-2025-04-20",
    } in rows
    e4s = await query(ds, "tag_matrix", tag="develop-2025-04-20", stack="e4s")
    assert [(row["os"], row["target"], row["specs"]) for row in e4s] == [("ubuntu22.04", "x86_64_v3", 19)]


async def test_tag_matrix_of_every_whole_tag_counts_what_binaries_holds(ds, cache_db):
    with sqlite3.connect(cache_db) as conn:
        tags = [row[0] for row in conn.execute("SELECT DISTINCT tag FROM binaries")]
        for tag in tags:
            expected = conn.execute(
                "SELECT os, target, compiler, count(*), count(DISTINCT package) FROM binaries WHERE tag = ?"
                " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
                [tag],
            ).fetchall()
            rows = await query(ds, "tag_matrix", tag=tag)
            assert [(r["os"], r["target"], r["compiler"], r["specs"], r["packages"]) for r in rows] == expected, tag


async def test_hash_lookup_by_prefix(ds, cache_db):
    with sqlite3.connect(cache_db) as conn:
        (shared,) = conn.execute(
            "SELECT hash FROM specs JOIN page_specs ON page_specs.spec_id = specs.id"
            " GROUP BY specs.id HAVING count(*) > 1 ORDER BY hash LIMIT 1"
        ).fetchone()
    (row,) = await query(ds, "hash_lookup", hash="/" + shared[:7].upper())
    assert row["hash"] == shared
    assert json.loads(row["tags"]) == ["v0.23.1", "v0.23.0"]
    assert "root" in json.loads(row["stacks"])
    assert row["install"].startswith("spack mirror add v0.23.1 ")
    assert await query(ds, "hash_lookup", hash=shared[:3]) == []


async def test_search_specs(ds):
    rows = await query(ds, "search_specs", q="neoverse_v2 gcc")
    assert len(rows) == 12
    assert all("neoverse_v2" in row["spec"] and "%gcc" in row["spec"] for row in rows)
    assert await query(ds, "search_specs", q="hdf5", tag="develop-2025-04-20") != []


async def test_rebuilt_configurations(ds):
    rows = await query(ds, "rebuilt_configurations", package="bolt")
    assert [row["builds"] for row in rows] == [3, 3, 3, 3, 3, 2]
    assert all(row["builds"] == len(set(json.loads(row["hashes"]))) for row in rows)


async def test_health_queries_find_a_broken_page(tmp_path):
    """A page whose meta disagrees with its specs, one of which is missing from root."""
    text = BOLT_PAGE.read_text()
    lines = text.split("\n")
    specs_at = next(n for n, line in enumerate(lines) if line.startswith("spec_details: "))
    specs = json.loads(lines[specs_at][len("spec_details: ") :])
    specs[0]["stacks"] = [stack for stack in specs[0]["stacks"] if stack != "root"]
    lines[specs_at] = "spec_details: " + json.dumps(specs)
    page = tmp_path / "_cache" / "develop" / "bolt" / "specs.md"
    page.parent.mkdir(parents=True)
    page.write_text("\n".join(lines))
    db_path = tmp_path / "cache.db"
    build([str(tmp_path / "_cache")], db_path)
    ds = datasette_for(db_path)
    problems = await query(ds, "page_problems")
    assert problems and {row["severity"] for row in problems} == {"warning"}
    assert {row["tag"] for row in problems} == {"develop"}
    (missing,) = await query(ds, "missing_from_root", tag="develop")
    assert (missing["hash"], missing["stacks"]) == (specs[0]["hash"], '["e4s-cray-rhel"]')
    assert await query(ds, "page_problems", severity="error") == []


async def test_download_link_returns_the_database(ds, cache_db):
    page = await ds.client.get("/cache")
    assert 'href="/cache.db"' in page.text
    response = await ds.client.get("/cache.db")
    assert response.status_code == 200
    assert response.content == cache_db.read_bytes()


async def test_search_box_on_binaries_uses_full_text_index(ds):
    page = await ds.client.get("/cache/binaries")
    assert 'name="_search"' in page.text
    response = await ds.client.get("/cache/binaries.json?_shape=objects&_search=neoverse_v2&tag=develop")
    rows = response.json()["rows"]
    assert len(rows) == 12
    assert {row["target"] for row in rows} == {"neoverse_v2"}
    hostile = await ds.client.get("/cache/binaries.json?_search=NEAR(%22")
    assert hostile.status_code == 200


async def test_package_name_search_matches_any_part(ds):
    response = await ds.client.get("/cache/packages.json?_shape=objects&_search=mpi")
    assert sorted(row["name"] for row in response.json()["rows"]) == ["mpich", "py-mpi4py"]


@pytest.mark.parametrize("dashboard, params", [("package-history", {"package": "bolt"}), ("tag-overview", {})])
async def test_dashboard_charts_get_their_data(ds, dashboard, params):
    page = await ds.client.get(f"/-/dashboards/{dashboard}?" + urllib.parse.urlencode(params))
    assert page.status_code == 200
    charts = METADATA["plugins"]["datasette-dashboards"][dashboard]["charts"]
    for chart in charts.values():
        url = "/cache.json?" + urllib.parse.urlencode({"sql": chart["query"], "_shape": "objects", **params})
        response = await ds.client.get(url)
        assert response.status_code == 200, response.text[:300]
        assert response.json()["rows"], chart["title"]
