"""The dependency questions at scale, checked on what SQLite does rather than on a clock.

`dependents` answers what a plain walk in Python answers, on Spack's samples and on synthetic tags that take
each of its ways (the nearest dependents are all there are; a batch of the tag's first binaries, sized from a
sample and followed down, holds the answer; the whole walk, with or without a batch that fell short). Its plan
never reruns a recursion per row nor reads a whole table of edges, specs or listings, its work (SQLite's
virtual machine steps) stays the same while the rest of the database grows, and it is prepared from a bounded
number of subqueries.
The other dependency questions (the tree, the dependencies view filtered by a hash, the package page's
lists) read their indexes too, and the deptype flags agree with the deptypes JSON.
"""

import functools
import html
import json
import re
import shutil
import sqlite3
import urllib.parse
from collections import defaultdict, deque

import pytest
from datasette.app import Datasette
from datasette.database import Database
from mirrors import write_v2
from pagemaker import write_spread_corpus
from test_dependencies import dag_hash, terminal
from test_indexes import LIBDWARF_M1
from test_queries import answers_one_after_another, with_row_limit

from spack_cache_db.build import build
from spack_cache_db.db import schema
from spack_cache_db.query import canned, dependencies, lookup
from spack_cache_db.web import describe, package

ARCH = {"platform": "linux", "platform_os": "ubuntu24.04", "target": {"name": "x86_64_v3"}}
LINK, BUILD, RUN = ("build", "link"), ("build",), ("run",)


def _row_limit():
    conn = sqlite3.connect(":memory:")
    schema.create_schema(conn)
    return canned.most_rows(conn, canned.named("dependents"), {"package": "", "hash": "", "tag": "", "after": ""})


ROW_LIMIT = _row_limit()  # the most dependents one answer lists
BIG_TABLES = (
    "spec_dependencies",
    "specs",
    "page_specs",
    "pages",
    "dependency_only_specs",
)  # what a plan must never read whole


def record(name, binary=True, edges=(), version="1.0", seed=""):
    """(hash, the install record) of a spec: edges are (record, deptypes) of records made before."""
    own = dag_hash("|".join(map(str, (name, version, seed, *(dependency for dependency, _ in edges)))))
    node = {
        "name": name,
        "version": version,
        "arch": ARCH,
        "parameters": {"build_system": "generic"},
        "dependencies": [
            {
                "name": dependency[1]["spec"]["name"],
                "hash": dependency[0],
                "parameters": {"deptypes": list(deptypes), "virtuals": []},
            }
            for dependency, deptypes in edges
        ],
        "hash": own,
    }
    return own, {"spec": node, "ref_count": 0, "in_buildcache": binary}


def index(records):
    return json.dumps({"database": {"version": "8", "installs": dict(records)}}).encode()


def build_tags(folder, tags):
    """cache.db built from one v2 mirror per tag ({tag: [record]})."""
    for tag, records in tags.items():
        write_v2(folder / tag, index(records))
    path = folder / "cache.db"
    build([f"{tag}={folder / tag}" for tag in tags], path)
    return path


def library_tag(tag, dependents, rest, fan=4):
    """A tag whose zlib (two binaries, and a spec of it that no cache has) is linked against by `dependents`
    binaries, directly or through others, next to `rest` binaries that have nothing to do with it (each
    linking against a few others): a DAG where only the rest grows."""
    zlib = [record("zlib", seed=(tag, n)) for n in range(2)]
    unlisted = unlisted_zlib(tag)
    made = []
    for n in range(dependents):
        below = made[max(0, n - 3) : n] if n % 4 else [zlib[n // 4 % 2]]
        edges = [(spec, LINK) for spec in below] + ([(unlisted, LINK)] if n == 7 else [])
        made.append(record(f"app{n % 5}", seed=(tag, n), edges=edges + [(zlib[1], BUILD)]))
    others = []
    for n in range(rest):
        others.append(record(f"other{n % 40}", seed=(tag, "rest", n), edges=[(spec, LINK) for spec in others[-fan:]]))
    return [*zlib, unlisted, *made, *others]


def unlisted_zlib(tag):
    """library_tag's spec of zlib that no cache has: a dependency only."""
    return record("zlib", binary=False, version="1.3", seed=tag)


@pytest.fixture(scope="module")
def growing(tmp_path_factory):
    """{name: cache.db}: one tag with zlib's dependents and a little else, then the same tag beside ten times
    as much else and three more tags."""
    folder = tmp_path_factory.mktemp("growing")
    small = build_tags(folder / "small", {"develop": library_tag("develop", 40, 200)})
    large = build_tags(
        folder / "large",
        {
            tag: library_tag(tag, 40, 2000) if tag == "develop" else library_tag(tag, 400, 2000)
            for tag in ("develop", "v1", "v2", "v3")
        },
    )
    return {"small": small, "large": large}


LUMPY_FIRST = 60  # lumpy-lib's dependents among the sample, fewer than a batch of ROW_LIMIT holds


def shaped_tag():
    """One tag of 6,600 binaries in which each way of `dependents` is taken: dense-lib is linked against by
    the first 3,300 binaries in the answer's order (aa-app), sparse-lib by 3,100 binaries that come after
    them (zz-app, some through mid-lib), tiny-lib by five, mixed-lib by every third aa-app and every zz-app
    (its 1,000th dependent is about the 3,000th binary), and lumpy-lib by the first LUMPY_FIRST (of the 100
    aa-app@2.0) and every zz-app; a build-only edge and a run edge are not links."""
    dense, sparse, tiny = record("dense-lib"), record("sparse-lib"), record("tiny-lib")
    mixed, lumpy = record("mixed-lib"), record("lumpy-lib")
    mid = record("mid-lib", edges=[(sparse, LINK)])
    records = [dense, sparse, tiny, mixed, lumpy, mid]
    for n in range(3300):
        edges = [(dense, LINK), (sparse, BUILD), *([(mixed, LINK)] if n % 3 == 0 else [])]
        lumpy_edges = [(lumpy, LINK)] if n < LUMPY_FIRST else []
        records.append(record("aa-app", seed=n, edges=edges + lumpy_edges, version="2.0" if n < 100 else "1.0"))
    records += [
        record("zz-app", seed=n, edges=[(mid if n % 3 else sparse, LINK), (dense, RUN), (mixed, LINK), (lumpy, LINK)])
        for n in range(3100)
    ]
    records += [record("ab-tool", seed=n, edges=[(tiny, LINK)]) for n in range(5)]
    return records


def direct_tag(helpers):
    """One tag whose lib is linked against directly by its first 3,200 binaries in the answer's order (aa-app),
    each of them also linking, with helpers, against a binary of its own that comes after them (zz-helper, each
    linking against zz-base): what lies below a binary that links against lib does not change the answer."""
    lib, base = record("lib"), record("zz-base")
    records = [lib, base]
    for n in range(3200):
        helper = [record("zz-helper", seed=n, edges=[(base, LINK)])] if helpers else []
        records += [*helper, record("aa-app", seed=n, edges=[(lib, LINK), *((spec, LINK) for spec in helper)])]
    return records


@pytest.fixture(scope="module")
def shaped(tmp_path_factory):
    return build_tags(tmp_path_factory.mktemp("shaped"), {"develop": shaped_tag()})


class Reference:
    """dependents walked in Python from the tables of a database (deptypes read from their JSON)."""

    def __init__(self, db):
        conn = sqlite3.connect(db)
        self.tags = dict(conn.execute("SELECT name, id FROM tags"))
        link = {
            kind
            for kind, types in conn.execute("SELECT id, deptypes FROM dependency_kinds")
            if "link" in json.loads(types)
        }
        self.listed = defaultdict(set)
        for spec, tag_id in conn.execute("SELECT spec_id, tag_id FROM page_specs JOIN pages ON pages.id = page_id"):
            self.listed[spec].add(tag_id)
        self.names = {spec: rest for spec, *rest in conn.execute("SELECT id, hash, package, version FROM spec_names")}
        self.ranks = dict(
            conn.execute(
                "SELECT specs.id, version_rank FROM specs JOIN configurations ON configurations.id = configuration_id"
                " JOIN versions ON versions.id = version_id"
            )
        )
        self.into = defaultdict(list)
        for spec, dependency, kind in conn.execute("SELECT spec_id, dependency_id, kind_id FROM spec_dependencies"):
            if kind in link:
                self.into[dependency].append(spec)

    def dependents(self, target, tag, most=ROW_LIMIT):
        """[(package, version, hash, directly)] in the answer's order, at most most (None: all): the walk goes through the
        tag's binaries; the targets are the package's specs the tag lists or no tag lists (or the spec a hash
        names)."""
        tag_id = self.tags[tag]
        if target.startswith("/"):
            targets = {spec for spec, (spec_hash_, *_) in self.names.items() if spec_hash_ == target[1:]}
        else:
            targets = {
                spec
                for spec, (_, name, _) in self.names.items()
                if name == target and (tag_id in self.listed[spec] or not self.listed[spec])
            }
        found, queue = set(), deque(targets)
        while queue:
            for spec in self.into[queue.popleft()]:
                if tag_id in self.listed[spec] and spec not in found:
                    found.add(spec)
                    queue.append(spec)
        directly = {spec for target_id in targets for spec in self.into[target_id]}
        names = self.names
        rows = sorted(found, key=lambda spec: (names[spec][1], -self.ranks[spec], names[spec][0]))[:most]
        return [(names[spec][1], names[spec][2], names[spec][0], spec in directly) for spec in rows]


def ways_taken(db, sql, target):
    """(all nearest, batch size, whether the batch held enough, walked) of the dependents SQL for a package."""
    ways = sql[: sql.index("\nfound AS (")].rstrip().rstrip(",") + (
        " SELECT (SELECT yes FROM all_nearest), (SELECT binaries FROM batch_size), (SELECT max(enough) FROM batch_found),"
        " (SELECT count(*) FROM walked)"
    )
    return lookup.open_database(db).execute(ways, {"package": target, "hash": "", "tag": "", "after": ""}).fetchone()


@pytest.mark.parametrize("target", ["tiny-lib", "dense-lib", "mixed-lib", "lumpy-lib", "sparse-lib"])
def test_every_way_of_the_dependents_question_stops_at_its_row_limit(shaped, target):
    """Each way (the nearest, a batch, the whole walk) sizes its work and its answer from row_limit alone: with
    300, dense-lib's batch is 375 binaries and holds them."""
    conn = lookup.open_database(shaped)
    sql = with_row_limit(canned.named("dependents").sql, 300)
    rows = conn.execute(sql, {"package": target, "hash": "", "tag": "", "after": ""}).fetchall()
    assert [(package, version, spec, directly == "yes") for package, version, spec, directly, *_ in rows] == Reference(
        shaped
    ).dependents(target, "develop", most=300)
    if target == "dense-lib":
        assert ways_taken(shaped, sql, target) == (0, 375, 1, 0)


@pytest.mark.parametrize("target", ["tiny-lib", "dense-lib", "mixed-lib", "lumpy-lib", "sparse-lib"])
def test_the_answers_after_one_another_are_the_whole_walk(shaped, target):
    """Asked again after the last binary of each answer (row_limit 300), the answers together are all the
    dependents in order, each once, whichever way each answer takes from where it starts."""
    conn = lookup.open_database(shaped)
    sql = with_row_limit(canned.named("dependents").sql, 300)
    expected = Reference(shaped).dependents(target, "develop", most=None)
    whole, after = [], ""
    for _ in range(len(expected) // 300 + 1):
        rows = conn.execute(sql, {"package": target, "hash": "", "tag": "", "after": after}).fetchall()
        whole += [(package, version, spec, directly == "yes") for package, version, spec, directly, *_ in rows]
        after = rows[-1][2] if rows else after
    assert whole == expected


def test_an_answer_after_a_hash_that_no_binary_has_is_empty(shaped):
    conn = lookup.open_database(shaped)
    sql = canned.named("dependents").sql
    [first, *_] = conn.execute(sql, {"package": "dense-lib", "hash": "", "tag": "", "after": ""}).fetchall()
    after_first = conn.execute(sql, {"package": "dense-lib", "hash": "", "tag": "", "after": f" /{first[2].upper()}"})
    assert after_first.fetchone()[2] != first[2]
    assert not conn.execute(sql, {"package": "dense-lib", "hash": "", "tag": "", "after": "a" * 32}).fetchall()


def test_the_terminal_lists_the_dependents_after_the_last_one_it_listed(shaped):
    """dense-lib has 3,300 dependents: answers of ROW_LIMIT at most, each saying how to ask for the next."""
    listed, after = [], []
    for _ in range(3300 // ROW_LIMIT + 1):
        status, out, err = terminal("dependents", "dense-lib", *after, "--format", "json", db=shaped)
        rows = json.loads(out)
        listed += [(row["package"], row["version"], row["hash"], row["directly"] == "yes") for row in rows]
        if not err:
            break
        assert (status, len(rows)) == (0, ROW_LIMIT)
        starting = f" after {after[1]}" if after else ""  # as the page's heading says it
        assert (
            err
            == f"These are the first {ROW_LIMIT:,} binaries{starting}: --after {rows[-1]['hash']} lists those after them.\n"
        )
        after = ["--after", rows[-1]["hash"][:12]]
    assert (status, len(rows)) == (0, 3300 % ROW_LIMIT)
    assert listed == Reference(shaped).dependents("dense-lib", "develop", most=None)
    status, out, err = terminal("dependents", "dense-lib", "--after", "zzzz", db=shaped)
    assert (status, out, err) == (1, "", "Error: after: no spec's hash starts with 'zzzz'\n")
    status, out, err = terminal("dependents", "tiny-lib", db=shaped)
    assert (status, len(out.splitlines()), err) == (0, 5, "")


@pytest.mark.asyncio
async def test_the_question_page_links_to_the_binaries_after_those_it_shows(shaped):
    """From the first answer of dense-lib's 3,300 dependents, each page's link leads to the next ROW_LIMIT, the
    last page has none, and the pages' answers (their JSON links) are the whole walk in order."""
    ds = datasette_for(shaped)
    pages = await answers_one_after_another(
        ds, "/cache/dependents?package=dense-lib", "binaries", 3300 // ROW_LIMIT + 1
    )
    listed, headings = [], [heading for _, heading, _ in pages]
    for text, _, asked in pages:
        json_url = re.search(r'<a href="([^"]*)">json</a>', text).group(1)
        rows = (await ds.client.get(html.unescape(json_url) + "&_shape=objects")).json()["rows"]
        listed += [(row["package"], row["version"], row["hash"], row["directly"] == "yes") for row in rows]
        if asked:
            assert asked["after"] == [rows[-1]["hash"]]
    assert listed == Reference(shaped).dependents("dense-lib", "develop", most=None)
    of = ' binaries of <a href="/cache/package?package=aa-app">aa-app</a> in develop'
    assert headings[0] == f"{ROW_LIMIT}{of}: the first {ROW_LIMIT}"
    assert headings[1] == f"{ROW_LIMIT}{of}: the first {ROW_LIMIT} after {listed[ROW_LIMIT - 1][2]}"
    assert headings[-1] == f"{3300 % ROW_LIMIT}{of} after {listed[-(3300 % ROW_LIMIT) - 1][2]}"
    assert len(headings) == 3300 // ROW_LIMIT + 1


@pytest.mark.asyncio
async def test_an_answer_after_the_last_dependent_says_none_come_after_it(shaped):
    """The answer after the last dependent, where the link under a full last answer leads (a total that is a
    multiple of ROW_LIMIT): it says none come after that one, with no rows and no link."""
    ds = datasette_for(shaped)
    *_, last = await web_dependents(ds, package="tiny-lib", tag="develop")
    response = await ds.client.get(f"/cache/dependents?package=tiny-lib&after={last[2]}")
    assert f"No binaries come after {last[2]}." in response.text
    assert "spack-next" not in response.text and "spack-found" not in response.text


def datasette_for(db):
    return Datasette(immutables=[str(db)], metadata=describe.build_metadata(), settings={"trace_debug": True})


async def web_dependents(ds, **params):
    response = await ds.client.get("/cache/dependents.json?" + urllib.parse.urlencode({**params, "_shape": "objects"}))
    assert response.status_code == 200, response.text[:300]
    return [(row["package"], row["version"], row["hash"], row["directly"] == "yes") for row in response.json()["rows"]]


@pytest.mark.asyncio
async def test_dependents_of_every_package_in_every_tag_are_a_plain_walks(index_db, growing):
    for db in (index_db, growing["large"]):
        ds, walk = datasette_for(db), Reference(db)
        conn = sqlite3.connect(db)
        for name, tag in conn.execute("SELECT packages.name, tags.name FROM packages CROSS JOIN tags").fetchall():
            assert await web_dependents(ds, package=name, tag=tag) == walk.dependents(name, tag), (db, name, tag)
        for (spec,) in conn.execute("SELECT hash FROM specs ORDER BY hash LIMIT 5").fetchall():
            assert await web_dependents(ds, hash=spec, tag="develop") == walk.dependents("/" + spec, "develop")
    assert len(Reference(growing["large"]).dependents("zlib", "develop")) == 40


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "target, found, way",
    [
        ("tiny-lib", 5, "nearest"),  # fewer than ROW_LIMIT dependents: the first walk has them all
        ("dense-lib", ROW_LIMIT, "batch"),  # all of the sample reach it: a batch of 1.25 ROW_LIMIT holds them
        ("mixed-lib", ROW_LIMIT, "batch"),  # a third of the sample: the batch (about 3.7 ROW_LIMIT) holds them
        (
            "lumpy-lib",
            ROW_LIMIT,
            "batch, then walked",
        ),  # LUMPY_FIRST of the sample, then none until zz-app (3,311 binaries on)
        ("sparse-lib", ROW_LIMIT, "walked"),  # 3,101 dependents, none in the sample
    ],
)
async def test_each_way_of_the_dependents_question_gives_a_plain_walks_answer(shaped, target, found, way):
    rows = await web_dependents(datasette_for(shaped), package=target, tag="develop")
    assert rows == Reference(shaped).dependents(target, "develop")
    assert len(rows) == found
    nearest, batch, enough, walked = ways_taken(shaped, canned.named("dependents").sql, target)
    if way == "nearest":
        assert (nearest, batch, enough, walked) == (1, 0, None, 0)
    elif way == "batch":
        assert (nearest, enough, walked) == (0, 1, 0)
        assert batch == ROW_LIMIT * 5 // 4 if target == "dense-lib" else ROW_LIMIT * 5 // 4 < batch < 6000
    elif way == "walked":
        assert (nearest, batch, enough, walked) == (0, 0, None, 3101)
    else:
        # the sample's 200 binaries hold LUMPY_FIRST dependents: a batch of 1.25 ROW_LIMIT times 200 / LUMPY_FIRST
        assert (nearest, batch, enough, walked) == (0, 200 * ROW_LIMIT * 5 // 4 // LUMPY_FIRST, 0, LUMPY_FIRST + 3100)


def plan(conn, sql, params):
    """EXPLAIN QUERY PLAN as {id: (parent, detail)}, in SQLite's order."""
    return {row[0]: (row[1], row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)}


def recursions_rerun_per_row(steps):
    """The recursive subqueries whose rows are made again for each row of a loop around them: a co-routine read
    by a loop that is not the outermost of its query, or any recursion inside a correlated subquery."""
    rerun = []
    children = defaultdict(list)
    for step_id, (parent, _) in steps.items():
        children[parent].append(step_id)

    def ancestors(step_id):
        while step_id in steps:
            step_id = steps[step_id][0]
            yield step_id

    for step_id, (parent, detail) in steps.items():
        if detail != "RECURSIVE STEP":
            continue
        kind, _, name = steps[parent][1].partition(" ") if parent in steps else ("", "", "")
        if any(steps[above][1].startswith("CORRELATED") for above in ancestors(step_id) if above in steps):
            rerun.append(name)
        if kind != "CO-ROUTINE":
            continue
        for reader, (outer, text) in steps.items():
            if text == f"SCAN {name}":
                loops = [c for c in children[outer] if steps[c][1].startswith(("SCAN ", "SEARCH "))]
                if loops[0] != reader:
                    rerun.append(name)
    return rerun


def whole_reads(steps):
    """Plan steps that read a whole big table: a scan, or the Bloom filter SQLite builds by reading it."""
    return [
        detail
        for _, detail in steps.values()
        if any(detail.startswith((f"SCAN {table}", f"BLOOM FILTER ON {table} ")) for table in BIG_TABLES)
    ]


def has_edges(conn):
    """The plan step of the check for any dependency at all, which stops at the first row."""
    return [detail for _, detail in plan(conn, lookup.HAS_EDGES, {}).values()]


def expanded_subqueries(sql):
    """How many subqueries SQLite makes of a query's common table expressions before it plans them: each
    reference to one (FROM, JOIN or IN its name) becomes a copy of its whole body, the references in that body
    included, materialized or not. Copies multiply along chains of references, and so does the time taken to
    prepare the query (a Datasette connection does it once per query; the terminal, on every question)."""
    sql = re.sub(r"--[^\n]*", "", sql)
    head = r"(?:^|WITH RECURSIVE |WITH )(\w+)(?:\([\w, ]+\))? AS (?:NOT )?(?:MATERIALIZED )?\("
    starts = list(re.finditer(head, sql, re.M))
    ends = [m.start() for m in starts[1:]] + [len(sql)]  # one more than starts when the query has none
    bodies = {m.group(1): sql[m.end() : end] for m, end in zip(starts, ends, strict=False)}

    @functools.cache
    def size(name):
        references = re.findall(r"\b(?:FROM|JOIN|IN)\s+(\w+)\b", bodies[name])
        return 1 + sum(size(other) for other in references if other in bodies and other != name)

    return max((size(name) for name in bodies), default=0)


@pytest.mark.parametrize("path", sorted(canned.QUERIES.glob("*.sql")), ids=lambda path: path.stem)
def test_each_question_is_prepared_from_a_bounded_number_of_subqueries(path):
    # dependents.sql makes the most: 2,530 since its answer can start after a binary (2,277 before; prepared in
    # 45 and 42 ms, by hand). Before this was checked: 4,317 (80 ms where 2,277 took 55); a version that reused
    # its walks' results in more places: 45,003 (1.2 s).
    assert expanded_subqueries(canned.read_query(path).sql) <= 2600


@pytest.mark.parametrize(
    "params",
    [
        {"package": "zlib", "hash": "", "tag": "", "after": ""},
        {"package": "", "hash": "abcd", "tag": "v1", "after": ""},
    ],
)
def test_the_dependents_plan_walks_once_and_reads_no_whole_table(growing, params):
    conn = sqlite3.connect(growing["large"])
    steps = plan(conn, canned.named("dependents").sql, params)
    assert any(detail == "RECURSIVE STEP" for _, detail in steps.values())
    assert recursions_rerun_per_row(steps) == []
    assert whole_reads(steps) == has_edges(conn)


# The plan SQLite chose for the dependents question before issue 19 (abridged), which took 1.9 s for 73 rows:
# the recursion, a co-routine, read by the fifth loop of the query that lists the dependents found.
PLAN_THAT_TIMED_OUT = {
    6: (4, "CO-ROUTINE found"),
    8: (6, "CO-ROUTINE dependents"),
    12: (8, "SETUP"),
    59: (12, "SCAN link_edges"),
    249: (8, "RECURSIVE STEP"),
    252: (249, "SCAN dependents"),
    264: (249, "SEARCH link_edges USING AUTOMATIC COVERING INDEX (dependency_id=?)"),
    295: (6, "SCAN packages USING COVERING INDEX sqlite_autoindex_packages_1"),
    297: (6, "SCAN stack_sets"),
    299: (6, "SCAN configurations"),
    301: (6, "SEARCH versions USING INTEGER PRIMARY KEY (rowid=?)"),
    304: (6, "SCAN dependents"),
    307: (6, "SEARCH specs USING INDEX specs_by_configuration (configuration_id=? AND rowid=?)"),
}


def test_a_recursion_read_inside_a_loop_is_seen():
    assert recursions_rerun_per_row(PLAN_THAT_TIMED_OUT) == ["dependents"]


def steps_of(db, question):
    """SQLite's virtual machine steps (to the hundred) that question(conn) takes."""
    conn = lookup.open_database(db)
    counted = [0]
    conn.set_progress_handler(lambda: counted.__setitem__(0, counted[0] + 1), 100)
    question(conn)
    return counted[0] * 100


@pytest.mark.parametrize("target", ["zlib", "/zlib"])
def test_dependents_work_stays_the_same_as_the_rest_of_the_database_grows(growing, target):
    """Ten times as many other binaries in the tag, and three more tags with their own zlib and ten times as
    many dependents of it: the same answer for the same work, for the package and for one of its binaries."""
    if target == "/zlib":
        target = "/" + develop_spec(sqlite3.connect(growing["small"]), "zlib")
    answers = {
        size: steps_of(db, lambda conn: dependencies.dependents(conn, target, "develop"))
        for size, db in growing.items()
    }
    rows = {
        size: dependencies.dependents(lookup.open_database(db), target, "develop").rows for size, db in growing.items()
    }
    assert [row["hash"] for row in rows["small"]] == [row["hash"] for row in rows["large"]]
    assert 0 < len(rows["small"]) <= 40
    assert answers["large"] < 1.25 * answers["small"], answers


def test_dependents_work_does_not_grow_with_the_packages_specs_in_other_tags(tmp_path):
    """The package's specs that the tag's indexes give as dependencies only are looked up by configuration and
    tag (dependency_only_specs): the question used to look for a page of every spec of the package in the
    history (the history's most prolific package has 155,852: 61 ms of the 138 its dependents took)."""
    develop = [*library_tag("develop", 40, 200), record("via-unlisted", edges=[(unlisted_zlib("develop"), LINK)])]
    many = {tag: [record("zlib", seed=(tag, n)) for n in range(3000)] for tag in ("v1", "v2")}
    dbs = {
        "alone": build_tags(tmp_path / "alone", {"develop": develop}),
        "beside": build_tags(tmp_path / "beside", {"develop": develop, **many}),
    }
    answers = {
        name: [(row["package"], row["hash"], row["directly"]) for row in rows]
        for name, db in dbs.items()
        if (rows := dependencies.dependents(lookup.open_database(db), "zlib", "develop").rows)
    }
    assert answers["alone"] == answers["beside"]
    assert [(package, directly) for package, _, directly in answers["alone"] if package == "via-unlisted"] == [
        ("via-unlisted", "yes")
    ]
    steps = {
        name: steps_of(db, lambda conn: dependencies.dependents(conn, "zlib", "develop")) for name, db in dbs.items()
    }
    assert steps["beside"] < 1.1 * steps["alone"], steps
    sql = canned.named("dependents").sql
    found = plan(sqlite3.connect(dbs["beside"]), sql, {"package": "zlib", "hash": "", "tag": "develop", "after": ""})
    lookups = {detail for _, detail in found.values() if "dependency_only_specs" in detail}
    assert lookups and all(
        lookup.startswith("SEARCH") and "configuration_id=?" in lookup and "tag_id=?" in lookup for lookup in lookups
    ), lookups  # by its primary key, or by the index by tag (which holds the key's columns)


def test_dependents_do_not_walk_the_other_tags_dependents_of_a_spec_that_is_a_binary_there(tmp_path):
    """A spec the tag's indexes give as a dependency only may be a binary of another tag, with its dependents
    there: it is not a target, so the question does not read the other tag's edges (py-wysy's dependents took
    97 ms instead of 21 in the history from indexes)."""
    develop = library_tag("develop", 40, 200)
    binary = (unlisted_zlib("develop")[0], {**unlisted_zlib("develop")[1], "in_buildcache": True})
    other = [binary, *(record("user", seed=n, edges=[(binary, LINK)]) for n in range(3000))]
    dbs = {
        "alone": build_tags(tmp_path / "alone", {"develop": develop}),
        "beside": build_tags(tmp_path / "beside", {"develop": develop, "v1": other}),
    }
    steps = {
        name: steps_of(db, lambda conn: dependencies.dependents(conn, "zlib", "develop")) for name, db in dbs.items()
    }
    assert steps["beside"] < 1.1 * steps["alone"], steps


def test_binaries_that_link_directly_are_not_followed_down(tmp_path):
    """The tag's first binaries that link against the library are its dependents whatever lies below them: with
    a binary of its own below each, the question does the same work (1.03 times; following each down, as it
    did, cost 1.44 times the work. On the history built from indexes, the dependents of its most depended-on
    library took 2.5M steps, 1.1M since)."""
    dbs = {helpers: build_tags(tmp_path / str(helpers), {"develop": direct_tag(helpers)}) for helpers in (False, True)}
    for db in dbs.values():
        rows = dependencies.dependents(lookup.open_database(db), "lib", "develop").rows
        found = [(row["package"], row["version"], row["hash"], row["directly"] == "yes") for row in rows]
        assert found == Reference(db).dependents("lib", "develop")
        assert len(rows) == ROW_LIMIT
    steps = {
        helpers: steps_of(db, lambda conn: dependencies.dependents(conn, "lib", "develop"))
        for helpers, db in dbs.items()
    }
    assert steps[True] < 1.1 * steps[False], steps


def test_hash_lookup_reads_the_edges_of_the_specs_found_only(growing):
    """A binary's direct dependencies come through the edges' key (spec_id): the dependencies view spells the
    dependent's hash out per row, so a filter on that hash read every edge (22.8M in a history built from
    indexes: the question timed out)."""
    sql = canned.named("hash_lookup").sql
    conn = sqlite3.connect(growing["large"])
    spec_hash = develop_spec(conn, "app3")
    (row,) = conn.execute(sql, {"hash": spec_hash}).fetchall()
    edges = conn.execute("SELECT count(*) FROM dependencies WHERE hash = ?", [spec_hash]).fetchone()[0]
    assert row[0] == spec_hash and row[-2].count(";") == edges - 1 > 0
    steps = [step for *_, step in conn.execute(f"EXPLAIN QUERY PLAN {sql}", {"hash": spec_hash})]
    edge_steps = [step for step in steps if "spec_dependencies" in step]
    assert edge_steps and set(edge_steps) == {"SEARCH spec_dependencies USING PRIMARY KEY (spec_id=?)"}, steps


@pytest.mark.parametrize(
    "params", [{"package": "pkg1", "hash": "", "after": ""}, {"package": "pkg1", "hash": "abcd", "after": ""}]
)
def test_the_dependents_question_on_pages_reads_nothing_however_many_binaries_the_package_has(tmp_path, params):
    """Pages have no edges: the question answers at once, the same work whether the package has its binaries
    in one tag or in eight (it used to check every spec of the package in every tag)."""
    sql = canned.named("dependents").sql

    def ask(conn):
        return conn.execute(sql, {**params, "tag": "v0"}).fetchall()

    steps = {}
    for tags in (1, 8):
        site = write_spread_corpus(tmp_path / f"{tags}", [f"v{n}" for n in range(tags)], 2, 300)
        build([str(site)], tmp_path / f"{tags}.db")
        rows = ask(lookup.open_database(tmp_path / f"{tags}.db"))
        assert len(rows) == 1 and rows[0][0] is None  # the sentence that says there are no dependencies
        steps[tags] = steps_of(tmp_path / f"{tags}.db", ask)
    assert steps[8] <= steps[1] + 200, steps


def test_the_dependency_tree_reads_each_spec_from_its_key(growing):
    spec = develop_spec(sqlite3.connect(growing["small"]), "app4")
    conn = sqlite3.connect(growing["large"])
    steps = plan(conn, canned.named("dependency_tree").sql, {"hash": spec, "tag": ""})
    assert recursions_rerun_per_row(steps) == []
    assert whole_reads(steps) == has_edges(conn)
    trees = {
        size: dependencies.dependency_tree(lookup.open_database(db), spec, "develop") for size, db in growing.items()
    }
    assert trees["small"].as_json()["tree"] == trees["large"].as_json()["tree"] and len(trees["small"].specs) > 5
    answers = {
        size: steps_of(db, lambda conn: dependencies.dependency_tree(conn, spec, "develop"))
        for size, db in growing.items()
    }
    assert answers["large"] < 1.25 * answers["small"], answers


def develop_spec(conn, name):
    """The hash of the first binary of this package in develop."""
    return conn.execute(
        "SELECT hash FROM spec_names JOIN spec_tags ON spec_tags.spec_id = spec_names.id"
        " WHERE package = ? AND tag_id = (SELECT id FROM tags WHERE name = 'develop') ORDER BY hash LIMIT 1",
        [name],
    ).fetchone()[0]


@pytest.mark.asyncio
async def test_the_package_page_asks_for_its_binaries_dependencies_and_dependents_together(growing, monkeypatch):
    """Datasette's SQL threads read them side by side: one after the other, those of the package with the most
    binaries in the history from indexes took 80 ms."""
    in_flight, seen = [0], []
    execute = Database.execute

    async def counted(self, sql, *args, **kwargs):
        in_flight[0] += 1
        seen.append(in_flight[0])
        try:
            return await execute(self, sql, *args, **kwargs)
        finally:
            in_flight[0] -= 1

    monkeypatch.setattr(Database, "execute", counted)
    response = await datasette_for(growing["large"]).client.get("/cache/package?package=zlib")
    assert response.status_code == 200 and "app0" in response.text
    assert max(seen) >= 3, seen


@pytest.mark.parametrize(
    "sql, name", [(package._DEPENDENCIES, "app2"), (package._DEPENDENTS, "zlib")], ids=["dependencies", "dependents"]
)
def test_the_package_pages_dependency_lists_read_their_indexes(growing, sql, name):
    conn = sqlite3.connect(growing["large"])
    assert whole_reads(plan(conn, sql, {"package": name, "tag": "develop"})) == []
    assert conn.execute(sql, {"package": name, "tag": "develop"}).fetchall()


def test_the_package_pages_dependents_probe_only_the_link_kinds_its_package_is_a_dependency_of(growing, tmp_path):
    """Link kinds that no edge to the package has cost nothing: cit of the history from indexes, which nothing
    links against, had its 2,991 binaries in develop looked up once per link kind (17): 36 ms for no row."""
    more_kinds = shutil.copy(growing["small"], tmp_path / "cache.db")
    with sqlite3.connect(more_kinds) as conn:
        conn.executemany(
            "INSERT INTO dependency_kinds (deptypes, virtuals, is_build, is_link, is_run, is_test)"
            " VALUES ('[\"link\"]', ?, 0, 1, 0, 0)",
            [(json.dumps([f"virtual{n}"]),) for n in range(2000)],
        )
    dbs = {"as built": growing["small"], "with more link kinds": more_kinds}
    asked = {"package": "zlib", "tag": "develop"}
    answers = {name: sqlite3.connect(db).execute(package._DEPENDENTS, asked).fetchall() for name, db in dbs.items()}
    assert answers["as built"] == answers["with more link kinds"] != []
    steps = {
        name: steps_of(db, lambda conn: conn.execute(package._DEPENDENTS, asked).fetchall()) for name, db in dbs.items()
    }
    assert steps["with more link kinds"] < 1.1 * steps["as built"], steps


def test_dependents_look_link_kinds_up_only_for_binaries_that_are_dependencies(tmp_path):
    """A binary of the package asked about that nothing depends on costs one lookup, not one per link kind:
    muka of the history from indexes, 333 of whose 2,502 binaries in develop are dependencies, took 42,534
    lookups (62 ms) to find its 281 direct dependents. Here leafy has 60 binaries and single one, each with one
    binary that another links against: 2,000 more link kinds cost leafy about what they cost single."""
    leafy = [record("leafy", seed=n) for n in range(60)]
    single = record("single")
    users = [record("user", seed=n, edges=[(linked, LINK)]) for n, linked in enumerate((leafy[0], single))]
    as_built = build_tags(tmp_path / "as built", {"develop": [*leafy, single, *users]})
    more_kinds = shutil.copy(as_built, tmp_path / "cache.db")
    with sqlite3.connect(more_kinds) as conn:
        conn.executemany(
            "INSERT INTO dependency_kinds (deptypes, virtuals, is_build, is_link, is_run, is_test)"
            " VALUES ('[\"link\"]', ?, 0, 1, 0, 0)",
            [(json.dumps([f"virtual{n}"]),) for n in range(2000)],
        )
    added = {}
    for asked in ("leafy", "single"):

        def question(conn, asked=asked):
            return dependencies.dependents(conn, asked, "develop")

        answers = [question(lookup.open_database(db)) for db in (as_built, more_kinds)]
        assert answers[0] == answers[1] and len(answers[0].rows) == 1, asked
        steps = [steps_of(db, question) for db in (as_built, more_kinds)]
        added[asked] = steps[1] - steps[0]
    assert 0 < added["leafy"] < 2 * added["single"], added


@pytest.mark.asyncio
async def test_the_dependencies_view_filtered_by_hash_counts_its_rows_from_the_edges_of_the_spec(growing):
    """What Datasette runs for /cache/dependencies?hash=: the count of its rows reads the edges of one spec, by
    their key, and nothing per edge besides (a page filtered by the dependency is counted from the count table
    of edges per dependency: test_dependency_counts.py)."""
    db = growing["large"]
    conn = sqlite3.connect(db)
    value = develop_spec(conn, "app3")
    edges = conn.execute("SELECT count(*) FROM dependencies WHERE hash = ?", [value]).fetchone()[0]
    answer = (await datasette_for(db).client.get(f"/cache/dependencies.json?hash={value}&_trace=1")).json()
    assert answer["filtered_table_rows_count"] == edges > 0
    counted = next(t for t in answer["_trace"]["traces"] if t["sql"].startswith("select count(*) from dependencies"))
    steps = plan(conn, counted["sql"], counted["params"])
    loops = [detail for _, detail in steps.values() if detail.startswith(("SCAN", "SEARCH"))]
    assert whole_reads(steps) == []
    assert any(loop.startswith("SEARCH spec_dependencies USING PRIMARY KEY (spec_id=?)") for loop in loops)


def test_the_deptype_flags_agree_with_the_deptypes_json(index_db, shaped):
    assert tuple(schema.DEPTYPE_FLAGS) == ("build", "link", "run", "test")  # Spack's, in its order
    for db in (index_db, shaped):
        conn = sqlite3.connect(db)
        conn.row_factory = sqlite3.Row
        kinds = conn.execute("SELECT * FROM dependency_kinds").fetchall()
        assert kinds
        for kind in kinds:
            said = set(json.loads(kind["deptypes"]))
            assert {deptype for deptype, flag in schema.DEPTYPE_FLAGS.items() if kind[flag]} == said, dict(kind)


def test_a_trees_edges_are_followed_by_their_flags(index_db, tmp_path):
    """Link and run edges make the tree, build-only ones only with build: as the flags say, whatever the JSON."""

    def packages(db, build_deps=False):
        tree = dependencies.dependency_tree(lookup.open_database(db), LIBDWARF_M1, build=build_deps)
        return {dependency.spec.package for dependency in tree.specs}

    assert packages(index_db) == {"libdwarf", "libelf", "gcc-runtime"}
    assert packages(index_db, True) == {"libdwarf", "libelf", "gcc-runtime", "compiler-wrapper", "gcc"}
    flagless = shutil.copy(index_db, tmp_path / "cache.db")
    with sqlite3.connect(flagless) as conn:
        conn.execute("UPDATE dependency_kinds SET is_link = 0, is_run = 0")
    assert packages(flagless) == {"libdwarf"}
    assert packages(flagless, True) == packages(index_db, True)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "args, page_size, said, listed",
    [
        (
            {"package": "aa-app"},
            100,
            "The first 100 of 1,000 or more binaries of aa-app in develop (the first 1,000 in Find binaries;"
            " the filters narrow them).",
            100,
        ),
        (
            {"package": "aa-app", "version": "2.0"},
            100,
            "100 binaries of aa-app in develop that match the filters.",
            100,
        ),
        (
            {"package": "aa-app", "version": "2.0"},
            30,
            "The first 30 of 100 binaries of aa-app in develop that match the filters (all 100 in Find binaries).",
            30,
        ),
        ({"package": "ab-tool"}, 100, "5 binaries of ab-tool in develop.", 5),
    ],
)
async def test_the_package_page_lists_a_page_of_binaries_and_links_to_them_all(shaped, args, page_size, said, listed):
    """A page of Datasette's size, the first of find_binaries' answer, and a link to that answer: the same
    binaries in the same order, then the rest of them."""
    ds = Datasette(
        immutables=[str(shaped)], metadata=describe.build_metadata(), settings={"default_page_size": page_size}
    )
    response = await ds.client.get("/cache/package?" + urllib.parse.urlencode(args))
    found = re.search(r'<p class="spack-found">(.*?)\n', response.text).group(1)
    assert re.sub(r"<[^>]+>", "", found) == said
    hashes = re.findall(r'<input type="checkbox" name="hash" value="([a-z0-9]+)"', response.text)
    assert len(hashes) == listed
    link = re.search(r'<a href="([^"]+)">(?:all|the first)', found)
    if not said.startswith("The first"):
        assert link is None
        return
    path, query = html.unescape(link.group(1)).split("?")
    assert path == "/cache/find_binaries"
    assert urllib.parse.parse_qs(query) == {"tag": ["develop"], **{name: [value] for name, value in args.items()}}
    answer = await ds.client.get(f"{path}.json?{query}&_shape=objects")
    every = [row["hash"] for row in answer.json()["rows"]]
    assert every[:listed] == hashes
    assert len(every) == int(said.split(" of ")[1].split()[0].replace(",", ""))
