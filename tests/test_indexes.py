"""Build-cache indexes as inputs: Spack's sample indexes (Database 6, 7, 8, and 9 made from 8) and ours of
Database 5 as mirrors of both layouts, local and served over HTTP on 127.0.0.1; their binaries, stacks and dependencies as data;
downloads that fail; rebuilds that download only what changed."""

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from dump import check_full_text
from mirrors import body, edited, no_head, sample_index, serving, status, subset, write_v2, write_v3
from paths import ROOT, SEEDS, SITE
from terminal import run_in_terminal

from spack_cache_db.build import build
from spack_cache_db.cli import cli
from spack_cache_db.db.export import export
from spack_cache_db.read import fetch
from spack_cache_db.read.locations import Location
from spack_cache_db.records import InputError

LIBDWARF_M1, LIBELF_M1 = "u5uz3dcch5if4eve4sef67o2rf2lbfgh", "jr3yipyxyjulcdvckwwwjrrumis7glpa"
LIBDWARF_CORE2, LIBELF_CORE2 = "sk2gqqz4n5njmvktycnd25wq25jxiqkr", "rqh2vuf6fqwkmipzgi2wjx352mq7y7ez"
GCC_EXTERNAL, GCC_RUNTIME, WRAPPER = (
    "vd7v4ssgnoqdplgxyig3orum67n4vmhq",
    "izgzpzeljwairalfjm3k6fntbb64nt6n",
    "qeehcxyvluwnihsc2qxstmpomtxo3lrc",
)
BINARY_COLUMNS = "tag, package, version, hash, compiler, os, platform, target, variants, stacks, spec"

# What Spack prints for each sample's binaries (compiler-wrapper and gcc-runtime have no compiler edge).
SAMPLE_BINARIES = {
    "6": [
        ("zlib", "1.2.11", "t5mczux3tfqpxwmg7egp7axy2jvyulqk", "gcc@4.5.0", "core2", ["+optimize", "+pic", "+shared"])
    ],
    "7": [
        ("libdwarf", "20130729", LIBDWARF_CORE2, "gcc@10.2.1", "core2", ["build_system=generic"]),
        ("libelf", "0.8.13", LIBELF_CORE2, "gcc@10.2.1", "core2", ["build_system=generic"]),
    ],
    "8": [
        ("compiler-wrapper", "1.0", WRAPPER, "none", "m1", ["build_system=generic"]),
        ("gcc-runtime", "10.2.1", GCC_RUNTIME, "none", "m1", ["build_system=generic"]),
        ("libdwarf", "20130729", LIBDWARF_CORE2, "gcc@10.2.1", "core2", ["build_system=generic"]),
        ("libdwarf", "20130729", LIBDWARF_M1, "gcc@10.2.1", "m1", ["build_system=generic"]),
        ("libelf", "0.8.13", LIBELF_M1, "gcc@10.2.1", "m1", ["build_system=generic"]),
        ("libelf", "0.8.13", LIBELF_CORE2, "gcc@10.2.1", "core2", ["build_system=generic"]),
    ],
}


def rows(db, sql, *parameters):
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(sql, parameters)]
    finally:
        conn.close()


def binaries(db, tag=None):
    where = "WHERE tag = ?" if tag else ""
    found = rows(
        db, f"SELECT {BINARY_COLUMNS} FROM binaries {where} ORDER BY tag, package, hash", *([tag] if tag else [])
    )
    return [{**row, "variants": json.loads(row["variants"]), "stacks": json.loads(row["stacks"])} for row in found]


def expected_binaries(tag, version, stacks=("root",)):
    return [
        {
            "tag": tag,
            "package": package,
            "version": number,
            "hash": spec_hash,
            "compiler": compiler,
            "os": "debian6",
            "platform": "test",
            "target": target,
            "variants": variants,
            "stacks": list(stacks),
            "spec": f"{package}@{number}"
            + ("".join(variants) if variants[0][0] in "+~" else f" {variants[0]}")
            + f" arch=test-debian6-{target}"
            + ("" if compiler == "none" else f" %{compiler}"),
        }
        for package, number, spec_hash, compiler, target, variants in SAMPLE_BINARIES[version]
    ]


def index_edges(index_bytes):
    """Every edge of an index, read straight from its JSON: (hash, dependency hash, deptypes, virtuals)."""
    edges = set()
    for spec_hash, record in json.loads(index_bytes)["database"]["installs"].items():
        for edge in record["spec"].get("dependencies", []):
            parameters = edge.get("parameters", {})
            deptypes = parameters.get("deptypes", edge.get("type", []))
            edges.add(
                (
                    spec_hash,
                    edge["hash"],
                    json.dumps(sorted(deptypes)),
                    json.dumps(sorted(parameters.get("virtuals", []))),
                )
            )
    return edges


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory):
    """Each sample as a v2 mirror and as a v3 mirror (the v8 one gzip-compressed, as Spack may write it)."""
    root = tmp_path_factory.mktemp("mirrors")
    blobs = {}
    for version in ("6", "7", "8"):
        write_v2(root / f"v2-db{version}", sample_index(version))
        blobs[version] = write_v3(root / f"v3-db{version}", sample_index(version), "gzip" if version == "8" else "none")
    return root, blobs


@pytest.mark.parametrize("version", ["6", "7", "8"])
@pytest.mark.parametrize("layout", ["v2", "v3"])
def test_each_sample_index_gives_the_binaries_spack_prints(tmp_path, mirrors, version, layout):
    root, _ = mirrors
    db = tmp_path / "cache.db"
    build([f"develop={root / f'{layout}-db{version}'}"], db)
    assert binaries(db) == expected_binaries("develop", version)
    (layout_row,) = rows(db, "SELECT layout, database_version, mirror_url FROM indexes")
    assert layout_row == {
        "layout": layout,
        "database_version": version,
        "mirror_url": str(root / f"{layout}-db{version}"),
    }
    (mirror,) = rows(db, "SELECT mirror_url FROM tags WHERE name = 'develop'")
    assert mirror["mirror_url"] == str(root / f"{layout}-db{version}")


@pytest.mark.parametrize("version", ["7", "8"])
def test_every_edge_of_the_samples_is_kept_with_its_deptypes_and_virtuals(tmp_path, mirrors, version):
    root, _ = mirrors
    db = tmp_path / "cache.db"
    build([f"develop={root / f'v2-db{version}'}"], db)
    stored = rows(db, "SELECT hash, dependency_hash, deptypes, virtuals FROM dependencies")
    assert {tuple(row.values()) for row in stored} == index_edges(sample_index(version))


def test_the_v8_sample_edges_read_as_spack_means_them(tmp_path, mirrors):
    root, _ = mirrors
    db = tmp_path / "cache.db"
    build([f"develop={root / 'v2-db8'}"], db)
    edges = rows(
        db,
        "SELECT dependency, deptypes, virtuals, external FROM dependencies WHERE hash = ? ORDER BY dependency",
        LIBDWARF_M1,
    )
    assert edges == [
        {"dependency": "compiler-wrapper", "deptypes": '["build"]', "virtuals": "[]", "external": 0},
        {"dependency": "gcc", "deptypes": '["build"]', "virtuals": '["c", "cxx"]', "external": 1},
        {"dependency": "gcc-runtime", "deptypes": '["link"]', "virtuals": "[]", "external": 0},
        {"dependency": "libelf", "deptypes": '["build", "link"]', "virtuals": "[]", "external": 0},
    ]
    # The external gcc is a spec (a dependency target), not a binary of the tag.
    assert rows(db, "SELECT count(*) AS n FROM binaries WHERE hash = ?", GCC_EXTERNAL) == [{"n": 0}]
    assert rows(db, "SELECT external FROM specs WHERE hash = ?", GCC_EXTERNAL) == [{"external": 1}]


def test_database_9_loads_and_its_new_fields_are_ignored(tmp_path):
    def to_version_9(database):
        database["version"] = "9"
        for record in database["installs"].values():
            record["spec"]["provided_virtuals"] = ["c", "cxx"] if record["spec"]["name"] == "gcc" else []

    write_v3(tmp_path / "mirror", edited(sample_index("8"), to_version_9), database_version="9")
    build([f"develop={tmp_path / 'mirror'}"], tmp_path / "cache.db")
    assert binaries(tmp_path / "cache.db") == expected_binaries("develop", "8")


def test_a_database_5_mirror_of_spack_0_16_is_read(tmp_path):
    """Our sample of the format (specs keyed by name, a compiler on each node, dependencies as {name: {hash,
    type}}, full_hash, the version after installs) as a v2 mirror, built end to end."""
    mirror = tmp_path / "mirror"
    write_v2(mirror, sample_index("5"))
    db = tmp_path / "cache.db"
    result = CliRunner().invoke(cli, ["build", f"old={mirror}", "-o", str(db)])
    assert result.exit_code == 0, result.output
    found = rows(db, "SELECT package, hash, spec, stacks FROM binaries ORDER BY package")
    assert [(row["package"], row["spec"]) for row in found] == [
        ("cmake", "cmake@3.18.4~doc+ncurses+openssl+ownlibs arch=linux-ubuntu18.04-x86_64 %gcc@7.5.0"),
        ("hdf5", "hdf5@1.10.7~cxx~fortran+mpi+shared api=none arch=linux-ubuntu18.04-skylake %gcc@7.5.0"),
        ("openmpi", "openmpi@3.1.6~cuda fabrics=none schedulers=none arch=linux-ubuntu18.04-skylake %gcc@7.5.0"),
        ("zlib", "zlib@1.2.11+optimize+pic+shared arch=linux-ubuntu18.04-x86_64 %gcc@7.5.0"),
    ]
    assert {row["stacks"] for row in found} == {'["root"]'}
    edges = rows(db, "SELECT package, dependency, deptypes, virtuals, external FROM dependencies ORDER BY 1, 2")
    assert [tuple(edge.values()) for edge in edges] == [
        ("hdf5", "cmake", '["build"]', "[]", 0),
        ("hdf5", "openmpi", '["build", "link"]', "[]", 0),
        ("hdf5", "zlib", '["build", "link"]', "[]", 0),
        ("hwloc", "libpciaccess", '["build", "link"]', "[]", 1),
        ("openmpi", "hwloc", '["build", "link"]', "[]", 0),
        ("openmpi", "zlib", '["build", "link"]', "[]", 0),
    ]
    # hwloc is only a dependency (not in the build cache): a spec with its variants, not a binary
    (hwloc,) = rows(
        db,
        "SELECT spec FROM configuration_specs JOIN specs ON specs.configuration_id = configuration_specs.configuration_id"
        " WHERE hash = '65sq5c57d3sykzqdjjio4qciur24besm'",
    )
    assert hwloc["spec"] == (
        "hwloc@1.11.11~cairo~cuda libs=shared,static patches=4e4c2b0 arch=linux-ubuntu18.04-skylake %gcc@7.5.0"
    )
    assert rows(db, "SELECT layout, database_version FROM indexes") == [{"layout": "v2", "database_version": "5"}]


def test_a_database_5_record_holds_one_package(tmp_path):
    def two_packages(database):
        record = next(iter(database["installs"].values()))
        record["spec"]["other"] = next(iter(record["spec"].values()))

    write_v2(tmp_path / "mirror", edited(sample_index("5"), two_packages))
    result = CliRunner().invoke(cli, ["build", f"old={tmp_path / 'mirror'}", "-o", str(tmp_path / "c.db")])
    assert result.exit_code == 1
    index = tmp_path / "mirror" / "build_cache" / "index.json"
    assert result.output.splitlines()[0] == (
        f"Error: {index}: database.installs.k6li6etzq5t24xniwfnayob226oq6m4l.spec: expected one package name and its node"
    )


@pytest.mark.parametrize("version", ["4", "10", "0.9.3"])
@pytest.mark.parametrize("sample", ["5", "8"])
def test_other_database_versions_are_a_clear_error(tmp_path, version, sample):
    """Decided from the version, wherever it is in the document (the v5 sample has it after installs), and
    whatever shape its records have."""
    write_v2(tmp_path / "mirror", edited(sample_index(sample), lambda database: database.update(version=version)))
    result = CliRunner().invoke(cli, ["build", f"develop={tmp_path / 'mirror'}", "-o", str(tmp_path / "c.db")])
    assert result.exit_code == 1
    index = tmp_path / "mirror" / "build_cache" / "index.json"
    assert (
        result.output.splitlines()[0]
        == f"Error: {index}: database.version: Database version {version} is not read (5–9 are)"
    )


def test_a_blob_url_and_an_index_json_url_are_read_straight(tmp_path, mirrors):
    root, blobs = mirrors
    with serving(root) as (base, _):
        db = tmp_path / "cache.db"
        build([f"v7-blob={base}/v3-db7/{blobs['7']}", f"v8-json={base}/v2-db8/build_cache/index.json"], db)
    assert binaries(db, "v7-blob") == expected_binaries("v7-blob", "7")
    assert binaries(db, "v8-json") == expected_binaries("v8-json", "8")
    assert rows(db, "SELECT tags.name, indexes.mirror_url FROM indexes JOIN tags ON tags.id = tag_id ORDER BY 1") == [
        {"name": "v7-blob", "mirror_url": f"{base}/v3-db7"},
        {"name": "v8-json", "mirror_url": f"{base}/v2-db8"},
    ]


def listing(folder, tags):
    """A cache_spack_io_index.json in folder: {tag: [(label, relative url), ...]}."""
    path = folder / "cache_spack_io_index.json"
    path.write_text(
        json.dumps({tag: [{"label": label, "url": url} for label, url in entries] for tag, entries in tags.items()})
    )
    return path


@pytest.fixture
def stacked(tmp_path):
    """develop: a v3 root mirror of the v8 sample and two stacks (v2 and v3), as the live listing names them."""
    index = sample_index("8")
    root_blob = write_v3(tmp_path / "site" / "develop", index)
    write_v2(tmp_path / "site" / "develop" / "e4s", subset(index, [LIBDWARF_M1, LIBELF_M1]))
    stack_blob = write_v3(tmp_path / "site" / "develop" / "tools", subset(index, [WRAPPER]))
    path = listing(
        tmp_path / "site",
        {
            "develop": [
                ("root", f"develop/{root_blob}"),
                ("e4s", "develop/e4s/build_cache/index.json"),
                ("tools", f"develop/tools/{stack_blob}"),
            ],
            "v7": [("root", "v7")],
        },
    )
    write_v2(tmp_path / "site" / "v7", sample_index("7"))
    return path


def stacks_of(db):
    return {
        row["package"] + "/" + row["target"]: json.loads(row["stacks"])
        for row in rows(db, "SELECT package, target, stacks FROM binaries WHERE tag = 'develop'")
    }


def test_a_listing_gives_each_binary_the_stacks_whose_index_has_it(tmp_path, stacked):
    with serving(stacked.parent) as (base, _):
        db = tmp_path / "cache.db"
        build([f"{base}/cache_spack_io_index.json"], db)
    assert stacks_of(db) == {
        "compiler-wrapper/m1": ["root", "tools"],
        "gcc-runtime/m1": ["root"],  # the e4s index lists it only as a dependency its binaries need
        "libdwarf/core2": ["root"],
        "libdwarf/m1": ["e4s", "root"],
        "libelf/core2": ["root"],
        "libelf/m1": ["e4s", "root"],
    }
    assert binaries(db, "v7") == expected_binaries("v7", "7")
    mirrors_of = rows(
        db,
        "SELECT tag, stack, mirror_url FROM binary_stacks WHERE package = 'libelf' AND tag = 'develop' AND hash = ? ORDER BY stack",
        LIBELF_M1,
    )
    assert mirrors_of == [
        {"tag": "develop", "stack": "e4s", "mirror_url": f"{base}/develop/e4s"},
        {"tag": "develop", "stack": "root", "mirror_url": f"{base}/develop"},
    ]


def test_a_local_listing_resolves_its_relative_urls_against_itself(tmp_path, stacked):
    db = tmp_path / "cache.db"
    build([str(stacked)], db)
    assert stacks_of(db)["libelf/m1"] == ["e4s", "root"]


def test_tag_patterns_choose_the_tags_read(tmp_path, stacked):
    db = tmp_path / "cache.db"
    build([str(stacked), SITE], db, tags=["v*"])
    assert [
        row["name"] for row in rows(db, "SELECT name FROM tags WHERE id IN (SELECT tag_id FROM pages) ORDER BY name")
    ] == [
        "v0.21.2",
        "v0.22.0",
        "v0.23.0",
        "v0.23.1",
        "v7",
    ]


def test_tag_patterns_choose_the_tags_tags_yaml_declares_too(tmp_path):
    db = tmp_path / "cache.db"
    build([SITE], db, tags=["v0.23.*"])
    assert [row["name"] for row in rows(db, "SELECT name FROM tags ORDER BY name")] == ["v0.23.0", "v0.23.1"]
    build([SITE], db, tags=["v0.23.*", "v0.22.*"])  # asking for more tags declares them again
    assert [row["name"] for row in rows(db, "SELECT name FROM tags ORDER BY name")] == ["v0.22.0", "v0.23.0", "v0.23.1"]


def test_s3_urls_are_read_from_binaries_spack_io():
    assert Location.named("s3://spack-binaries/develop/blobs/sha256/ab/abc") == Location(
        "https://binaries.spack.io/develop/blobs/sha256/ab/abc", is_local=False
    )
    listing = Location.named("https://binaries.spack.io/cache_spack_io_index.json")
    assert listing.join("s3://spack-binaries/develop/x", "develop[0].url").text == "https://binaries.spack.io/develop/x"
    with pytest.raises(InputError, match="expected an s3 URL under s3://spack-binaries/"):
        Location.named("s3://other-bucket/x")


def test_an_index_wins_over_pages_of_the_same_tag_and_the_summary_says_so(tmp_path):
    write_v2(tmp_path / "develop", sample_index("7"))
    result = CliRunner().invoke(cli, ["build", SITE, str(tmp_path / "develop"), "-o", str(tmp_path / "c.db")])
    assert result.exit_code == 0, result.output
    assert "  note: 2 page(s) of develop not read: an index gives the tag, or --tag leaves it out" in result.output
    db = tmp_path / "c.db"
    assert binaries(db, "develop") == expected_binaries("develop", "7")
    pages_only = tmp_path / "pages.db"
    build([SITE], pages_only)
    others = f"SELECT {BINARY_COLUMNS} FROM binaries WHERE tag <> 'develop' ORDER BY tag, package, hash"
    assert rows(db, others) == rows(pages_only, others)


# --- Failures: one line naming the URL and what was wrong; the previous database kept byte for byte ---------


@pytest.fixture
def previous(tmp_path):
    db = tmp_path / "cache.db"
    build([SEEDS], db)
    return db, db.read_bytes()


def failing_build(previous, *arguments):
    db, before = previous
    result = CliRunner().invoke(cli, ["build", *map(str, arguments), "-o", str(db)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert db.read_bytes() == before
    assert sorted(p.name for p in db.parent.glob(".cache.db*")) == []
    error, kept = result.output.splitlines()
    assert kept == f"{db} was left as it was."
    return error


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setattr(fetch, "RETRY_PAUSE_SECONDS", 0.01)
    monkeypatch.setattr(fetch, "TIMEOUT_SECONDS", 2)


def test_a_missing_index_names_the_url(tmp_path, previous, fast_retries):
    with serving(tmp_path) as (base, _):
        error = failing_build(previous, f"develop={base}/nowhere/build_cache/index.json")
    assert error == f"Error: {base}/nowhere/build_cache/index.json: download: expected the file to exist (HTTP 404)"


def test_a_server_error_is_retried_then_named(tmp_path, previous, fast_retries):
    write_v2(tmp_path / "develop", sample_index("8"))
    with serving(tmp_path) as (base, server):
        server.faults["/develop/build_cache/index.json"] = status(503)
        error = failing_build(previous, f"{base}/develop")
    assert (
        error
        == f"Error: {base}/develop/build_cache/index.json: download: expected HTTP 200, got 503 Service Unavailable"
    )
    assert [path for _, path in server.requests].count("/develop/build_cache/index.json") == fetch.ATTEMPTS


@pytest.mark.parametrize("code", [405, 501])
def test_a_server_that_does_not_answer_head_is_asked_with_get(tmp_path, code):
    """Whether a mirror has an index is asked with HEAD; a server that answers it 405 or 501 (Python's own
    http.server without do_HEAD) failed the build. It is asked again with GET, and the mirror read."""
    write_v2(tmp_path / "develop", sample_index("8"))
    db = tmp_path / "cache.db"
    with serving(tmp_path) as (base, server):
        for path in (
            "/develop/v3/layout.json",
            "/develop/build_cache/index.json",
            "/develop/build_cache/index.json.hash",
        ):
            server.faults[path] = no_head(code)
        build([f"develop={base}/develop"], db)
    assert sqlite3.connect(db).execute("SELECT count(*) FROM binaries").fetchone()[0] > 0
    asked = [request for request in server.requests if request[1] == "/develop/v3/layout.json"]
    assert asked == [("HEAD", "/develop/v3/layout.json"), ("GET", "/develop/v3/layout.json")]


def test_a_refused_connection_is_named(tmp_path, previous, fast_retries):
    with serving(tmp_path) as (base, _):
        pass  # the port is closed again
    error = failing_build(previous, f"develop={base}/develop/build_cache/index.json")
    assert error == (  # the first thing asked for is whether the index has its companion hash
        f"Error: {base}/develop/build_cache/index.json.hash: download: expected an answer, but the connection was "
        f"refused ({fetch.ATTEMPTS} attempts)"
    )


def test_a_truncated_download_is_named(tmp_path, previous, fast_retries):
    data = sample_index("8")
    with serving(tmp_path) as (base, server):
        server.faults["/develop/index.json"] = body(data[:100], declared=len(data))
        error = failing_build(previous, f"develop={base}/develop/index.json")
    assert error.startswith(f"Error: {base}/develop/index.json: download: expected an answer, but ")
    assert error.endswith(f"({fetch.ATTEMPTS} attempts)")


def test_corrupt_json_names_the_url(tmp_path, previous):
    write_v2(tmp_path / "develop", sample_index("8")[:-40])
    error = failing_build(previous, tmp_path / "develop")
    index = tmp_path / "develop" / "build_cache" / "index.json"
    size = len(sample_index("8")) - 40
    assert error == f"Error: {index}: file: expected JSON, found {size:,} bytes that are not JSON"


def test_a_hash_given_twice_whose_first_record_is_wrong_is_named(tmp_path, previous):
    """Decoded, a repeated key keeps its last record: the wrong one, before it, is found by the repeat."""
    text = sample_index("8").decode()
    at = text.index("{", text.index('"installs"')) + 1  # the first record's place
    text = text[:at] + f'"{LIBELF_M1}": {{"spec": {{}}}}, ' + text[at:]
    write_v2(tmp_path / "develop", text.encode())
    error = failing_build(previous, tmp_path / "develop")
    index = tmp_path / "develop" / "build_cache" / "index.json"
    assert error == f"Error: {index}: database.installs.{LIBELF_M1}: expected each hash once, found it again"


def test_a_wrong_field_names_the_record(tmp_path, previous):
    def break_version(database):
        database["installs"][LIBELF_M1]["spec"]["version"] = 13

    write_v2(tmp_path / "develop", edited(sample_index("8"), break_version))
    error = failing_build(previous, tmp_path / "develop")
    index = tmp_path / "develop" / "build_cache" / "index.json"
    assert error == f"Error: {index}: database.installs.{LIBELF_M1}.spec.version: expected text, found a whole number"


def test_an_edge_to_a_hash_the_index_does_not_have_is_an_error(tmp_path, previous):
    write_v2(tmp_path / "develop", edited(sample_index("8"), lambda database: database["installs"].pop(GCC_RUNTIME)))
    error = failing_build(previous, tmp_path / "develop")
    dependent = re.search(r"database\.installs\.([a-z2-7]{32})\.spec\.dependencies\[(\d)\]\.hash: ", error)
    assert dependent and error.endswith("expected a record for it in the index")
    edges = json.loads(sample_index("8"))["database"]["installs"][dependent[1]]["spec"]["dependencies"]
    assert edges[int(dependent[2])]["hash"] == GCC_RUNTIME


def test_a_v2_checksum_mismatch_is_an_error(tmp_path, previous):
    mirror = write_v2(tmp_path / "develop", sample_index("8"))
    (mirror / "build_cache" / "index.json.hash").write_text("0" * 64)
    error = failing_build(previous, mirror)
    index = mirror / "build_cache" / "index.json"
    actual = __import__("hashlib").sha256(sample_index("8")).hexdigest()
    assert error == f"Error: {index}: checksum: expected sha256 {'0' * 64}, found {actual}"


def test_a_v3_blob_that_does_not_match_its_manifest_is_an_error(tmp_path, previous):
    blob = write_v3(tmp_path / "develop", sample_index("8"))
    (tmp_path / "develop" / blob).write_bytes(sample_index("7"))
    error = failing_build(previous, tmp_path / "develop")
    assert error.startswith(
        f"Error: {tmp_path / 'develop' / blob}: contentLength: expected {len(sample_index('8')):,} bytes"
    )


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("checksumAlgorithm", "md5", "expected sha256, found 'md5'"),
        ("checksum", "not hex", "expected a sha256 checksum in hex"),
    ],
)
def test_a_v3_manifest_s_checksum_that_is_no_sha256_names_the_field(tmp_path, previous, field, value, expected):
    write_v3(tmp_path / "develop", sample_index("8"))
    manifest = tmp_path / "develop" / "v3" / "manifests" / "index" / "index.manifest.json"
    document = json.loads(manifest.read_text())
    document["data"][0][field] = value
    manifest.write_text(json.dumps(document))
    assert failing_build(previous, tmp_path / "develop") == f"Error: {manifest}: data.{field}: {expected}"


def test_a_truncated_gzip_blob_is_an_error(tmp_path, previous):
    blob = write_v3(tmp_path / "develop", sample_index("8"), compression="gzip")
    path = tmp_path / "develop" / blob
    manifest = tmp_path / "develop" / "v3" / "manifests" / "index" / "index.manifest.json"
    shortened = path.read_bytes()[:-20]
    checksum = __import__("hashlib").sha256(shortened).hexdigest()
    document = json.loads(manifest.read_text())
    document["data"][0].update(checksum=checksum, contentLength=len(shortened))
    manifest.write_text(json.dumps(document))
    moved = tmp_path / "develop" / "blobs" / "sha256" / checksum[:2] / checksum
    moved.parent.mkdir(parents=True, exist_ok=True)
    moved.write_bytes(shortened)
    error = failing_build(previous, tmp_path / "develop")
    assert error == f"Error: {moved}: compression: expected complete gzip data (it is truncated)"


def test_a_folder_that_is_no_mirror_and_has_no_pages_is_an_error(tmp_path, previous):
    (tmp_path / "empty").mkdir()
    error = failing_build(previous, "develop=" + str(tmp_path / "empty"))
    assert error == (
        f"Error: {tmp_path / 'empty'}: layout: expected a build-cache mirror (v3/layout.json or build_cache/index.json)"
        " or an index file"
    )


def test_keep_going_skips_a_broken_stack_and_records_it(tmp_path, stacked):
    (stacked.parent / "develop" / "e4s" / "build_cache" / "index.json").write_bytes(b"{not json")
    db = tmp_path / "cache.db"
    result = CliRunner().invoke(cli, ["build", str(stacked), "-o", str(db), "--keep-going"])
    assert result.exit_code == 1 or result.exit_code == 0
    assert result.exit_code == 0, result.output
    assert "failed: " in result.output and "e4s/build_cache/index.json: checksum: expected sha256" in result.output
    problems = rows(db, "SELECT path, field, severity, tag FROM problems")
    assert problems == [
        {
            "path": str(stacked.parent / "develop" / "e4s" / "build_cache" / "index.json"),
            "field": "checksum",
            "severity": "error",
            "tag": "develop",
        }
    ]
    assert stacks_of(db)["libelf/m1"] == ["root"]
    assert binaries(db, "v7") == expected_binaries("v7", "7")


def test_keep_going_skips_a_tag_whose_root_fails(tmp_path, stacked):
    shutil.rmtree(stacked.parent / "v7")
    db = tmp_path / "cache.db"
    result = CliRunner().invoke(cli, ["build", str(stacked), "-o", str(db), "--keep-going"])
    assert result.exit_code == 0, result.output
    assert rows(db, "SELECT count(*) AS n FROM binaries WHERE tag = 'v7'") == [{"n": 0}]
    assert [row["tag"] for row in rows(db, "SELECT tag FROM problems")] == ["v7"]
    assert len(binaries(db, "develop")) == 6


# --- Rebuilds -------------------------------------------------------------------------------------------------


def test_an_unchanged_rebuild_downloads_no_index_and_writes_nothing(tmp_path, stacked):
    db = tmp_path / "cache.db"
    with serving(stacked.parent) as (base, server):
        build([f"{base}/cache_spack_io_index.json"], db)
        before, stat = db.read_bytes(), db.stat()
        server.requests.clear()
        summary = build([f"{base}/cache_spack_io_index.json"], db)
    assert summary.up_to_date
    assert db.read_bytes() == before and db.stat().st_mtime_ns == stat.st_mtime_ns and db.stat().st_ino == stat.st_ino
    # The listing, and for develop (which changes) the one hash file of its v2 stack; v3 blob URLs are content
    # addresses, and v7 is a release: it never changes.
    assert server.requests == [
        ("GET", "/cache_spack_io_index.json"),
        ("HEAD", "/develop/e4s/build_cache/index.json.hash"),
        ("GET", "/develop/e4s/build_cache/index.json.hash"),
    ]


def test_a_changed_root_is_read_again_and_an_unchanged_stack_is_not(tmp_path, stacked):
    db = tmp_path / "cache.db"
    site = stacked.parent
    build([str(stacked)], db)
    index = json.loads(sample_index("8"))
    del index["database"]["installs"][LIBDWARF_CORE2]
    root_blob = write_v3(site / "develop", json.dumps(index).encode())
    document = json.loads(stacked.read_text())
    document["develop"][0]["url"] = f"develop/{root_blob}"
    stacked.write_text(json.dumps(document))
    with serving(site) as (base, server):
        summary = build([f"{base}/cache_spack_io_index.json"], db)
        fetched = {path for method, path in server.requests if method == "GET"}
    # v7 did not change, but its mirror moved (from a folder to a URL): the database names the new one
    assert summary.index_tags_read == ["develop", "v7"] and not summary.up_to_date
    assert f"/develop/{root_blob}" in fetched
    assert "/develop/e4s/build_cache/index.json" not in fetched  # its hash did not change: its part is reused
    assert stacks_of(db) == {
        "compiler-wrapper/m1": ["root", "tools"],
        "gcc-runtime/m1": ["root"],
        "libdwarf/m1": ["e4s", "root"],
        "libelf/core2": ["root"],
        "libelf/m1": ["e4s", "root"],
    }
    fresh = tmp_path / "fresh.db"
    build([str(stacked)], fresh)
    for sql in (f"SELECT {BINARY_COLUMNS} FROM binaries ORDER BY 1, 2, 4", "SELECT * FROM dependencies ORDER BY 1, 4"):
        assert rows(db, sql) == rows(fresh, sql)


def test_a_tag_no_longer_listed_leaves_the_database(tmp_path, stacked):
    db = tmp_path / "cache.db"
    build([str(stacked)], db)
    document = json.loads(stacked.read_text())
    del document["v7"]
    stacked.write_text(json.dumps(document))
    build([str(stacked)], db)
    assert rows(db, "SELECT DISTINCT tag FROM binaries") == [{"tag": "develop"}]
    assert rows(db, "SELECT count(*) AS n FROM tags WHERE name = 'v7'") == [{"n": 0}]
    assert rows(db, "SELECT count(*) AS n FROM specs WHERE hash = ?", LIBDWARF_CORE2) == [
        {"n": 1}
    ]  # develop has it too


def test_dependencies_go_with_the_last_binary_that_needs_them(tmp_path):
    write_v2(tmp_path / "develop", sample_index("8"))
    db = tmp_path / "cache.db"
    build([f"develop={tmp_path / 'develop'}", SEEDS], db)
    build([SEEDS], db)
    assert rows(db, "SELECT count(*) AS n FROM spec_dependencies") == [{"n": 0}]
    assert rows(db, "SELECT count(*) AS n FROM specs WHERE hash = ?", GCC_EXTERNAL) == [{"n": 0}]
    assert rows(db, "PRAGMA foreign_key_check") == []


# --- How a record reads: compiler and variants by the rules cache.spack.io's pages were written with -------


def one_binary(tmp_path, version, parameters, dependencies=(), extra_records=(), **node):
    """The binaries row of a one-package index of this Database version."""
    spec_hash = "a" * 32
    spec = {
        "name": "demo",
        "version": "1.10",
        "arch": {"platform": "linux", "platform_os": "ubuntu24.04", "target": {"name": "zen3", "vendor": "AMD"}},
        "parameters": {
            **parameters,
            "cflags": [],
            "cppflags": [],
            "cxxflags": [],
            "fflags": [],
            "ldflags": [],
            "ldlibs": [],
        },
        "dependencies": list(dependencies),
        **node,
    }
    installs = {spec_hash: {"spec": spec, "ref_count": 0, "in_buildcache": True}, **dict(extra_records)}
    index = json.dumps({"database": {"version": version, "installs": installs}}).encode()
    write_v2(tmp_path / "mirror", index)
    build([f"develop={tmp_path / 'mirror'}"], tmp_path / "cache.db")
    (row,) = binaries(tmp_path / "cache.db")
    return row


def compiler_record(letter, name, version):
    spec = {
        "name": name,
        "version": version,
        "arch": {"platform": "linux", "platform_os": "ubuntu24.04", "target": "x86_64"},
        "external": {"path": "/usr"},
    }
    return letter * 32, {"spec": spec, "ref_count": 1, "in_buildcache": False}


def compiler_edge(letter, name, virtuals):
    return {"name": name, "hash": letter * 32, "parameters": {"deptypes": ["build"], "virtuals": virtuals}}


@pytest.mark.parametrize(
    "edges, compiler",
    [
        ([("b", "gcc", ["c"]), ("c", "llvm", ["fortran"])], "gcc@13.2.0"),  # c first
        ([("c", "llvm", ["fortran"]), ("b", "gcc", ["cxx"])], "gcc@13.2.0"),  # then cxx
        ([("c", "llvm", ["fortran"])], "llvm@18.1.8"),  # then fortran
        ([("b", "gcc", [])], "none"),  # a build dependency on gcc that provides no language
        ([], "none"),
    ],
)
def test_database_8_takes_the_compiler_from_the_c_cxx_or_fortran_provider(tmp_path, edges, compiler):
    versions = {"gcc": "13.2.0", "llvm": "18.1.8"}
    records = [compiler_record(letter, name, versions[name]) for letter, name, _ in edges]
    row = one_binary(tmp_path, "8", {}, [compiler_edge(*edge) for edge in edges], records)
    assert row["compiler"] == compiler


def test_older_records_take_their_compiler_attribute_or_annotation(tmp_path):
    assert (
        one_binary(tmp_path / "7", "7", {}, compiler={"name": "oneapi", "version": "2024.2.1"})["compiler"]
        == "oneapi@2024.2.1"
    )
    converted = {"original_specfile_version": 4, "compiler": "gcc@=11.4.0"}
    assert one_binary(tmp_path / "8", "8", {}, annotations=converted)["compiler"] == "gcc@11.4.0"


def test_variants_read_as_spack_prints_them_in_the_order_of_the_parameters(tmp_path):
    parameters = {
        "api": "default",
        "build_system": "cmake",
        "cuda_arch": ["90", "80", "80"],
        "cxx": False,
        "ipo": "True",
        "languages": [],
        "mpi": True,
        "patches": ["f" * 64, "0" * 64],
    }
    assert one_binary(tmp_path / "8", "8", parameters)["variants"] == [
        "api=default",
        "build_system=cmake",
        "cuda_arch:=80,90",
        "~cxx",
        "+ipo",
        "languages:=*",
        "+mpi",
        "patches:=0000000,fffffff",
    ]
    assert one_binary(tmp_path / "7", "7", parameters)["variants"] == [
        "api=default",
        "build_system=cmake",
        "cuda_arch=90,80,80",
        "~cxx",
        "+ipo",
        "languages=",
        "+mpi",
        "patches=fffffff,0000000",
    ]
    row = one_binary(tmp_path / "spec", "8", {"mpi": True, "build_system": "cmake"})
    assert row["spec"] == "demo@1.10+mpi build_system=cmake arch=linux-ubuntu24.04-zen3"


def test_a_terminal_shows_the_bytes_downloaded_and_the_tag_being_read(tmp_path, stacked):
    with serving(stacked.parent) as (base, _):
        stdout, terminal = run_in_terminal("build", f"{base}/cache_spack_io_index.json", "-o", str(tmp_path / "c.db"))
    assert "Reading indexes" in terminal and "MB downloaded" in terminal and "develop" in terminal
    assert re.search(r"0/4 +[0-9.]+ MB downloaded, \S+ \S+", terminal), terminal  # the first, while it downloads
    assert "  indexes           4  read for 2 tag(s); 0 tag(s) unchanged, 0 failed" in stdout.splitlines()
    quiet_out, quiet_terminal = run_in_terminal("build", str(stacked), "-o", str(tmp_path / "d.db"), "--quiet")
    assert (quiet_out, quiet_terminal) == ("", "")


def test_pages_written_from_indexes_build_the_same_binaries(tmp_path, stacked):
    """cache.spack.io wrote its pages from these indexes; export writes them the same way (sorted keys, meta
    derived from the specs). Built again from those pages, every binaries row is the same but for install,
    which names the mirror a binary comes from."""
    from_indexes, from_pages = tmp_path / "indexes.db", tmp_path / "pages.db"
    build([str(stacked)], from_indexes)
    export(from_indexes, tmp_path / "site")
    build([str(tmp_path / "site")], from_pages)
    every_column_but_install = f"SELECT {BINARY_COLUMNS}, version_rank, size, tag_order FROM binaries ORDER BY 1, 2, 4"
    assert rows(from_pages, every_column_but_install) == rows(from_indexes, every_column_but_install)
    assert len(rows(from_pages, every_column_but_install)) == 8


def test_a_binary_only_a_stack_has_is_listed_with_that_stack(tmp_path):
    index = sample_index("8")
    all_binaries = [h for h, r in json.loads(index)["database"]["installs"].items() if r["in_buildcache"]]
    write_v2(tmp_path / "develop", subset(index, [h for h in all_binaries if h != LIBDWARF_CORE2]))
    write_v2(tmp_path / "develop" / "hep", index)
    path = listing(tmp_path, {"develop": [("root", "develop"), ("hep", "develop/hep")]})
    build([str(path)], tmp_path / "cache.db")
    assert stacks_of(tmp_path / "cache.db")["libdwarf/core2"] == ["hep"]
    assert stacks_of(tmp_path / "cache.db")["libelf/core2"] == ["hep", "root"]
    assert rows(tmp_path / "cache.db", "SELECT dependency FROM dependencies WHERE hash = ?", LIBDWARF_CORE2) == [
        {"dependency": "libelf"}
    ]


def test_an_index_with_no_content_address_is_asked_for_with_its_http_validators(tmp_path):
    (tmp_path / "develop").mkdir()
    (tmp_path / "develop" / "index.json").write_bytes(sample_index("8"))
    db = tmp_path / "cache.db"
    with serving(tmp_path) as (base, server):
        build([f"develop={base}/develop/index.json"], db)
        (stored,) = rows(db, "SELECT layout, mirror_url, last_modified FROM indexes")
        assert stored["layout"] == "file" and stored["last_modified"]
        assert stored["mirror_url"] == f"{base}/develop"  # the folder it is in
        server.requests.clear()
        before = db.read_bytes()
        assert build([f"develop={base}/develop/index.json"], db).up_to_date  # answered 304 Not Modified
        assert db.read_bytes() == before
        (tmp_path / "develop" / "index.json").write_bytes(sample_index("7"))
        os.utime(tmp_path / "develop" / "index.json", (time.time() + 5, time.time() + 5))
        assert build([f"develop={base}/develop/index.json"], db).index_tags_read == ["develop"]
    assert binaries(db) == expected_binaries("develop", "7")


def test_a_synthetic_history_built_from_its_pages_and_from_its_indexes_has_the_same_binaries(tmp_path):
    """benchmarks/generate_corpus.py writes 100 tags of pages and the indexes behind them: Database 7 in the
    v2 layout for the older tags, Database 8 in both layouts (some stacks gzip-compressed) for 2025."""
    corpus = tmp_path / "corpus"
    generator = [sys.executable, str(ROOT / "benchmarks" / "generate_corpus.py"), str(corpus)]
    subprocess.run([*generator, "--size", "history", "--packages", "3"], check=True, capture_output=True, timeout=300)
    from_pages, from_indexes = tmp_path / "pages.db", tmp_path / "indexes.db"
    build([str(corpus / "_cache")], from_pages)
    build([str(corpus / "cache_spack_io_index.json")], from_indexes)
    every_column_but_install = f"SELECT {BINARY_COLUMNS}, version_rank, size, tag_order FROM binaries ORDER BY 1, 2, 4"
    assert rows(from_indexes, every_column_but_install) == rows(from_pages, every_column_but_install)
    assert len(rows(from_pages, "SELECT DISTINCT tag FROM binaries")) == 100
    layouts = rows(from_indexes, "SELECT DISTINCT layout, database_version FROM indexes ORDER BY 1, 2")
    assert layouts == [
        {"layout": "v2", "database_version": "7"},
        {"layout": "v2", "database_version": "8"},
        {"layout": "v3", "database_version": "8"},
    ]
    assert rows(from_indexes, "SELECT count(*) > 0 AS some FROM spec_dependencies") == [{"some": 1}]


@pytest.mark.parametrize("incremental", [False, True])
def test_keep_going_removes_what_a_failing_tag_wrote_before_it_failed(tmp_path, monkeypatch, incremental):
    monkeypatch.setattr("spack_cache_db.build.FLUSH_EVERY", 1)  # every document goes to the writer at once

    def other_facts(database):  # the same hash as in tag a, another version: the last package of tag b
        database["installs"][LIBELF_CORE2]["spec"]["version"] = "0.8.14"

    write_v2(tmp_path / "a", sample_index("8"))
    write_v2(tmp_path / "b", edited(sample_index("8"), other_facts))
    db = tmp_path / "cache.db"
    if incremental:
        build([SEEDS], db)
    summary = build([SEEDS, f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}"], db, keep_going=True)
    assert summary.failed_tags == ["b"]
    assert [str(error).split(": ", 1)[1] for error in summary.index_failures] == [
        f"database.installs.{LIBELF_CORE2}: expected the same facts wherever hash {LIBELF_CORE2} appears, but "
        f"{tmp_path / 'a' / 'build_cache' / 'index.json'} lists it as libelf@0.8.13 build_system=generic "
        "arch=test-debian6-core2 %gcc@10.2.1 and this input as libelf@0.8.14 build_system=generic "
        "arch=test-debian6-core2 %gcc@10.2.1"
    ]
    assert rows(db, "SELECT DISTINCT tag FROM binaries WHERE tag IN ('a', 'b')") == [{"tag": "a"}]
    assert binaries(db, "a") == expected_binaries("a", "8")
    assert rows(db, "SELECT count(*) AS n FROM versions WHERE version = '0.8.14'") == [{"n": 0}]
    assert rows(db, "PRAGMA foreign_key_check") == []
    conn = sqlite3.connect(db)
    check_full_text(conn)
    assert conn.execute("SELECT count(*) FROM listings_fts WHERE listings_fts MATCH 'libelf'").fetchone() == (2,)


def hostile_index(tmp_path, spec_json):
    """An index whose one record's spec is this raw JSON text."""
    text = '{"database": {"version": "8", "installs": {"' + "a" * 32 + '": {"spec": ' + spec_json
    text += ', "ref_count": 0, "in_buildcache": true}}}}'
    mirror = tmp_path / "develop"
    write_v2(mirror, text.encode())
    return mirror, mirror / "build_cache" / "index.json"


ARCH = '{"platform": "linux", "platform_os": "ubuntu24.04", "target": "zen3"}'


@pytest.mark.parametrize(
    "spec_json, field, expected",
    [
        (  # a variant value with a line break: it could not be written back as a page
            '{"name": "demo", "version": "1.0", "arch": ' + ARCH + ', "parameters": {"api": "a\\nb"}}',
            f"database.installs.{'a' * 32}.spec.parameters",
            "expected text without control characters or line breaks, found 'api=a\\nb'",
        ),
        (  # a version of thousands of digits is a number, not text
            '{"name": "demo", "version": ' + "9" * 5000 + ', "arch": ' + ARCH + "}",
            f"database.installs.{'a' * 32}.spec.version",
            "expected a value, found a number too large to read",
        ),
        (  # arch nested 100,000 deep
            '{"name": "demo", "version": "1.0", "arch": ' + "[" * 100000 + "]" * 100000 + "}",
            "file",
            "expected JSON nested less deep than this",
        ),
        (  # a package name with a trailing newline
            '{"name": "demo\\n", "version": "1.0", "arch": ' + ARCH + "}",
            f"database.installs.{'a' * 32}.spec.name",
            "expected a package name (letters, digits, '.', '_', '+', '-'), found 'demo\\n'",
        ),
        (  # a compiler annotation with a control character
            '{"name": "demo", "version": "1.0", "arch": ' + ARCH + ', "annotations": '
            '{"original_specfile_version": 4, "compiler": "gcc@=13\\u0007"}}',
            f"database.installs.{'a' * 32}.spec.compiler",
            "expected name@version, found 'gcc@=13\\x07'",
        ),
    ],
    ids=["line break in a variant", "huge number as version", "deep nesting", "newline in a name", "bell in compiler"],
)
def test_hostile_index_values_are_one_line_errors(tmp_path, previous, spec_json, field, expected):
    mirror, index = hostile_index(tmp_path, spec_json)
    error = failing_build(previous, f"develop={mirror}")
    assert error == f"Error: {index}: {field}: {expected}"


def test_a_lone_surrogate_in_an_index_is_a_one_line_error(tmp_path, previous):
    mirror, index = hostile_index(tmp_path, '{"name": "demo\\ud800", "version": "1.0", "arch": ' + ARCH + "}")
    error = failing_build(previous, f"develop={mirror}")
    assert error.startswith(f"Error: {index}: file: expected JSON, found ")
