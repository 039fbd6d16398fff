"""What a binary needs and what differs between two: the terminal (build_db.py deps, dependents and diff, run
as subprocesses) and the web (the pages' JSON) give the same answers, checked whole on Spack's sample
indexes; the flat list is the dependency_tree question's; the largest tree costs what it holds."""

import base64
import hashlib
import json
import sqlite3
import subprocess
import sys
import urllib.parse

import pytest
from datasette.app import Datasette
from mirrors import write_v2
from paths import ROOT
from test_indexes import GCC_EXTERNAL, GCC_RUNTIME, LIBDWARF_CORE2, LIBDWARF_M1, LIBELF_CORE2, LIBELF_M1, WRAPPER

from spack_cache_db.build import build
from spack_cache_db.db.schema import NO_DEPENDENCIES
from spack_cache_db.query import dependencies, lookup

LIBDWARF = "libdwarf@20130729 build_system=generic arch=test-debian6-m1 %gcc@10.2.1"
LIBELF = "libelf@0.8.13 build_system=generic arch=test-debian6-m1 %gcc@10.2.1"
GCC_RUNTIME_SPEC = "gcc-runtime@10.2.1 build_system=generic arch=test-debian6-m1"
WRAPPER_SPEC = "compiler-wrapper@1.0 build_system=generic arch=test-debian6-m1"
GCC_SPEC = "gcc@10.2.1 build_system=generic languages:=c,c++,fortran arch=test-debian6-aarch64"


def spec(spec_hash, package, version, text, status, depth, deptypes, virtuals, dependents, build_only=False):
    return {
        "hash": spec_hash,
        "package": package,
        "version": version,
        "spec": text,
        "status": status,
        "depth": depth,
        "deptypes": deptypes,
        "virtuals": virtuals,
        "dependents": dependents,
        "build_only": build_only,
    }


def line(depth, spec_hash, deptypes=(), virtuals=(), repeat=None):
    return {"depth": depth, "hash": spec_hash, "deptypes": list(deptypes), "virtuals": list(virtuals), "repeat": repeat}


def install(index_db, tag, spec_hash):
    mirror = index_db.parent / ("v8" if tag == "develop" else "v7")
    return f"spack mirror add {tag} {mirror}\nspack buildcache keys --install --trust\nspack install --use-buildcache only /{spec_hash}"


def expected_tree(index_db, build_deps):
    """libdwarf (m1) in develop: gcc-runtime is shared with libelf; compiler-wrapper and the external gcc are
    build-only dependencies, of libdwarf, libelf and (gcc) gcc-runtime."""
    root = spec(LIBDWARF_M1, "libdwarf", "20130729", LIBDWARF, "in cache", 0, [], [], [])
    runtime = spec(
        GCC_RUNTIME, "gcc-runtime", "10.2.1", GCC_RUNTIME_SPEC, "in cache", 1, ["link"], [], [LIBDWARF_M1, LIBELF_M1]
    )
    libelf = spec(LIBELF_M1, "libelf", "0.8.13", LIBELF, "in cache", 1, ["build", "link"], [], [LIBDWARF_M1])
    common = {"hash": LIBDWARF_M1, "package": "libdwarf", "spec": LIBDWARF, "tag": "develop"}
    common["install"] = install(index_db, "develop", LIBDWARF_M1)
    if not build_deps:
        return {
            **common,
            "build": False,
            "counts": {
                "direct": 2,
                "transitive": 2,
                "in_cache": 2,
                "not_in_cache": 0,
                "externals": 0,
                "build_only": 0,
                "build_only_hidden": 2,
            },
            "specs": [root, runtime, libelf],
            "tree": [
                line(0, LIBDWARF_M1),
                line(1, GCC_RUNTIME, ["link"]),
                line(1, LIBELF_M1, ["build", "link"]),
                line(2, GCC_RUNTIME, ["link"], repeat="above"),
            ],
        }
    wrapper = spec(
        WRAPPER, "compiler-wrapper", "1.0", WRAPPER_SPEC, "in cache", 1, ["build"], [], [LIBDWARF_M1, LIBELF_M1], True
    )
    gcc = spec(
        GCC_EXTERNAL,
        "gcc",
        "10.2.1",
        GCC_SPEC,
        "external",
        1,
        ["build"],
        ["c", "cxx"],
        [GCC_RUNTIME, LIBDWARF_M1, LIBELF_M1],
        True,
    )
    return {
        **common,
        "build": True,
        "counts": {
            "direct": 4,
            "transitive": 4,
            "in_cache": 3,
            "not_in_cache": 0,
            "externals": 1,
            "build_only": 2,
            "build_only_hidden": 0,
        },
        "specs": [root, wrapper, gcc, runtime, libelf],
        "tree": [
            line(0, LIBDWARF_M1),
            line(1, WRAPPER, ["build"]),
            line(1, GCC_EXTERNAL, ["build"], ["c", "cxx"]),
            line(1, GCC_RUNTIME, ["link"]),
            line(2, GCC_EXTERNAL, ["build"], repeat="above"),
            line(1, LIBELF_M1, ["build", "link"]),
            line(2, WRAPPER, ["build"], repeat="above"),
            line(2, GCC_EXTERNAL, ["build"], ["c"], repeat="above"),
            line(2, GCC_RUNTIME, ["link"], repeat="above"),
        ],
    }


def terminal(*args, db=None):
    """build_db.py ARGS as a person runs it: (exit status, stdout, stderr)."""
    command = [sys.executable, str(ROOT / "build_db.py"), *args, *(["--db", str(db)] if db else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


async def web_json(db_path, path, **params):
    ds = Datasette(immutables=[str(db_path)])
    await ds.invoke_startup()
    query = urllib.parse.urlencode(params, doseq=True)
    response = await ds.client.get(f"/{db_path.stem}/{path}?{query}")
    return response.status_code, response.json()


@pytest.mark.asyncio
@pytest.mark.parametrize("build_deps", [False, True])
async def test_the_tree_is_the_whole_answer_from_the_web_and_the_terminal(index_db, build_deps):
    expected = expected_tree(index_db, build_deps)
    toggle = {"build": "1"} if build_deps else {}
    assert await web_json(index_db, "-/dependencies.json", hash=LIBDWARF_M1[:6], **toggle) == (200, expected)
    status, out, err = terminal("deps", LIBDWARF_M1[:6], "--format", "json", *["--build"] * build_deps, db=index_db)
    assert (status, json.loads(out), err) == (0, expected, "")


@pytest.mark.asyncio
async def test_in_a_tag_that_does_not_list_them_nothing_is_in_the_cache(index_db):
    status, tree = await web_json(index_db, "-/dependencies.json", hash=LIBDWARF_M1, tag="v0.23.0", build="1")
    assert status == 200 and tree["tag"] == "v0.23.0" and tree["install"] is None
    assert {item["hash"]: item["status"] for item in tree["specs"]} == {
        LIBDWARF_M1: "not in cache",
        WRAPPER: "not in cache",
        GCC_EXTERNAL: "external",
        GCC_RUNTIME: "not in cache",
        LIBELF_M1: "not in cache",
    }
    status, tree = await web_json(index_db, "-/dependencies.json", hash=LIBDWARF_CORE2)
    assert (tree["tag"], [item["hash"] for item in tree["specs"]]) == ("develop", [LIBDWARF_CORE2, LIBELF_CORE2])


def test_the_terminal_lists_each_spec_once_or_nests_them(index_db):
    status, out, err = terminal("deps", "/" + LIBDWARF_M1, db=index_db)
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        f"{LIBDWARF} /{LIBDWARF_M1} (in develop)",
        "2 direct, 2 in all: 2 in the build cache, 0 external, 0 not in it; 2 build-only not shown (--build shows them)",
        f"[+]  {LIBDWARF_M1[:7]}  {LIBDWARF}",
        f"[+]  {GCC_RUNTIME[:7]}  {GCC_RUNTIME_SPEC}  [link]",
        f"[+]  {LIBELF_M1[:7]}  {LIBELF}  [build, link]",
    ]
    status, out, _ = terminal("deps", LIBDWARF_M1[:8], "--tree", "--build", "--tag", "develop", db=index_db)
    assert status == 0
    assert out.splitlines()[2:] == [
        f"[+]  {LIBDWARF_M1[:7]}  {LIBDWARF}",
        f"[+]  {WRAPPER[:7]}      ^{WRAPPER_SPEC}  [build]  (only to build)",
        f"[e]  {GCC_EXTERNAL[:7]}      ^{GCC_SPEC}  [build] provides c, cxx  (only to build)",
        f"[+]  {GCC_RUNTIME[:7]}      ^{GCC_RUNTIME_SPEC}  [link]",
        f"[e]  {GCC_EXTERNAL[:7]}          ^{GCC_SPEC}  [build]  (only to build)  (shown above)",
        f"[+]  {LIBELF_M1[:7]}      ^{LIBELF}  [build, link]",
        f"[+]  {WRAPPER[:7]}          ^{WRAPPER_SPEC}  [build]  (only to build)  (shown above)",
        f"[e]  {GCC_EXTERNAL[:7]}          ^{GCC_SPEC}  [build] provides c  (only to build)  (shown above)",
        f"[+]  {GCC_RUNTIME[:7]}          ^{GCC_RUNTIME_SPEC}  [link]  (shown above)",
    ]


@pytest.mark.parametrize(
    "args, status, message",
    [
        (
            ["deps", "u5u"],
            2,
            "Error: hash: expected 4 to 32 characters of Spack's base32 alphabet (a-z, 2-7), found 'u5u'",
        ),
        (
            ["deps", "u5uz-"],
            2,
            "Error: hash: expected 4 to 32 characters of Spack's base32 alphabet (a-z, 2-7), found 'u5uz-'",
        ),
        (["deps", "aaaa"], 1, "Error: hash: no spec's hash starts with 'aaaa'"),
        (["deps", "u5uz", "--tag", "develp"], 1, "Error: tag: no tag here is called 'develp': did you mean develop?"),
        (
            ["dependents", "libel"],
            1,
            "Error: package: no package here is called 'libel', and no hash starts with it: did you mean libelf?",
        ),
        (["dependents", "/aaaa"], 1, "Error: hash: no spec's hash starts with 'aaaa'"),
        (
            ["diff", "u5uz", "0000"],
            2,
            "Error: hash: expected 4 to 32 characters of Spack's base32 alphabet (a-z, 2-7), found '0000'",
        ),
    ],
)
def test_a_question_that_cannot_be_answered_is_one_line(index_db, args, status, message):
    assert terminal(*args, db=index_db) == (status, "", message + "\n")


def test_a_database_built_from_pages_says_where_dependencies_come_from(cache_db):
    spec_hash = sqlite3.connect(cache_db).execute("SELECT hash FROM specs LIMIT 1").fetchone()[0]
    assert terminal("deps", spec_hash, db=cache_db) == (1, "", f"Error: {NO_DEPENDENCIES}\n")
    assert terminal("dependents", "bolt", db=cache_db) == (1, "", f"Error: {NO_DEPENDENCIES}\n")


def test_a_file_that_is_not_our_database_is_one_line(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("not a database")
    assert terminal("deps", "abcd", db=path) == (
        2,
        "",
        f"Error: {path}: expected a database built by spack-cache-db (file is not a database)\n",
    )
    status, _, err = terminal("deps", "abcd", db=tmp_path / "missing.db")
    assert status == 2 and "does not exist" in err


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "target, params",
    [
        ("libelf", {"package": "libelf"}),
        ("gcc-runtime", {"package": "gcc-runtime"}),
        ("/" + LIBELF_M1[:5], {"hash": LIBELF_M1}),
    ],
)
async def test_dependents_from_the_terminal_is_the_dependents_questions_answer(index_db, target, params):
    _, rows = await web_json(index_db, "dependents.json", _shape="objects", **params)
    assert rows["rows"]
    status, out, err = terminal("dependents", target, "--format", "json", db=index_db)
    assert (status, json.loads(out), err) == (0, rows["rows"], "")
    status, out, _ = terminal("dependents", target, db=index_db)
    assert out.splitlines() == [
        f"{row['hash'][:7]}  {row['spec']}  ({'directly' if row['directly'] == 'yes' else 'through others'}; root)"
        for row in rows["rows"]
    ]


def test_nothing_links_against_a_build_only_dependency(index_db):
    assert terminal("dependents", "compiler-wrapper", db=index_db) == (
        1,
        "",
        "No binary of the default tag links against compiler-wrapper.\n",
    )


@pytest.mark.asyncio
async def test_two_specs_compared_from_the_web_and_the_terminal(index_db):
    status, compared = await web_json(index_db, "-/diff.json", hash=[LIBDWARF_M1[:5], LIBDWARF_CORE2[:5]])
    assert status == 200
    assert [field["field"] for field in compared["fields"] if field["differs"]] == ["target"]
    assert compared["variants"] == {"added": [], "removed": [], "changed": [], "same": ["build_system=generic"]}
    found = compared["dependencies"]
    assert [d["package"] for d in found["removed"]] == ["compiler-wrapper", "gcc", "gcc-runtime"]
    assert found["added"] == [] and found["same"] == []
    assert found["changed"] == [
        {
            "package": "libelf",
            "a": {"package": "libelf", "version": "0.8.13", "hash": LIBELF_M1, "deptypes": ["build", "link"]},
            "b": {"package": "libelf", "version": "0.8.13", "hash": LIBELF_CORE2, "deptypes": ["build", "link"]},
            "what": ["hash"],
        }
    ]
    assert compared["tags"] == {"only_a": [], "only_b": ["v0.23.0"], "both": ["develop"]}
    assert compared["stacks"] == {"only_a": [], "only_b": [], "both": ["root"]}
    status, out, err = terminal("diff", LIBDWARF_M1[:5], LIBDWARF_CORE2[:5], "--format", "json", db=index_db)
    assert (status, json.loads(out), err) == (0, compared, "")
    status, out, _ = terminal("diff", LIBDWARF_M1[:5], LIBDWARF_CORE2[:5], db=index_db)
    assert "target: m1 -> core2" in out.splitlines()
    assert (
        f"dependency changed (hash): libelf@0.8.13 /{LIBELF_M1[:7]} [build, link] -> libelf@0.8.13 /{LIBELF_CORE2[:7]} [build, link]"
        in out
    )


@pytest.mark.asyncio
async def test_the_flat_list_is_what_the_dependency_tree_question_lists(index_db):
    """For every spec and every tag: the same specs, the same in the cache or not."""
    conn = lookup.open_database(index_db)
    said = {"yes": "in cache", "no": "not in cache", "no: an external, installed outside Spack": "external"}
    pairs = conn.execute("SELECT specs.hash, tags.name FROM specs CROSS JOIN tags").fetchall()
    for spec_hash, tag in pairs:
        _, answer = await web_json(index_db, "dependency_tree.json", _shape="objects", hash=spec_hash, tag=tag)
        tree = dependencies.dependency_tree(conn, spec_hash, tag)
        assert {(item["hash"], item["status"]) for item in tree.as_json()["specs"]} == {
            (row["hash"], said[row["in_cache"]]) for row in answer["rows"]
        }, (spec_hash, tag)
    assert len(pairs) == 14


def dag_hash(n):
    return base64.b32encode(hashlib.sha256(str(n).encode()).digest()).decode()[:32].lower()


def dag_index(size, fan):
    """A Database 8 index of size specs, each depending on the fan before it (link, or build only for one
    edge in three): a DAG with as many paths as Fibonacci numbers, a tree of astronomical size if nested
    naively."""
    installs = {}
    for n in range(size):
        edges = [
            {
                "name": f"p{m}",
                "hash": dag_hash(m),
                "parameters": {"deptypes": ["build"] if (n + m) % 3 == 0 else ["build", "link"], "virtuals": []},
            }
            for m in range(max(0, n - fan), n)
        ]
        node = {
            "name": f"p{n}",
            "version": "1.0",
            "arch": {"platform": "linux", "platform_os": "ubuntu24.04", "target": {"name": "x86_64_v3"}},
            "parameters": {"build_system": "generic"},
            "dependencies": edges,
            "hash": dag_hash(n),
        }
        installs[dag_hash(n)] = {"spec": node, "ref_count": 0, "in_buildcache": True}
    return json.dumps({"database": {"version": "8", "installs": installs}}).encode()


@pytest.fixture(scope="module")
def dags(tmp_path_factory):
    """{size: cache.db} of DAGs of 1,000 and 2,000 specs, 12 edges each."""
    folder = tmp_path_factory.mktemp("dags")
    built = {}
    for size in (1000, 2000):
        write_v2(folder / f"mirror{size}", dag_index(size, 12))
        built[size] = folder / f"{size}.db"
        build([f"develop={folder / f'mirror{size}'}"], built[size])
    return built


def work(db, size, build_deps):
    """(the tree, SQLite's virtual machine steps it took) of the DAG's last spec."""
    conn = lookup.open_database(db)
    steps = []
    conn.set_progress_handler(lambda: steps.append(1), 100)
    tree = dependencies.dependency_tree(conn, dag_hash(size - 1), build=build_deps)
    return tree, len(steps) * 100


@pytest.mark.parametrize("build_deps", [False, True])
def test_the_largest_tree_costs_what_it_holds(dags, build_deps):
    answers = {size: work(db, size, build_deps) for size, db in dags.items()}
    for size, (tree, steps) in answers.items():
        conn = sqlite3.connect(dags[size])
        kinds = (
            "" if build_deps else "JOIN dependency_kinds ON dependency_kinds.id = kind_id WHERE deptypes LIKE '%link%'"
        )
        edges = conn.execute(f"SELECT count(*) FROM spec_dependencies {kinds}").fetchone()[0]
        assert len(tree.specs) == size  # every spec once (a link path reaches each)
        assert len(tree.lines) == 1 + edges  # one line per edge: a shared subtree is shown once
        assert sum(1 for line in tree.lines if not line.repeat) == size
        assert steps < 200 * (size + edges), (size, steps)
    (small, small_steps), (large, large_steps) = answers[1000], answers[2000]
    assert large_steps < 2.5 * small_steps * len(large.lines) / len(small.lines)


@pytest.mark.asyncio
async def test_an_ambiguous_hash_prefix_names_the_specs_it_could_be(dags):
    conn = sqlite3.connect(dags[2000])
    prefix, first, second = conn.execute(
        "SELECT substr(hash, 1, 4), min(hash), max(hash) FROM specs GROUP BY 1 HAVING count(*) = 2 ORDER BY 1 LIMIT 1"
    ).fetchone()
    status, out, err = terminal("deps", prefix, db=dags[2000])
    assert (status, out) == (1, "")
    assert err.splitlines()[0] == f"Error: hash: {prefix!r} is the start of 2 hashes: give more characters"
    assert [line.split()[0] for line in err.splitlines()[1:]] == [f"/{first}", f"/{second}"]
    assert await web_json(dags[2000], "-/dependencies.json", hash=prefix) == (
        404,
        {"error": f"hash: {prefix!r} is the start of 2 hashes: give more characters"},
    )


@pytest.mark.asyncio
async def test_a_spec_that_is_only_a_dependency_is_said_to_be_one_where_the_app_links_to_it(index_db):
    """The diff page links a hash to hash_lookup and the package page links a dependency to its package: for an
    external gcc, which no tag lists as a binary, both pages say what it is rather than that nothing matches."""
    status, looked_up = await web_json(index_db, "hash_lookup.json", hash=GCC_EXTERNAL[:7])
    assert (status, looked_up["rows"]) == (200, [])
    (said,) = looked_up["messages"]
    assert said.startswith(f"No binary's hash starts with “{GCC_EXTERNAL[:7]}”. gcc@")
    assert said.endswith(
        f" /{GCC_EXTERNAL[:7]} is only a dependency of binaries (an external, or a compiler they were built with)."
    )
    _, package = await web_json(index_db, "package.json", package="gcc")
    assert package["messages"] == [
        "gcc has no binaries here: it is only a dependency of binaries (an external, or a compiler they were built with)."
    ]
    ds = Datasette(immutables=[str(index_db)])
    await ds.invoke_startup()
    page = (await ds.client.get(f"/{index_db.stem}/hash_lookup?hash={GCC_EXTERNAL[:7]}")).text
    assert f'<a href="/{index_db.stem}/-/dependencies?hash={GCC_EXTERNAL}">gcc@' in page


@pytest.mark.asyncio
async def test_dependents_of_a_binary_nothing_links_against_does_not_say_that_its_hash_is_not_here(index_db):
    conn = sqlite3.connect(index_db)
    (spec_hash,) = conn.execute(
        "SELECT hash FROM binaries WHERE tag = 'develop' AND NOT EXISTS"
        " (SELECT 1 FROM spec_dependencies JOIN specs ON specs.id = spec_dependencies.dependency_id"
        "  WHERE specs.hash = binaries.hash) LIMIT 1"
    ).fetchone()
    status, answer = await web_json(index_db, "dependents.json", hash=spec_hash[:7], tag="develop")
    assert (status, answer["rows"]) == (200, [])
    assert answer["messages"] == ["No binaries match all of these fields: leave one empty to see more."]
