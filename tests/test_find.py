"""`find SPEC` as a person runs it (a subprocess, its exit status, what it prints), over a database built
from the test data: pages, Spack's sample indexes and our Database version 5 mirror. Its answers are checked
against the binaries view read by Spack's rules in Python, and are the same as the web's find question."""

import csv
import io
import json
import re
import sqlite3
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from datasette.app import Datasette
from pagemaker import spec, write_page
from paths import DATA, ROOT, SEEDS, SITE
from test_dependents import BUILD, LINK, build_tags, expanded_subqueries, record, steps_of

from spack_cache_db import normalise
from spack_cache_db.build import build
from spack_cache_db.db.schema import NO_DEPENDENCIES, SCHEMA_VERSION
from spack_cache_db.query import find as find_module
from spack_cache_db.query.spec import parse
from spack_cache_db.web import describe

SNAPSHOT = "develop-2025-04-20"
INDEXES = DATA / "indexes"
# The version 5 sample's hashes (tests/data/indexes/v2-layout-db-v5)
HDF5, OPENMPI, HWLOC, LIBPCIACCESS = (
    "7npvt5jucjrtxouqle4sdl2wjjouriqr",
    "ir5mewebs4dphpgrjlapy6il5g5joes3",
    "65sq5c57d3sykzqdjjio4qciur24besm",
    "auxa5pqkkib4g63zje43x3vo3akpzms2",
)
LIBDWARF_M1, LIBELF_M1 = "u5uz3dcch5if4eve4sef67o2rf2lbfgh", "jr3yipyxyjulcdvckwwwjrrumis7glpa"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("find") / "cache.db"
    build(
        [
            SITE,
            SEEDS,
            f"old={INDEXES / 'v2-layout-db-v5'}",
            f"mid={INDEXES / 'v2-layout-db-v7'}",
            f"new={INDEXES / 'v2-layout-db-v8'}",
        ],
        path,
    )
    return path


def find(db, *arguments, script=(sys.executable, str(ROOT / "build_db.py"))):
    return subprocess.run(
        [*script, "find", *arguments, "--db", str(db)], capture_output=True, text=True, timeout=120, check=False
    )


def found_json(db, *arguments):
    result = find(db, *arguments, "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def hashes(rows):
    return [row["hash"] for row in rows]


# --- The answers, against the binaries view read by Spack's rules --------------------------------------------


def binaries(db):
    conn = sqlite3.connect(db)
    runs_on = set(conn.execute("SELECT host, target FROM runs_on"))
    conn.row_factory = sqlite3.Row
    return [dict(row) for row in conn.execute("SELECT * FROM binaries")], runs_on


def in_ranges(version, ranges):
    key = normalise.version_sort_key(version)
    return any(lo <= key and (hi == "" or key < hi) for lo, hi in ranges)


def has_variant(variants, name, operator, values):
    for raw in variants:
        variant = normalise.parse_variant(raw)
        if variant.name != name:
            continue
        if operator in "+~":
            return variant.operator == operator
        return set(values) <= set(variant.values) and (operator == "=" or set(values) == set(variant.values))
    return False


def target_fits(target, wanted, runs_on):
    if "is" in wanted:
        return target == wanted["is"]
    return (not wanted["from"] or (target, wanted["from"]) in runs_on) and (
        not wanted["to"] or (wanted["to"], target) in runs_on
    )


def matches(row, node, runs_on):
    """Whether a binary matches the root of a spec, read by Spack's rules from the binaries view."""
    compiler, _ = normalise.parse_compiler(row["compiler"])
    return (
        (not node.name or row["package"] == node.name)
        and (node.versions is None or in_ranges(row["version"], node.versions))
        and all(has_variant(json.loads(row["variants"]), *term) for term in node.variants.values())
        and (not node.compiler or compiler.name in node.as_json()["compilers"])
        and (node.compiler_versions is None or compiler.version and in_ranges(compiler.version, node.compiler_versions))
        and (not node.os or row["os"] == node.os)
        and (not node.platform or row["platform"] == node.platform)
        and (node.targets is None or any(target_fits(row["target"], t, runs_on) for t in node.targets))
        and (not node.hash or row["hash"].startswith(node.hash))
    )


SPECS = [
    ("hdf5", SNAPSHOT),
    ("hdf5@1.14", SNAPSHOT),
    ("hdf5@1.10:1.12", SNAPSHOT),
    ("hdf5@:1.12", SNAPSHOT),
    ("hdf5@1.14:", SNAPSHOT),
    ("hdf5@=1.14.6", SNAPSHOT),
    ("hdf5@=1.14", SNAPSHOT),
    ("hdf5@1.8.23,1.14.6", SNAPSHOT),
    ("hdf5+mpi~cxx %gcc@11", SNAPSHOT),
    ("hdf5 %gcc@:11.2", SNAPSHOT),
    ("hdf5 %gcc@=11.4.0", SNAPSHOT),
    ("hdf5 api=default patches=f42732a", SNAPSHOT),
    ("hdf5 patches:=f42732a", SNAPSHOT),
    ("hdf5 target=x86_64_v3: os=ubuntu22.04", SNAPSHOT),
    ("hdf5 target=:zen3", SNAPSHOT),
    ("hdf5 arch=linux-ubuntu22.04-neoverse_v2", SNAPSHOT),
    ("hdf5 platform=darwin", SNAPSHOT),
    ("mpich patches=de0de41", SNAPSHOT),
    ("+mpi", "*"),
    ("bolt@1.0:", "*"),
    ("cli11 %oneapi", "*"),
    ("py-mpi4py build_system==python_pip", "*"),
    ("libelf %gcc@10", "mid"),
]


@pytest.mark.parametrize("text, tag", SPECS, ids=[f"{text}|{tag}" for text, tag in SPECS])
def test_find_answers_what_spack_rules_say_of_the_binaries(db, text, tag):
    rows, runs_on = binaries(db)
    root = parse(text).root
    expected = {
        (row["tag"], row["hash"]) for row in rows if row["tag"] == tag or tag == "*" if matches(row, root, runs_on)
    }
    conn = find_module.open_database(db)
    found = find_module.find(conn, text, [tag])
    assert {(row["tag"], row["hash"]) for row in found.rows} == expected
    assert len(expected) < 100, "the samples stay under find's limit"


@pytest.mark.parametrize(
    "compiler", ["oneapi", "oneapi@2024.2", "intel-oneapi-compilers", "intel-oneapi-compilers@2024.2.1"]
)
def test_the_compiler_field_takes_either_name_of_a_compiler_as_the_spec_does(db, compiler):
    """Spack 1.0 made compilers packages (%oneapi is intel-oneapi-compilers): the spec field found binaries of
    either name, and now the form's compiler field does too (oneapi found nothing there)."""
    conn = find_module.open_database(db)
    by_spec = {row["hash"] for row in find_module.find(conn, f"cli11 %{compiler}", ["*"]).rows}
    parameters = {**find_module.parameters("", ["*"]), "package": "cli11", "compiler": compiler}
    assert by_spec and {row[3] for row in conn.execute(find_module.QUERY.sql, parameters)} == by_spec


@pytest.mark.asyncio
@pytest.mark.parametrize("compiler", ["oneapi@2025.1", "intel-oneapi-compilers@2024.0"])
async def test_a_compiler_field_that_finds_binaries_by_its_other_name_is_not_said_to_find_none(db, compiler):
    """The page's warning reads the field as find_binaries does, with either of the compiler's names: here only
    the other name has that version."""
    ds = Datasette(immutables=[str(db)], metadata=describe.build_metadata())
    response = await ds.client.get(f"/cache/find_binaries.json?compiler={compiler}&tag=*&_shape=objects")
    assert response.json()["rows"], compiler
    page = await ds.client.get(f"/cache/find_binaries?compiler={compiler}&tag=*")
    assert page.status_code == 200 and "No binary here was built with" not in page.text


def test_every_spec_of_the_table_finds_something_and_not_everything(db):
    rows, runs_on = binaries(db)
    for text, tag in SPECS:
        if text not in ("hdf5@=1.14", "hdf5@1.14:"):
            kept = [
                row for row in rows if (tag == "*" or row["tag"] == tag) and matches(row, parse(text).root, runs_on)
            ]
            assert kept, text
    assert not [row for row in rows if matches(row, parse("hdf5@=1.14").root, runs_on)], "no hdf5 is 1.14 exactly"


# --- ^dependencies, from the indexes' edges ----------------------------------------------------------------


DEPENDENCIES = [
    ("^hwloc", "old", {HDF5, OPENMPI}),  # a dependency no mirror holds (not in_buildcache, not external)
    ("hdf5 ^hwloc", "old", {HDF5}),
    ("^libpciaccess", "old", {HDF5, OPENMPI}),  # an external, two edges down
    ("^hwloc libs=shared ^zlib+pic", "old", {HDF5, OPENMPI}),
    ("^hwloc libs:=shared", "old", set()),  # hwloc has shared and static
    ("^openmpi@3: target=skylake %gcc@7", "old", {HDF5}),
    ("^zlib@1.3:", "old", set()),
    ("^cmake", "old", {HDF5}),  # a build-only dependency
    (f"^/{HWLOC[:4]}", "old", {HDF5, OPENMPI}),
    (f"^hwloc/{HWLOC[:4]}", "old", {HDF5, OPENMPI}),
    ("^hwloc/aaaa", "old", set()),
    ("^zlib ^cmake", "old", {HDF5}),
    ("^libelf", "new", {LIBDWARF_M1, "sk2gqqz4n5njmvktycnd25wq25jxiqkr"}),
    ("^gcc", "new", {LIBDWARF_M1, LIBELF_M1, "izgzpzeljwairalfjm3k6fntbb64nt6n"}),  # the external compiler
    ("^c", "new", {LIBDWARF_M1, LIBELF_M1}),  # a virtual: whoever gcc provides c to
    ("^cxx", "new", {LIBDWARF_M1}),
    ("libelf ^c", "new", {LIBELF_M1}),
    ("^mpi", "old", set()),  # no edge here provides mpi
]


@pytest.mark.parametrize("text, tag, expected", DEPENDENCIES, ids=[text for text, _, _ in DEPENDENCIES])
def test_a_dependency_anywhere_in_the_dag_matches(db, text, tag, expected):
    conn = find_module.open_database(db)
    assert set(hashes(find_module.find(conn, text, [tag]).rows)) == expected


def test_find_binaries_is_prepared_from_few_subqueries():
    """Each reference to a common table expression copies all it reads into the query, and a Datasette
    connection prepares the query on its first answer. By hand, on a fresh connection of the spread report's
    database: 1,658 subqueries when the sorted rows' LIMIT read walk a second time (114-126 ms); 1,214 when the
    walk up's first step read its start twice and the tag field's words read args (about 90 ms); 660 (about
    48 ms). The fields' narrowing of the scan and a package's first tags took it to 790, the compiler field's
    other names to 832, its os and target filters read through the same ids to 836: 20, 24, then 26 ms."""
    assert expanded_subqueries(find_module.QUERY.sql) <= 850


@pytest.mark.parametrize("text, tag, expected", DEPENDENCIES, ids=[text for text, _, _ in DEPENDENCIES])
def test_down_the_dag_and_up_the_edges_give_the_same_answer(db, text, tag, expected):
    """find_binaries.sql walks up from the dependencies when they are few, else down each binary's DAG (by
    the specs that match when those are known, else reading each spec; at once for a package with few
    binaries): each way finds the same."""
    sql = find_module.QUERY.sql
    up_allowed_nothing = sql.replace(
        "(SELECT count(*) FROM dependents) <= 10000", "(SELECT count(*) FROM dependents) < 0"
    )
    nothing_known = up_allowed_nothing.replace(
        "(SELECT count(*) FROM dependency_specs) <= 10000", "(SELECT count(*) FROM dependency_specs) < 0"
    )
    never_few = sql.replace("), 0) <= 2000 AS few", "), 0) < 0 AS few")
    assert sql not in (up_allowed_nothing, nothing_known, never_few)
    conn = find_module.open_database(db)
    parameters = find_module.parameters(text, [tag])
    answer = conn.execute(sql, parameters).fetchall()
    assert conn.execute(up_allowed_nothing, parameters).fetchall() == answer  # down, by the specs found
    assert conn.execute(nothing_known, parameters).fetchall() == answer  # down, reading each spec
    assert conn.execute(never_few, parameters).fetchall() == answer  # a package named: up too


def test_the_dependencies_no_mirror_holds_are_looked_up_by_configuration(db):
    """The specs of ^hwloc that the indexes give as dependencies only come from dependency_only_specs by
    configuration: this used to read every spec of the configurations that match and look for a page of each."""
    conn = find_module.open_database(db)
    parameters = find_module.parameters("^hwloc", ["old"])
    steps = [row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {find_module.QUERY.sql}", parameters)]
    assert "SEARCH dependency_only_specs USING PRIMARY KEY (configuration_id=?)" in steps, steps
    assert not [step for step in steps if "specs_by_configuration" in step], steps


def test_up_the_edges_within_the_tags_asked_for_through_their_dependencies_only(tmp_path):
    """Up the edges, a spec outside the tags asked for is not followed: lib, in both tags, has a dependent in
    each. A path through a spec the tag's index holds as a dependency only (tool, no mirror's binary) is
    followed. Down each binary's DAG finds the same."""
    lib = record("lib")
    tool = record("tool", binary=False, edges=[(lib, LINK)])
    app, other = record("app", edges=[(tool, BUILD)]), record("other", edges=[(lib, LINK)])
    conn = find_module.open_database(build_tags(tmp_path, {"develop": [lib, tool, app], "v1": [lib, other]}))
    sql = find_module.QUERY.sql
    down = sql.replace("(SELECT count(*) FROM dependents) <= 10000", "(SELECT count(*) FROM dependents) < 0")
    assert down != sql
    for tags, expected in [(["develop"], ["app"]), (["v1"], ["other"]), (["*"], ["app", "other"])]:
        parameters = find_module.parameters("^lib", tags)
        for query in (sql, down):
            found = [row[0] for row in conn.execute(query, parameters)]
            assert found == expected, (tags, query is down)


# --- The stack, os, target, host and compiler fields narrow what the scan reads ------------------------------

# find_binaries.sql with each narrowing turned off: the tags the build counted binaries of those fields in, the
# pages found through the listings of fields that have few binaries, and the tags that fill a package's answer.
EVERY_TAG_SCANNED = ("wanted_tags.id IN (SELECT id FROM scanned_tags)", "1")
NO_FEW_PAGES = ("<= 20000 AS few", "< 0 AS few")
EVERY_TAG_READ = ("OR wanted_tags.id IN (SELECT tag_id FROM first_tags)", "OR 1")


def without(*changes):
    sql = find_module.QUERY.sql
    for old, new in changes:
        assert sql.count(old) == 1, old
        sql = sql.replace(old, new)
    return sql


def fields_history(folder, tags, packages, rare_pages):
    """cache.db of pages: every package in every tag (develop-0, develop-1, ...), each page with 20 binaries of
    e4s on ubuntu24.04 and 5 on sonoma; and in rare_pages ((tag, package) numbers), a binary of hep on sonoma."""
    for tag in range(tags):
        for package in range(packages):
            binaries = [spec((tag, package, n)) for n in range(20)]
            binaries += [spec((tag, package, "sonoma", n), os="sonoma", target="m1") for n in range(5)]
            if (tag, package) in rare_pages:
                binaries.append(spec((tag, package, "rare"), os="sonoma", target="m1", stacks=["hep", "root"]))
            write_page(folder / "site", f"pkg{package:03}", f"develop-{tag}", binaries)
    build([folder / "site"], folder / "cache.db")
    return folder / "cache.db"


def scan_work(db, sql, **fields):
    """(the hashes find_binaries answers in every tag with these fields, SQLite's steps for them)."""
    parameters = {**find_module.parameters("", ["*"]), **fields}
    found = []
    steps = steps_of(db, lambda conn: found.extend(row[3] for row in conn.execute(sql, parameters)))
    return found, steps


def test_fields_only_a_few_tags_have_are_looked_for_in_those_tags_only(tmp_path):
    """hep on sonoma is in the last tag only: three tags or twelve, the scan reads that tag alone, as the
    build's cells of each tag say (and without the pages found through the listings, as when the fields have
    many binaries). Every tag asked for was read: in every tag of the spread history, 172 of 524 combinations
    of these fields took over 200 ms, many past the time limit."""
    dbs = {tags: fields_history(tmp_path / str(tags), tags, 6, {(tags - 1, 5)}) for tags in (3, 12)}
    narrowed = without(NO_FEW_PAGES)
    work = {tags: scan_work(db, narrowed, stack="hep", os="sonoma") for tags, db in dbs.items()}
    assert [len(found) for found, _ in work.values()] == [1, 1]
    every_tag = without(NO_FEW_PAGES, EVERY_TAG_SCANNED)
    unnarrowed = {tags: scan_work(db, every_tag, stack="hep", os="sonoma") for tags, db in dbs.items()}
    assert unnarrowed[12][0] == work[12][0]
    # What is left is each tag's cells looked at: 800 steps more, against 17,000 reading its pages.
    assert work[12][1] - work[3][1] < 0.15 * (unnarrowed[12][1] - unnarrowed[3][1]), (work, unnarrowed)


def test_fields_with_few_binaries_are_read_from_the_pages_that_list_them(tmp_path):
    """hep on sonoma is on one package's page in every tag, and every package has binaries on sonoma: with 4
    packages or 32, the scan reads the pages that list hep's binaries, found through its listings."""
    dbs = {
        packages: fields_history(tmp_path / str(packages), 3, packages, {(tag, packages - 1) for tag in range(3)})
        for packages in (4, 32)
    }
    work = {packages: scan_work(db, find_module.QUERY.sql, stack="hep", os="sonoma") for packages, db in dbs.items()}
    assert [len(found) for found, _ in work.values()] == [3, 3]
    every_page = without(NO_FEW_PAGES)
    unnarrowed = {packages: scan_work(db, every_page, stack="hep", os="sonoma") for packages, db in dbs.items()}
    assert unnarrowed[32][0] == work[32][0]
    # What is left is the packages' names read in order: 1,900 steps more, against 28,900 reading their pages.
    assert work[32][1] - work[4][1] < 0.15 * (unnarrowed[32][1] - unnarrowed[4][1]), (work, unnarrowed)


def field_combinations(db):
    conn = sqlite3.connect(db)
    names = {
        kind: [row[0] for row in conn.execute(f"SELECT name FROM {kind}")] for kind in ("stacks", "oss", "targets")
    }
    compilers = sorted({row[0] for row in conn.execute("SELECT name FROM compilers")} | {"gcc@13", "gcc@12.3.0"})
    combinations = [{"stack": stack, "os": os} for stack in names["stacks"] for os in names["oss"]]
    combinations += [{"os": os, "target": target} for os in names["oss"] for target in names["targets"]]
    combinations += [{"compiler": compiler, "host": "zen3"} for compiler in compilers]
    return combinations + [{"stack": stack, "compiler": "gcc"} for stack in names["stacks"]]


def test_the_fields_narrowing_keeps_the_answer(db):
    """Every stack with every os, every os with every target, each compiler on a zen3 host, in every tag: the same
    rows with the scan narrowed to the tags and pages that have binaries of the fields, and without. (A package
    alone here has fewer binaries than a page shows, so its narrowing would keep every tag: the package-alone
    test compares the two on a package that fills its answer.)"""
    conn = find_module.open_database(db)
    unnarrowed = without(NO_FEW_PAGES, EVERY_TAG_SCANNED, EVERY_TAG_READ)
    combinations = field_combinations(db)
    answered = 0
    for fields in combinations:
        parameters = {**find_module.parameters("", ["*"]), **fields}
        answer = conn.execute(find_module.QUERY.sql, parameters).fetchall()
        assert answer == conn.execute(unnarrowed, parameters).fetchall(), fields
        answered += bool(answer)
    assert 0 < answered < len(combinations)


def one_package_history(folder, tags):
    """cache.db of pages: in each tag (develop-0, develop-1, ...), one package with 120 binaries of version 2.0
    and 30 of 1.0."""
    for tag in range(tags):
        binaries = [spec((tag, n), versions=["2.0" if n < 120 else "1.0"]) for n in range(150)]
        write_page(folder / "site", "big", f"develop-{tag}", binaries)
    build([folder / "site"], folder / "cache.db")
    return folder / "cache.db"


def test_a_package_is_alone_only_when_every_other_field_is_empty():
    """package_alone names each field but the package and the tag: one added to the question and not there
    would let first_tags leave out tags whose rows that field keeps (the counts it reads are unfiltered)."""
    sql = find_module.QUERY.sql
    alone = sql[sql.index("package_alone AS (") :].split("\n),", 1)[0]
    fields = [name for name in find_module.QUERY.params if name not in ("package", "tag")]
    assert fields and all(re.search(rf"\b{name} = ''|:{name}\b", alone) for name in fields), (fields, alone)


def test_a_package_alone_in_every_tag_reads_the_tags_that_fill_the_answer(tmp_path):
    """Its first 1,000 binaries, newest version first and then by tag, lie in the first 9 tags: with 12 tags or
    36, those are read, as the build counted each version's binaries per tag. Every binary of the package in
    every tag was read and sorted (the usual history's package with the most binaries: 170,680, 244 ms; then
    10 ms)."""
    dbs = {tags: one_package_history(tmp_path / str(tags), tags) for tags in (12, 36)}
    work = {tags: scan_work(db, find_module.QUERY.sql, package="big") for tags, db in dbs.items()}
    assert [len(found) for found, _ in work.values()] == [1000, 1000]
    every_tag = without(EVERY_TAG_READ)
    unnarrowed = {tags: scan_work(db, every_tag, package="big") for tags, db in dbs.items()}
    assert {tags: found for tags, (found, _) in unnarrowed.items()} == {
        tags: found for tags, (found, _) in work.items()
    }
    assert work[36][1] - work[12][1] < 0.15 * (unnarrowed[36][1] - unnarrowed[12][1]), (work, unnarrowed)


def find_work(db, spec, tag="develop"):
    """The packages find(spec) answers with, and SQLite's virtual machine steps it took."""
    found = []
    steps = steps_of(db, lambda conn: found.extend(row["package"] for row in find_module.find(conn, spec, [tag]).rows))
    return found, steps


def test_walking_down_a_dag_stops_once_the_dependency_is_found(tmp_path):
    """aaa (few binaries: read down at once) links against lib and against a chain of specs: the walk down
    each binary's DAG stops at lib, and a chain ten times as long adds no work (it did: cit ^zufi on the
    report's database 865 -> 406 ms)."""
    lib = record("lib")

    def work(length):
        chain = [record("link", seed=0)]
        for n in range(1, length):
            chain.append(record("link", seed=n, edges=[(chain[-1], LINK)]))
        apps = [record("aaa", seed=n, edges=[(lib, LINK), (chain[-1], LINK)]) for n in range(20)]
        return find_work(build_tags(tmp_path / str(length), {"develop": [lib, *chain, *apps]}), "aaa ^lib")

    (found, short), (found_again, long) = work(200), work(2_000)
    assert found == found_again == ["aaa"] * 20
    assert long < 1.2 * short, (short, long)


def test_walking_down_stops_at_the_rows_shown(tmp_path):
    """Down each binary's DAG on the rows in the order shown, until 1,000 have the dependency: more binaries of
    the package cost sorting them, not walking their DAGs. Every binary was walked before the sort (cit ^zufi
    in every tag of the report's database: 13.8 s, then 0.8 s). Here lib is at the end of a chain of 20."""
    chain = [record("lib")]
    for n in range(20):
        chain.append(record("link", seed=n, edges=[(chain[-1], LINK)]))

    def work(binaries):
        apps = [record("aaa", seed=n, edges=[(chain[-1], LINK)]) for n in range(binaries)]
        return find_work(build_tags(tmp_path / str(binaries), {"develop": [*chain, *apps]}), "aaa ^lib")

    (found, fewer), (found_again, more) = work(1_200), work(2_000)
    assert found == found_again == ["aaa"] * 1_000
    assert more < 1.2 * fewer, (fewer, more)


def test_deciding_which_way_to_walk_reads_no_more_dependents_than_the_bound(tmp_path):
    """Up the edges only when a dependency has at most 10,000 direct dependents: counting them stops past that
    many. They were all read first (^py-wysy, with 4.4 million edges in the history: 8 s), and the work grew
    with them. Here lib has 12,000 direct dependents, then 24,000: the same work."""
    lib = record("lib")
    first = [record("aaa", seed=n, edges=[(lib, LINK)]) for n in range(150)]  # the answer: read first

    def work(dependents):
        rest = [record(f"app{n % 50}", seed=n, edges=[(lib, LINK)]) for n in range(dependents - len(first))]
        return find_work(build_tags(tmp_path / str(dependents), {"develop": [lib, *first, *rest]}), "^lib")

    (found, small), (found_again, large) = work(12_000), work(24_000)
    assert found == found_again == ["aaa"] * 100
    assert large < 1.2 * small, (small, large)


def test_a_dependency_with_many_binaries_in_the_history_is_walked_up_within_the_tag(tmp_path):
    """^leaf, a package with more binaries in the history than the specs looked up in a list (10,000), and two
    dependents in the tag: found up the edges from its binaries in the tag, not by reading the DAG of every
    binary of the tag (^pudu64 on the report's database: 17 s). The tag's other binaries add no work."""
    leaf = [record("leaf", seed=n) for n in range(10_200)]
    apps = [record("app", seed=n, edges=[(leaf[n], LINK)]) for n in range(2)]
    older = {"v1": leaf[5_000:]}

    def work(others):
        unrelated = [record(f"other{n % 40}", seed=n) for n in range(others)]
        tags = {"develop": [*leaf[:5_000], *apps, *unrelated], **older}
        return find_work(build_tags(tmp_path / str(others), tags), "^leaf")

    (found, small), (found_again, large) = work(1_000), work(20_000)
    assert found == found_again == ["app", "app"]
    assert large < 1.2 * small, (small, large)


# --- The terminal -------------------------------------------------------------------------------------------


def test_the_table_reads_like_spack_buildcache_list(db):
    result = find(db, "hdf5@1.14", "+mpi", "%gcc@11", "--tag", SNAPSHOT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["hash", "spec", "tag", "stacks"]
    expected = found_json(db, "hdf5@1.14 +mpi %gcc@11", "--tag", SNAPSHOT)
    assert len(lines) == 1 + len(expected) > 1
    for line, row in zip(lines[1:], expected, strict=True):
        assert line.startswith(row["hash"] + "  " + row["spec"])
        assert line.split("  ")[-1] == ", ".join(row["stacks"])
        assert f"  {SNAPSHOT}  " in line
    assert result.stderr == ""


def test_json_has_the_fields_of_a_binary(db):
    (row,) = found_json(db, "zlib", "--tag", "old")
    assert {key: row[key] for key in ("tag", "hash", "package", "version", "compiler", "os", "platform", "target")} == {
        "tag": "old",
        "hash": "k6li6etzq5t24xniwfnayob226oq6m4l",
        "package": "zlib",
        "version": "1.2.11",
        "compiler": "gcc@7.5.0",
        "os": "ubuntu18.04",
        "platform": "linux",
        "target": "x86_64",
    }
    assert row["variants"] == ["+optimize", "+pic", "+shared"] and row["stacks"] == ["root"]
    assert row["spec"] == "zlib@1.2.11+optimize+pic+shared arch=linux-ubuntu18.04-x86_64 %gcc@7.5.0"
    assert row["install"].endswith("spack install --use-buildcache only /k6li6etzq5t24xniwfnayob226oq6m4l")


def test_csv_has_every_column_and_lists_as_json(db):
    result = find(db, "openmpi", "--tag", "old", "--format", "csv")
    (row,) = list(csv.DictReader(io.StringIO(result.stdout)))
    assert json.loads(row["variants"]) == ["~cuda", "fabrics=none", "schedulers=none"]
    assert row["hash"] == OPENMPI and row["target"] == "skylake"


def test_without_tag_every_tag_is_searched_and_tag_takes_repeated_patterns(db):
    everywhere = {row["tag"] for row in found_json(db, "bolt")}
    assert {"develop", "v0.23.1", "develop-2024-03-17"} <= everywhere
    some = {row["tag"] for row in found_json(db, "bolt", "--tag", "v0.2*", "--tag", "develop-2025-03-*")}
    assert some == {tag for tag in everywhere if tag.startswith(("v0.2", "develop-2025-03-"))}
    assert len(some) > 2


def test_host_keeps_what_runs_on_that_cpu(db):
    conn = sqlite3.connect(db)
    runnable = {row[0] for row in conn.execute("SELECT target FROM runs_on WHERE host = 'zen3'")}
    everything = found_json(db, "hdf5", "--tag", SNAPSHOT)
    on_zen3 = found_json(db, "hdf5", "--tag", SNAPSHOT, "--host", "zen3")
    assert on_zen3 == [row for row in everything if row["target"] in runnable]
    assert 0 < len(on_zen3) < len(everything)
    assert on_zen3 == found_json(db, "hdf5 target=:zen3", "--tag", SNAPSHOT)


def test_nothing_found_is_exit_1_with_the_closest_names(db):
    result = find(db, "hdf@1.14", "%gcc@13", "^zlb", "--tag", "develop-2025-04-*")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [
        "No binary matches 'hdf@1.14 %gcc@13 ^zlb'.",
        "No package here is called 'hdf': did you mean hdf5?",
        "No package here is called 'zlb': did you mean zlib?",
    ]
    result = find(db, "hdf5", "--tag", "v9*", "--host", "zen33")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[1].startswith("No host CPU here is called 'zen33': did you mean zen3 ") and lines[1].endswith("?")
    assert lines[2:] == ["No tag here is called 'v9*'."]


def test_a_dependency_asked_of_a_database_built_from_pages_says_that_it_has_none(cache_db):
    """Pages list no dependencies: ^mpich can match nothing there, and find says why rather than nothing."""
    result = find(cache_db, "hdf5", "^mpich", "--tag", "*")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == ["No binary matches 'hdf5 ^mpich'.", NO_DEPENDENCIES]


def test_a_spec_that_does_not_parse_is_exit_2_and_one_line(db):
    result = find(db, "hdf5@1.14: +mpi %")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "Error: hdf5@1.14: +mpi %: expected a compiler name after '%' (column 17)\n"


def test_a_missing_database_or_one_not_ours_is_exit_2_and_one_line(db, tmp_path):
    missing = tmp_path / "nothing.db"
    result = find(missing, "hdf5")
    assert (result.returncode, result.stderr) == (
        2,
        f"Error: {missing}: no such database (build one with: python build_db.py -o {missing})\n",
    )
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    result = find(other, "hdf5")
    assert result.returncode == 2
    assert result.stderr == f"Error: {other}: expected a database built by spack-cache-db (no such table: build_info)\n"
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.execute("CREATE TABLE build_info (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO build_info VALUES ('schema_version', '3')")
    conn.commit()
    result = find(old, "hdf5")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "expected schema version" in result.stderr and "found 3" in result.stderr
    # The version this one reads, but another digest: a view added without a new version (compiler_aliases was).
    conn.execute("UPDATE build_info SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
    conn.execute("INSERT INTO build_info VALUES ('schema_digest', 'another')")
    conn.commit()
    result = find(old, "hdf5")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "expected schema version" in result.stderr and "(digest another)" in result.stderr
    assert find(tmp_path, "hdf5").stderr == f"Error: {tmp_path}: expected a regular file, found a folder\n"


def test_more_than_the_web_shows_says_so(db):
    result = find(db, "*")  # no package: the first 100, as the question says
    assert result.returncode == 0
    assert len(result.stdout.splitlines()) == 1 + 100
    assert result.stderr == "These are the first 100 binaries: narrow the spec or --tag for the rest.\n"
    with sqlite3.connect(db) as conn:
        assert find_module.find(conn, "*").limit == 100
        assert find_module.find(conn, "zlib").limit == 1000  # with a package: 1,000
    assert find(db, "zlib").stderr == ""


def test_the_spack_cache_db_script_finds_too(db):
    script = Path(sys.executable).with_name("spack-cache-db")
    result = find(db, "zlib", "--tag", "old", "--format", "json", script=(str(script),))
    assert result.returncode == 0
    assert hashes(json.loads(result.stdout)) == ["k6li6etzq5t24xniwfnayob226oq6m4l"]


# --- The same answers from the web ----------------------------------------------------------------------------

WEB_SPECS = [
    ("hdf5@1.14 +mpi %gcc@11", SNAPSHOT),
    ("hdf5 target=x86_64_v3: ^zlib", "*"),
    ("^hwloc", "old"),
    ("^c", "new"),
    ("+mpi", "develop-2025-04-* develop-2024-*"),
    ("bolt@2 os=rhel8", "*"),
    ("", "v0.23.1"),
]


@pytest.mark.asyncio
async def test_the_web_answers_what_find_answers(db):
    ds = Datasette(immutables=[str(db)], metadata=describe.build_metadata())
    for text, tags in WEB_SPECS:
        url = "/cache/find_binaries.json?" + urllib.parse.urlencode({"spec": text, "tag": tags, "_shape": "objects"})
        response = await ds.client.get(url)
        assert response.status_code == 200, (url, response.text[:300])
        web = [
            {
                key: json.loads(value) if key in ("variants", "stacks") else value
                for key, value in row.items()
                if key != "links"
            }
            for row in response.json()["rows"]
        ]
        terminal = found_json(db, text or "*", *(argument for tag in tags.split() for argument in ("--tag", tag)))
        assert web == terminal, text
        assert web or text == "^mpi", text
