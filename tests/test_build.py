import contextlib
import json
import sqlite3
import sys
import threading
from pathlib import Path

import pytest
from dump import every_row
from pagemaker import meta_for, spack_hash, spec, write_page
from paths import SEEDS, SITE
from spec_strings import spec_string

from spack_cache_db import normalise
from spack_cache_db.build import BuildError, build, counts
from spack_cache_db.db import load, maintenance, schema, writer
from spack_cache_db.db.connection import open_for_build
from spack_cache_db.db.load import Loader
from spack_cache_db.db.schema import ROWS, SCHEMA_VERSION, VIEW_COUNTS, VIEW_ROWS_OF, create_schema
from spack_cache_db.db.writer import MESSAGES_AHEAD
from spack_cache_db.read.pages import SourceFile, page_document, read_page
from spack_cache_db.records import Configurations, InputError


def rows(db, sql, params=()):
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(sql, params)]
    finally:
        conn.close()


@pytest.fixture
def hdf5_site(tmp_path):
    site = tmp_path / "site"
    write_page(
        site,
        "hdf5",
        "develop",
        [
            spec(1, versions=["1.14.6"], variants=["api=default", "build_system=cmake", "~cxx", "+mpi"]),
            spec(
                2,
                versions=["1.8.23"],
                compiler="gcc@11.4.0",
                stacks=["root", "tutorial"],
                target="neoverse_v2",
                os="ubuntu22.04",
                variants=["build_system=cmake", "~mpi", "patches:=db4173c,de0de41"],
            ),
            spec(3, versions=["1.12.3"], compiler="none", variants=[]),
        ],
    )
    write_page(
        site,
        "hdf5",
        "v0.23.1",
        [
            spec(
                1,
                versions=["1.14.6"],
                variants=["api=default", "build_system=cmake", "~cxx", "+mpi"],
                stacks=["root"],
                compiler="gcc@=13.2.0",
            )
        ],
    )
    return site


def test_what_the_build_sorts_after_the_writer_has_finished_sorts_on_every_core(hdf5_site, tmp_path, monkeypatch):
    """The writer process's core is idle once it has finished: the indexes made after the load (a full build)
    and the counts (every build) may sort in SQLite's helper threads on it, as many as the cores but one."""
    with contextlib.closing(sqlite3.connect(":memory:")) as probe:
        if probe.execute("PRAGMA threads = 3").fetchone()[0] != 3:
            pytest.skip("this SQLite sorts in one thread only")
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 2, 5, 7}, raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    seen = []

    def noting_threads(step):
        def noted(conn, *args, **kwargs):
            seen.append((step.__name__, conn.execute("PRAGMA threads").fetchone()[0]))
            return step(conn, *args, **kwargs)

        return noted

    monkeypatch.setattr(schema, "create_indexes_after_load", noting_threads(schema.create_indexes_after_load))
    monkeypatch.setattr(maintenance, "refresh_counts", noting_threads(maintenance.refresh_counts))
    db = tmp_path / "cache.db"
    build([str(hdf5_site)], db)
    write_page(hdf5_site, "hdf5", "v0.23.1", [spec(4, versions=["1.14.5"], stacks=["root"])])
    build([str(hdf5_site)], db)
    assert seen == [("create_indexes_after_load", 3), ("refresh_counts", 3), ("refresh_counts", 3)]


def test_a_full_build_fills_its_full_text_indexes_unmerged_merges_them_once_and_leaves_them_merging(
    hdf5_site, tmp_path, monkeypatch
):
    """FTS5 merges an index's segments as rows are added (automerge). A full build's indexes start empty: they are
    filled with merging off and merged in one pass ('optimize'); merging is on again for the builds that add to
    them, which add a few rows each and leave merging as it is."""
    statements = []

    def traced(*args, **kwargs):
        conn = open_for_build(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr("spack_cache_db.build.open_for_build", traced)
    db = tmp_path / "cache.db"
    build([str(hdf5_site)], db)
    for index in schema.FULL_TEXT:
        filled = next(n for n, sql in enumerate(statements) if sql.startswith(f"INSERT INTO {index} (rowid"))
        commands = [sql for sql in statements if sql.startswith(f"INSERT INTO {index} ({index}")]
        assert commands == [
            f"INSERT INTO {index} ({index}, rank) VALUES ('automerge', 0)",
            f"INSERT INTO {index} ({index}) VALUES ('optimize')",
            f"INSERT INTO {index} ({index}, rank) VALUES ('automerge', {maintenance.FTS5_AUTOMERGE})",
        ]
        assert statements.index(commands[0]) < filled < statements.index(commands[1])
        assert rows(db, f"SELECT v FROM {index}_config WHERE k = 'automerge'") == [{"v": maintenance.FTS5_AUTOMERGE}]
    statements.clear()
    write_page(hdf5_site, "hdf5", "v0.23.1", [spec(4, versions=["1.14.5"], stacks=["root"])])
    build([str(hdf5_site)], db)
    assert any(sql.startswith("INSERT INTO listings_fts (rowid") for sql in statements)
    assert not [sql for sql in statements if "'automerge'" in sql or "'optimize'" in sql]


def test_binaries_view_gives_whole_rows(hdf5_site, tmp_path):
    db = tmp_path / "cache.db"
    build([str(hdf5_site)], db)
    found = rows(db, "SELECT * FROM binaries ORDER BY tag_order, version_rank DESC")
    install = (
        "spack mirror add develop https://binaries.spack.io/develop\n"
        "spack buildcache keys --install --trust\n"
        f"spack install --use-buildcache only /{spack_hash(1)}"
    )
    assert found[0] == {
        "tag": "develop",
        "package": "hdf5",
        "version": "1.14.6",
        "version_rank": 3,
        "hash": spack_hash(1),
        "compiler": "gcc@13.2.0",
        "os": "ubuntu24.04",
        "platform": "linux",
        "target": "x86_64_v3",
        "variants": '["api=default", "build_system=cmake", "~cxx", "+mpi"]',
        "stacks": '["e4s", "root"]',
        "spec": "hdf5@1.14.6~cxx+mpi api=default build_system=cmake arch=linux-ubuntu24.04-x86_64_v3 %gcc@13.2.0",
        "install": install,
        "size": None,
        "tag_order": 1,
        "listing_id": found[0]["listing_id"],
    }
    assert [(r["tag"], r["version"], r["version_rank"], r["stacks"]) for r in found] == [
        ("develop", "1.14.6", 3, '["e4s", "root"]'),
        ("develop", "1.12.3", 2, '["e4s", "root"]'),
        ("develop", "1.8.23", 1, '["root", "tutorial"]'),
        ("v0.23.1", "1.14.6", 3, '["root"]'),
    ]
    assert found[2]["spec"] == (
        "hdf5@1.8.23~mpi build_system=cmake patches:=db4173c,de0de41 arch=linux-ubuntu22.04-neoverse_v2 %gcc@11.4.0"
    )
    assert found[1]["spec"] == "hdf5@1.12.3 arch=linux-ubuntu24.04-x86_64_v3"


def test_same_hash_in_two_tags_is_one_spec_with_membership_per_tag(hdf5_site, tmp_path):
    db = tmp_path / "cache.db"
    build([str(hdf5_site)], db)
    assert rows(db, "SELECT count(*) AS n FROM specs WHERE hash = ?", (spack_hash(1),)) == [{"n": 1}]
    assert rows(db, "SELECT tag, stack FROM binary_stacks WHERE hash = ? ORDER BY tag, stack", (spack_hash(1),)) == [
        {"tag": "develop", "stack": "e4s"},
        {"tag": "develop", "stack": "root"},
        {"tag": "v0.23.1", "stack": "root"},
    ]
    assert rows(db, "SELECT label, name, version FROM compilers ORDER BY label") == [
        {"label": "gcc@11.4.0", "name": "gcc", "version": "11.4.0"},
        {"label": "gcc@13.2.0", "name": "gcc", "version": "13.2.0"},
        {"label": "none", "name": "none", "version": None},
    ]


def test_variants_are_split_into_names_values_and_raw_text(hdf5_site, tmp_path):
    db = tmp_path / "cache.db"
    build([str(hdf5_site)], db)
    assert rows(
        db, "SELECT raw, name, operator, value FROM variants WHERE name IN ('mpi', 'patches') ORDER BY raw"
    ) == [
        {"raw": "+mpi", "name": "mpi", "operator": "+", "value": "true"},
        {"raw": "patches:=db4173c,de0de41", "name": "patches", "operator": ":=", "value": "db4173c,de0de41"},
        {"raw": "~mpi", "name": "mpi", "operator": "~", "value": "false"},
    ]
    assert rows(
        db,
        "SELECT variant_values.value FROM variant_values JOIN variants ON variants.id = variant_id"
        " WHERE name = 'patches' ORDER BY position",
    ) == [{"value": "db4173c"}, {"value": "de0de41"}]


def test_foreign_keys_hold_as_data(hdf5_site, tmp_path):
    db = tmp_path / "cache.db"
    build([str(hdf5_site), SITE], db)
    assert rows(db, "PRAGMA foreign_key_check") == []
    declared = {
        (fk["table"], fk["from"], fk["to"])
        for table in ("page_specs", "specs", "configurations", "pages", "listings")
        for fk in rows(db, f"PRAGMA foreign_key_list({table})")
    }
    assert ("specs", "spec_id", "id") in declared and ("configurations", "configuration_id", "id") in declared
    orphans = rows(
        db,
        "SELECT count(*) AS n FROM page_specs WHERE spec_id NOT IN (SELECT id FROM specs)"
        " OR page_id NOT IN (SELECT id FROM pages) OR listing_id NOT IN (SELECT id FROM listings)",
    )
    assert orphans == [{"n": 0}]


def test_full_text_search_finds_binaries(tmp_path):
    db = tmp_path / "cache.db"
    build([SITE, SEEDS], db)
    found = rows(
        db,
        "SELECT DISTINCT package, target FROM binaries WHERE listing_id IN"
        " (SELECT rowid FROM listings_fts WHERE listings_fts MATCH ?)",
        ('hdf5 mpi "neoverse_v2"',),
    )
    assert found == [{"package": "hdf5", "target": "neoverse_v2"}]
    assert rows(
        db,
        "SELECT name FROM packages WHERE id IN (SELECT rowid FROM packages_fts WHERE packages_fts MATCH 'mpi')"
        " ORDER BY name",
    ) == [{"name": "mpich"}, {"name": "py-mpi4py"}]


def test_tags_yaml_brings_tags_and_their_stacks(tmp_path):
    db = tmp_path / "cache.db"
    build([SITE], db)
    assert rows(
        db,
        "SELECT name, kind, snapshot_date, release_version FROM tags WHERE name IN"
        " ('develop', 'v0.23.1', 'develop-2025-04-20') ORDER BY sort_order",
    ) == [
        {"name": "develop", "kind": "develop", "snapshot_date": None, "release_version": None},
        {"name": "v0.23.1", "kind": "release", "snapshot_date": None, "release_version": "0.23.1"},
        {"name": "develop-2025-04-20", "kind": "snapshot", "snapshot_date": "2025-04-20", "release_version": None},
    ]
    stacks = rows(
        db,
        "SELECT stacks.name FROM tag_stacks JOIN tags ON tags.id = tag_id"
        " JOIN stacks ON stacks.id = stack_id WHERE tags.name = 'v0.18.0' ORDER BY stacks.name",
    )
    assert [s["name"] for s in stacks] == ["build_systems", "data-vis-sdk", "e4s", "radiuss", "root", "tutorial"]


def test_pages_keep_path_and_their_binaries_per_stack(hdf5_site, tmp_path):
    db = tmp_path / "cache.db"
    build([str(hdf5_site)], db)
    [page] = rows(db, "SELECT id, path, num_specs, meta, sorted_keys FROM pages WHERE path LIKE '%develop%'")
    assert page["path"] == str(hdf5_site / "_cache/develop/hdf5/specs.md")
    assert page["num_specs"] == 3 and page["sorted_keys"] == 1
    assert page["meta"] is None  # what its binaries imply: export writes it
    written = read_page(SourceFile(page["path"], True), Path(page["path"]).read_bytes()).meta
    assert page_stacks(db, page["id"]) == written["num_specs_by_stack"] == {"root": 3, "e4s": 2, "tutorial": 1}


def page_stacks(db, page_id):
    found = rows(
        db, "SELECT name, binaries FROM page_stacks JOIN stacks ON stacks.id = stack_id WHERE page_id = ?", [page_id]
    )
    return {row["name"]: row["binaries"] for row in found}


def test_meta_disagreement_is_a_problem_not_an_error(tmp_path):
    specs = [spec(1), spec(2, stacks=["root"])]
    meta = meta_for(specs) | {"num_specs": 3}
    path = write_page(tmp_path, "bolt", "develop", specs, meta=meta)
    summary = build([str(tmp_path / "_cache")], tmp_path / "cache.db")
    expected = (str(path), "meta.num_specs", "meta says 3 but spec_details give 2")
    assert summary.warnings == [expected]
    assert rows(tmp_path / "cache.db", "SELECT path, field, message, severity FROM problems") == [
        dict(zip(("path", "field", "message"), expected, strict=True), severity="warning")
    ]
    [page] = rows(tmp_path / "cache.db", "SELECT id, meta FROM pages")
    assert page["meta"] == json.dumps(meta)  # kept as written, for export
    assert page_stacks(tmp_path / "cache.db", page["id"]) == {"root": 2, "e4s": 1}  # counted from its binaries
    with pytest.raises(BuildError, match="--strict"):
        build([str(tmp_path / "_cache")], tmp_path / "strict.db", strict=True)
    assert not (tmp_path / "strict.db").exists()


def test_same_hash_with_conflicting_facts_is_an_error(tmp_path):
    write_page(tmp_path, "bolt", "develop", [spec(1)])
    second = write_page(tmp_path, "bolt", "v0.23.1", [spec(1, target="zen3")])
    with pytest.raises(InputError) as raised:
        build([str(tmp_path / "_cache")], tmp_path / "cache.db")
    assert raised.value.path == str(second)
    assert raised.value.field == "spec_details[0].hash"
    assert "arch=linux-ubuntu24.04-x86_64_v3" in raised.value.expected and "zen3" in raised.value.expected


def test_a_conflict_with_a_page_already_written_names_that_page(tmp_path, monkeypatch):
    monkeypatch.setattr("spack_cache_db.build.FLUSH_EVERY", 1)  # every page goes to the writer process at once
    first = write_page(tmp_path, "bolt", "develop", [spec(1)])
    write_page(tmp_path, "cli11", "develop", [spec(2)])
    second = write_page(tmp_path, "bolt", "v0.23.1", [spec(1, target="zen3")])
    with pytest.raises(InputError) as raised:
        build([str(tmp_path / "_cache")], tmp_path / "cache.db")
    assert raised.value.path == str(second)
    assert (
        f"but {first} lists it as bolt@1.0+mpi build_system=cmake arch=linux-ubuntu24.04-x86_64_v3"
        in raised.value.expected
    )


def test_a_row_refused_after_rows_written_is_named_with_sqlites_own_reason(tmp_path, monkeypatch):
    """The writer tries a refused batch's rows again one by one to name the first refused: only those the
    failed insert did not write, or its first row, written, would be refused as a repeat of itself."""
    page = write_page(tmp_path, "bolt", "develop", [spec(1), spec(2, target="zen3")])
    columns = "page_id, spec_id, position, listing_id, compiler_exact, standard_tarball, extra"
    monkeypatch.setitem(
        load.STATEMENTS, "page_specs", f"INSERT INTO page_specs ({columns}) VALUES (?, ?, nullif(?, 1), ?, ?, ?, ?)"
    )
    with pytest.raises(InputError) as raised:
        build([str(tmp_path / "_cache")], tmp_path / "cache.db")
    assert str(raised.value) == (
        f"{page}: page_specs: expected a value the database can store (NOT NULL constraint failed: page_specs.position)"
    )


def test_conflicts_in_one_batch_are_named_in_the_order_the_pages_list_them(tmp_path):
    """The writer inserts a batch's specs in hash order (writer._in_identity_order); what it says of them is
    still in the order the build read them: bolt's page comes first, though its hash sorts after cli11's."""
    assert spack_hash(1) > spack_hash(2)
    for package, seed in (("bolt", 1), ("cli11", 2)):
        write_page(tmp_path, package, "develop", [spec(seed)])
    later = [
        write_page(tmp_path, package, "v0.23.1", [spec(seed, target="zen3")])
        for package, seed in (("bolt", 1), ("cli11", 2))
    ]
    with pytest.raises(InputError) as raised:
        build([str(tmp_path / "_cache")], tmp_path / "cache.db")
    assert raised.value.path == str(later[0])
    build([str(tmp_path / "_cache")], tmp_path / "kept.db", keep_going=True)
    problems = rows(tmp_path / "kept.db", "SELECT path, field FROM problems ORDER BY rowid")
    assert problems == [{"path": str(page), "field": "spec_details[0].hash"} for page in later]


def test_a_batchs_specs_are_numbered_in_hash_order(tmp_path):
    """Rows go into the hash index in its order, a leaf after the other (writer._in_identity_order): in the
    order pages list them, each went to a leaf anywhere in it."""
    packages = ("bolt", "cli11", "hdf5", "mpich")
    for number, package in enumerate(packages):
        write_page(tmp_path, package, "develop", [spec(seed) for seed in range(10 * number, 10 * number + 10)])
    build([str(tmp_path / "_cache")], tmp_path / "cache.db")
    numbered = [row["hash"] for row in rows(tmp_path / "cache.db", "SELECT hash FROM specs ORDER BY id")]
    assert numbered == sorted(spack_hash(seed) for seed in range(10 * len(packages)))


def test_pages_written_in_many_batches_build_what_one_batch_builds(tmp_path, monkeypatch):
    for number, package in enumerate(("bolt", "cli11", "hdf5", "mpich")):
        write_page(tmp_path, package, "develop", [spec(2 * number), spec(2 * number + 1, target="zen3")])
        write_page(tmp_path, package, "v0.23.1", [spec(2 * number)])
    write_page(tmp_path, "zlib", "develop", [spec(20, hash="not-a-hash")])
    everything = "SELECT tag, package, hash, spec, stacks FROM binaries ORDER BY tag, hash"
    build([str(tmp_path / "_cache")], tmp_path / "one.db", keep_going=True)
    monkeypatch.setattr("spack_cache_db.build.FLUSH_EVERY", 1)
    build([str(tmp_path / "_cache")], tmp_path / "many.db", keep_going=True)
    assert len(rows(tmp_path / "one.db", everything)) == 12
    for sql in (everything, "SELECT path, field FROM problems", "SELECT * FROM row_counts"):
        assert rows(tmp_path / "many.db", sql) == rows(tmp_path / "one.db", sql)


def test_batches_start_small_grow_and_end_small(tmp_path, monkeypatch):
    """The writer gets rows soon after the build starts, and has few left to write once the last page is read:
    batches of FLUSH_LEAST binaries at first, growing to FLUSH_EVERY, and shrinking again as the pages run out."""
    monkeypatch.setattr("spack_cache_db.build.FLUSH_EVERY", 8)
    monkeypatch.setattr("spack_cache_db.build.FLUSH_LEAST", 2)
    for number in range(20):
        write_page(tmp_path, f"pkg{number}", "develop", [spec(2 * number), spec(2 * number + 1, target="zen3")])
    batches = []
    write = writer.BackgroundWriter.write

    def noting_sizes(self, tables, origins):
        batches.append(sum(len(rows) for table, _, rows in tables if table == "page_specs"))
        write(self, tables, origins)

    monkeypatch.setattr(writer.BackgroundWriter, "write", noting_sizes)
    build([str(tmp_path / "_cache")], tmp_path / "cache.db")
    # 2, then as many as before (2, 4), up to 8; then fewer as fewer are to come: 6, 4 and 2 after 17, 18 and 19
    # of the 20 pages (2 binaries each), so 4 after 18, 2 after 19 and the last 2 after 20.
    assert batches == [2, 2, 4, 8, 8, 8, 4, 2, 2]
    assert len(rows(tmp_path / "cache.db", "SELECT * FROM binaries")) == 40


@pytest.mark.parametrize("remembered", [1, 1000])
def test_listings_remembered_from_batch_to_batch_build_what_one_batch_builds(tmp_path, monkeypatch, remembered):
    """Whatever the loader and the writer remember of the listings from batch to batch (LISTINGS_REMEMBERED; 1:
    they forget them after each batch, and queue and look them up again), the rows are those of one batch."""
    for number, tag in enumerate(("develop", "v0.23.1", "v1.0.0")):  # the same listings, new hashes in each tag
        write_page(tmp_path, "bolt", tag, [spec(10 * number), spec(10 * number + 1, target="zen3")])
        write_page(tmp_path, "cli11", tag, [spec(10 * number + 2, stacks=["root"])])
    build([str(tmp_path / "_cache")], tmp_path / "one.db")
    for module in ("load", "writer"):
        monkeypatch.setattr(f"spack_cache_db.db.{module}.LISTINGS_REMEMBERED", remembered)
    monkeypatch.setattr("spack_cache_db.build.FLUSH_EVERY", 1)
    build([str(tmp_path / "_cache")], tmp_path / "many.db")
    assert len(rows(tmp_path / "many.db", "SELECT * FROM binaries")) == 9
    assert len(rows(tmp_path / "many.db", "SELECT * FROM listings")) == 3
    assert every_row(tmp_path / "many.db") == every_row(tmp_path / "one.db")


@pytest.mark.parametrize("known_by", ["writing it", "looking it up"])
def test_the_writer_keeps_the_ids_of_listings_from_batch_to_batch(tmp_path, known_by):
    """A listing the writer wrote, or looked up in the file (an earlier build's), in one batch is named by the
    page_specs of the next by the id it kept, not looked up again: once another connection has changed the
    listing's stack set, a lookup by identity would find nothing and the insert would refuse the row."""
    listing = (1, 1)  # (configuration id, stack set id): the writer's process does not check references
    listing_row = ("listings", load.STATEMENTS["listings"], [tuple(ROWS["listings"](None, *listing))])

    def binary(number):  # the rows of one binary of the listing
        spec = ROWS["specs"](id=None, hash=spack_hash(number), configuration_id=1, size=None, external=0)
        page_spec = ROWS["page_specs"](
            page_id=1, spec_id=spack_hash(number), position=number, listing_id=listing, compiler_exact=1,
            standard_tarball=0, extra=None,
        )  # fmt: skip
        return [
            ("specs", load.STATEMENTS["specs"], [tuple(spec)]),
            ("page_specs", load.STATEMENTS["page_specs"], [tuple(page_spec)]),
        ]

    db = tmp_path / "cache.db"
    conn = open_for_build(db)
    create_schema(conn)
    if known_by == "looking it up":
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute(listing_row[1], listing_row[2][0])
    conn.close()
    first = binary(1) if known_by == "looking it up" else [listing_row]
    background = writer.BackgroundWriter(db)
    try:
        for batch in (first, binary(2)):
            background.write(batch, [writer.Origin("a page", dict.fromkeys((table for table, _, _ in batch), 0))])
            background.sync()
            with sqlite3.connect(db, isolation_level=None) as other:
                other.execute("UPDATE listings SET stack_set_id = stack_set_id + 1")
            other.close()
        background.finish()
    finally:
        background.stop()
    assert rows(db, "SELECT DISTINCT listing_id FROM page_specs") == [{"listing_id": 1}]


def test_a_page_rolled_back_takes_its_listings_out_of_those_the_loader_remembers(tmp_path):
    """No build rolls a page back once its listings are queued today (add_document checks before it queues), so
    the loader is driven directly: a listing forgotten with its page is queued again by the next page naming it."""
    configurations = Configurations()
    rolled_back, next_one = (
        page_document(read_page(SourceFile(str(path), True), path.read_bytes()), configurations)
        for path in (
            write_page(tmp_path, "bolt", tag, [spec(number)]) for number, tag in enumerate(("develop", "v1.0"))
        )
    )
    conn = sqlite3.connect(":memory:")
    create_schema(conn)
    loader = Loader(conn, writer=None)
    checkpoint = loader.checkpoint()
    loader.add_document(rolled_back)
    loader.rollback(checkpoint)
    assert loader.pending["listings"] == []
    loader.add_document(next_one)  # the same configuration and stacks: the same listing
    assert len(loader.pending["listings"]) == 1


def test_a_row_the_writer_refuses_stops_the_build_naming_the_page_and_sqlites_reason(tmp_path, monkeypatch):
    write_page(tmp_path, "cli11", "develop", [spec(2)])
    page = write_page(tmp_path, "bolt", "develop", [spec(1)])
    monkeypatch.setitem(
        load.STATEMENTS,
        "specs",
        "INSERT INTO specs (id, hash, configuration_id, size, external) VALUES (?, substr(?, 1, 5), ?, ?, ?)",
    )
    db = tmp_path / "cache.db"
    with pytest.raises(InputError) as raised:
        build([str(tmp_path / "_cache")], db)
    assert str(raised.value) == (
        f"{page}: specs: expected a value the database can store (CHECK constraint failed: length(hash) = 32)"
    )
    assert not db.exists()
    assert list(tmp_path.glob(".cache.db.tmp-*")) == []


def test_a_build_beside_other_threads_starts_its_writer_from_a_clean_process(tmp_path):
    write_page(tmp_path, "bolt", "develop", [spec(1), spec(2, target="zen3")])
    stop = threading.Event()
    waiting = threading.Thread(target=stop.wait)
    waiting.start()
    try:
        assert writer.process_start_method() == ("forkserver" if sys.platform == "linux" else "spawn")
        build([str(tmp_path / "_cache")], tmp_path / "cache.db")
    finally:
        stop.set()
        waiting.join()
    assert rows(tmp_path / "cache.db", "SELECT target FROM binaries ORDER BY target") == [
        {"target": "x86_64_v3"},
        {"target": "zen3"},
    ]


def test_keep_going_records_rejected_pages_and_builds_the_rest(tmp_path):
    write_page(tmp_path, "bolt", "develop", [spec(1)])
    bad = write_page(tmp_path, "cli11", "develop", [spec(2, hash="not-a-hash")])
    summary = build([str(tmp_path / "_cache")], tmp_path / "cache.db", keep_going=True)
    assert [str(e) for e in summary.rejected] == [
        f"{bad}: spec_details[0].hash: expected 32 characters of Spack's base32 alphabet (a-z, 2-7), found 'not-a-hash'"
    ]
    db = tmp_path / "cache.db"
    assert rows(db, "SELECT package FROM binaries") == [{"package": "bolt"}]
    assert rows(db, "SELECT path, field, severity FROM problems") == [
        {"path": str(bad), "field": "spec_details[0].hash", "severity": "error"}
    ]
    assert rows(db, "SELECT name FROM packages") == [{"name": "bolt"}]


def test_old_layout_pages_are_skipped_and_counted(tmp_path):
    write_page(tmp_path, "bolt", "develop", [spec(1)])
    old = tmp_path / "_cache" / "old" / "specs.md"
    old.parent.mkdir(parents=True)
    old.write_text("---\ntitle: bolt\ncategory: package\nlayout: package\nspec_files: [a]\n---\n")
    summary = build([str(tmp_path / "_cache")], tmp_path / "cache.db")
    assert (summary.old_layout, summary.pages_read) == (1, 1)


def test_finished_file_is_ready_to_hand_out(tmp_path):
    db = tmp_path / "cache.db"
    build([SEEDS], db)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("SELECT count(*) FROM sqlite_stat1").fetchone()[0] > 0
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    info = dict(conn.execute("SELECT key, value FROM build_info"))
    assert info["schema_version"] == str(SCHEMA_VERSION)
    assert counts(db) == {"binaries": 407, "packages": 5, "pages": 5, "problems": 0, "specs": 407, "tags": 2}
    assert_row_counts_are_live_counts(conn)
    assert json.loads(info["inputs"]) == [SEEDS]
    assert not list(tmp_path.glob(".cache.db.tmp-*"))


def assert_row_counts_are_live_counts(conn):
    row_counts = dict(conn.execute("SELECT name, count FROM row_counts"))
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    tables += [*VIEW_COUNTS, *VIEW_ROWS_OF]  # views a table page of Datasette counts
    assert row_counts == {name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in tables}


def test_row_counts_of_a_database_from_indexes_are_live_counts(index_db):
    """Its dependencies included: link_edges is counted from the edges counted per dependency version and kind."""
    conn = sqlite3.connect(index_db)
    assert conn.execute("SELECT count FROM row_counts WHERE name = 'link_edges'").fetchone()[0] > 0
    assert_row_counts_are_live_counts(conn)


@pytest.mark.parametrize("built", ["cache_db", "index_db"])
def test_statistics_cover_the_schemas_tables_not_the_full_text_indexes_own(built, request):
    """ANALYZE counts every row of a table without an index, such as a full-text index's segments (456 MB in the
    spread history: 0.06 s of every build). FTS5 reads them by key, so they get no statistics; every table of
    the schema with rows gets its own, but those a full build writes after gathering them (what it was built
    from, the row counts, and the kept counts it counts again from every row)."""
    conn = sqlite3.connect(request.getfixturevalue(built))
    analysed = {table for (table,) in conn.execute("SELECT tbl FROM sqlite_stat1")}
    with_rows = {table for table in schema.COLUMNS if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone()}
    written_after = {"build_info", "row_counts", *(kept.table for kept in schema.KEPT_COUNTS)}
    assert "specs" in analysed
    assert analysed == with_rows - written_after


def test_spec_strings_written_in_sql_match_spacks_syntax(cache_db):
    """configuration_specs and binaries write spec strings in SQL; spec_strings.spec_string is the reference."""
    conn = sqlite3.connect(cache_db)
    rows = conn.execute(
        "SELECT configuration_specs.spec, packages.name, versions.version, variant_sets.variants, platforms.name,"
        " oss.name, targets.name, compilers.label FROM configuration_specs"
        " JOIN configurations ON configurations.id = configuration_specs.configuration_id"
        " JOIN versions ON versions.id = version_id JOIN packages ON packages.id = versions.package_id"
        " JOIN variant_sets ON variant_sets.id = variant_set_id JOIN platforms ON platforms.id = platform_id"
        " JOIN oss ON oss.id = os_id JOIN targets ON targets.id = target_id JOIN compilers ON compilers.id = compiler_id"
    ).fetchall()
    assert len(rows) == conn.execute("SELECT count(*) FROM configurations").fetchone()[0] > 50
    for spec_text, package, version, variants, platform, os, target, compiler in rows:
        parsed = [normalise.parse_variant(raw) for raw in json.loads(variants)]
        expected = spec_string(package, version, parsed, platform, os, target, normalise.parse_compiler(compiler)[0])
        assert spec_text == expected
    assert (
        conn.execute("SELECT count(*) FROM binaries JOIN configuration_specs USING (spec)").fetchone()[0]
        == conn.execute("SELECT count(*) FROM binaries").fetchone()[0]
    )


def test_other_files_of_a_checkout_are_read_no_further_than_their_start(tmp_path, monkeypatch):
    """A checkout also holds the site's images, scripts and, here, a mirror's index: files that cannot be
    pages are recognised by their first bytes, whatever their size (this one is past the page size cap)."""
    checkout = tmp_path / "checkout"
    write_page(checkout, "bolt", "develop", [spec(1)])
    big = checkout / "mirrors" / "develop" / "build_cache" / "index.json"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as f:
        f.write(b'{"database": {')
        f.truncate(300 * 1024 * 1024)  # sparse: past the 256 MiB a page may have
    read = []
    real_read = __import__("os").read

    def counted(fd, count):
        data = real_read(fd, count)
        read.append(len(data))
        return data

    monkeypatch.setattr("os.read", counted)
    summary = build([str(checkout)], tmp_path / "cache.db")
    assert summary.pages_read == 1
    assert sum(read) < 1024 * 1024  # the page and the index's first bytes, not 300 MiB
    (outcome,) = (
        sqlite3.connect(tmp_path / "cache.db")
        .execute("SELECT outcome FROM sources WHERE path = ?", (str(big),))
        .fetchone()
    )
    assert outcome == "not a page"


@contextlib.contextmanager
def writer_of_a_held_file(tmp_path):
    """A BackgroundWriter on a new database that another connection holds once the writer has opened it: the
    writer waits for each write (up to sqlite3's 5 s, then it stops). Yields the writer, the database and a
    function that lets the file go."""
    db = tmp_path / "cache.db"
    conn = open_for_build(db)
    create_schema(conn)
    conn.close()
    holder = sqlite3.connect(db, isolation_level=None)
    background = writer.BackgroundWriter(db)
    try:
        background.sync()
        holder.execute("BEGIN EXCLUSIVE")
        yield background, db, lambda: holder.execute("ROLLBACK")
    finally:
        background.stop()
        holder.close()


def problems_batch(count=2000):
    """A batch of problems rows of 1 kB each: 2 MB, where a pipe no one reads from takes a few hundred kB."""
    rows = [
        tuple(ROWS["problems"](None, f"{n:04}".ljust(1000, "x"), "f", "m", "warning", None, None)) for n in range(count)
    ]
    return [("problems", load.STATEMENTS["problems"], rows)], [writer.Origin("test", {"problems": 0})]


def test_the_writer_takes_batches_off_the_pipe_while_it_cannot_write(tmp_path):
    """While the writer waits on one batch, the build hands it MESSAGES_AHEAD more and reads on; they are all
    written once it can."""
    batches = MESSAGES_AHEAD + 1  # the one being written, and those queued behind it
    with writer_of_a_held_file(tmp_path) as (background, db, let_go):
        for _ in range(batches):
            background.write(*problems_batch())
        let_go()
        background.finish()
    assert rows(db, "SELECT count(*) AS n FROM problems") == [{"n": batches * 2000}]


def test_a_writer_that_stops_while_the_build_hands_it_batches_says_why(tmp_path):
    with writer_of_a_held_file(tmp_path) as (background, _, _):
        with pytest.raises(sqlite3.OperationalError, match="^database is locked$"):
            while True:  # a full queue and pipe: the build waits until the writer stops, then hears why
                background.write(*problems_batch())


@pytest.mark.parametrize("table", sorted(schema.NUMBERED_REFERENCES))
def test_the_writer_gives_each_reference_to_a_numbered_row_its_parents_id_and_keeps_the_other_values(table):
    references = schema.NUMBERED_REFERENCES[table]
    row = tuple(f"value {position}" for position in range(len(schema.COLUMNS[table])))
    lookups = [{row[position]: f"id in {parent}, named at {position}"}.get for position, parent in references]
    (resolved,) = writer._RESOLVERS[table]([row], *lookups)
    named = {position: f"id in {parent}, named at {position}" for position, parent in references}
    assert resolved == tuple(named.get(position, value) for position, value in enumerate(row))


def _commits(db):
    """How many times the file was committed: SQLite's file change counter (bytes 24-27 of its header)."""
    with open(db, "rb") as file:
        return int.from_bytes(file.read(28)[24:], "big")


def test_the_writer_commits_batches_together(tmp_path):
    """A commit writes every page its rows changed: batch after batch changes pages all over the index of hashes,
    so the writer commits once ROWS_PER_COMMIT rows are written (or a tag is counted, or the build asks), not after
    each batch."""
    db = tmp_path / "cache.db"
    conn = open_for_build(db)
    create_schema(conn)
    conn.close()
    before = _commits(db)
    batch_rows = writer.ROWS_PER_COMMIT // 4
    background = writer.BackgroundWriter(db)
    try:
        for batch in range(6):
            specs = [
                tuple(ROWS["specs"](id=None, hash=spack_hash((batch, n)), configuration_id=1, size=None, external=0))
                for n in range(batch_rows)
            ]
            background.write([("specs", load.STATEMENTS["specs"], specs)], [writer.Origin("a page", {"specs": 0})])
        background.finish()
    finally:
        background.stop()
    assert rows(db, "SELECT count(*) AS specs FROM specs") == [{"specs": 6 * batch_rows}]
    assert _commits(db) - before == 2  # once four batches' rows were written, then when the build finished
