"""Building onto an existing database reads only what changed and ends where a full build ends."""

import errno
import multiprocessing
import os
import shutil
import sqlite3
import time

import pytest
from dump import check_full_text, every_row
from pagemaker import spec, write_page
from paths import SITE
from test_dependency_counts import build_mirrors
from test_dependents import library_tag

from spack_cache_db import build as build_module
from spack_cache_db.build import CopyAhead, build
from spack_cache_db.db import load, maintenance, schema
from spack_cache_db.db.maintenance import prune_orphans
from spack_cache_db.read import pages

CANONICAL = {
    "binaries": "SELECT tag, package, version, version_rank, hash, compiler, os, platform, target, variants, stacks,"
    " spec, install, size, tag_order FROM binaries ORDER BY tag, hash",
    "binary_stacks": "SELECT * FROM binary_stacks ORDER BY tag, hash, stack",
    "pages": "SELECT tags.name, packages.name, path, num_specs, meta, sorted_keys, key_orders.keys, extra"
    " FROM pages JOIN tags ON tags.id = tag_id JOIN packages ON packages.id = package_id"
    " LEFT JOIN key_orders ON key_orders.id = key_order_id ORDER BY path",
    "sources": "SELECT * FROM sources ORDER BY path",
    "problems": "SELECT path, field, message, severity, tag, package FROM problems ORDER BY path, field",
    "tags": "SELECT name, kind, snapshot_date, release_version, sort_order, mirror_url FROM tags ORDER BY name",
    "tag_stacks": "SELECT tags.name, stacks.name FROM tag_stacks JOIN tags ON tags.id = tag_id"
    " JOIN stacks ON stacks.id = stack_id ORDER BY 1, 2",
    "stacks": "SELECT name FROM stacks ORDER BY name",
    "packages": "SELECT name FROM packages ORDER BY name",
    "versions": "SELECT packages.name, version, version_rank FROM versions JOIN packages ON packages.id = package_id"
    " ORDER BY 1, 2",
    "compilers": "SELECT label, name, version FROM compilers ORDER BY label",
    "oss": "SELECT name FROM oss ORDER BY name",
    "targets": "SELECT name FROM targets ORDER BY name",
    "variants": "SELECT raw, name, operator, value FROM variants ORDER BY raw",
    "variant_values": "SELECT raw, position, variant_values.value FROM variant_values"
    " JOIN variants ON variants.id = variant_id ORDER BY 1, 2",
    "variant_sets": "SELECT variants FROM variant_sets ORDER BY variants",
    "stack_sets": "SELECT stacks FROM stack_sets ORDER BY stacks",
    "configurations": "SELECT spec FROM configuration_specs ORDER BY spec",
    "listings": "SELECT package, version, compiler, os, platform, target, variants, stacks FROM listing_texts"
    " ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
    "search": "SELECT listing_texts.package, listing_texts.target, listing_texts.stacks FROM listings_fts"
    " JOIN listing_texts ON listing_texts.id = listings_fts.rowid WHERE listings_fts MATCH 'mpi OR e4s OR bolt'"
    " ORDER BY 1, 2, 3",
    "package_search": "SELECT name FROM packages WHERE id IN (SELECT rowid FROM packages_fts WHERE packages_fts MATCH 'olt')",
    "binaries_facet_counts": "SELECT * FROM binaries_facet_counts ORDER BY facet, value",
    "binaries_facet_pairs": "SELECT * FROM binaries_facet_pairs ORDER BY facet, value, other, other_value",
    "binaries_tag_facet_pairs": "SELECT * FROM binaries_tag_facet_pairs ORDER BY tag, facet, value, other, other_value",
    "binary_stacks_cube": "SELECT * FROM binary_stacks_cube ORDER BY tag, stack",
    "tag_cells": "SELECT * FROM tag_cells ORDER BY tag, os, target, compiler",
    "tag_stack_cells": "SELECT tags.name, stack, oss.name, targets.name, compilers.label, binaries, packages"
    " FROM tag_stack_cells JOIN tags ON tags.id = tag_id JOIN oss ON oss.id = os_id"
    " JOIN targets ON targets.id = target_id JOIN compilers ON compilers.id = compiler_id ORDER BY 1, 2, 3, 4, 5",
    # Rows that depend on how the file was written, not on what it holds: ANALYZE's statistics
    # and the segments of a full-text index built in one go or in steps.
    "row_counts": "SELECT * FROM row_counts WHERE name != 'sqlite_stat1' AND name NOT LIKE '%fts_data'"
    " AND name NOT LIKE '%fts_idx' ORDER BY name",
}


def canonical(db):
    """Every fact in the database, by natural keys (integer ids differ between builds)."""
    conn = sqlite3.connect(db)
    try:
        check_full_text(conn)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        return {name: conn.execute(sql).fetchall() for name, sql in CANONICAL.items()}
    finally:
        conn.close()


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(SITE, site)
    return site


def full_build(site, tmp_path):
    db = tmp_path / "full.db"
    db.unlink(missing_ok=True)
    build([str(site)], db)
    return canonical(db)


def test_unchanged_inputs_write_nothing(site, tmp_path):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    before = (db.read_bytes(), os.stat(db).st_mtime_ns)
    summary = build([str(site)], db)
    assert summary.up_to_date and summary.pages_read == 0 and summary.pages_unchanged == 24
    assert (db.read_bytes(), os.stat(db).st_mtime_ns) == before


def test_changed_added_and_removed_pages_end_like_a_full_build(site, tmp_path):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    shutil.rmtree(site / "_cache" / "v0.21.2")
    write_page(site, "bolt", "develop-2025-05-04", [spec(1, versions=["2.1"]), spec(2, versions=["2.0"])])
    changed = site / "_cache" / "develop-2025-04-20" / "hdf5" / "specs.md"
    changed.write_text(changed.read_text().replace('"+mpi"', '"~mpi"'))
    summary = build([str(site)], db)
    assert (summary.incremental, summary.pages_read, summary.pages_removed) == (True, 2, 2)
    assert summary.pages_unchanged == 21
    assert canonical(db) == full_build(site, tmp_path)


def test_a_new_tag_is_added_like_a_full_build(site, tmp_path):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    for number, package in enumerate(["bolt", "cli11", "hdf5"]):
        write_page(site, package, "develop-2025-06-01", [spec(f"new-{package}", versions=[f"1.{number}"])])
    summary = build([str(site)], db)
    assert (summary.pages_read, summary.pages_unchanged) == (3, 24)
    assert canonical(db) == full_build(site, tmp_path)


@pytest.mark.parametrize("change", ["a tag removed", "tags.yaml changed"])
def test_a_build_that_reads_no_page_looks_up_only_tags_and_stacks(site, tmp_path, monkeypatch, change):
    """The ids of configurations and the other tables a page's rows name are read only by a build that reads
    pages or indexes (in the usual 100-tag history, 0.25 s of a removal); the rest look up what tags.yaml names."""
    db = tmp_path / "cache.db"
    build([str(site)], db)
    if change == "a tag removed":
        shutil.rmtree(site / "_cache" / "v0.21.2")
    else:
        tags_yaml = site / "_data" / "tags.yaml"
        tags_yaml.write_text(tags_yaml.read_text().replace("  - build_systems\n", "", 1))
    looked_up = []
    real_lookup = load.Loader._lookup
    monkeypatch.setattr(
        load.Loader, "_lookup", lambda loader, table: looked_up.append(table) or real_lookup(loader, table)
    )
    summary = build([str(site)], db)
    assert (summary.incremental, summary.pages_read) == (True, 0)
    assert set(looked_up) == {"tags", "stacks"}
    assert canonical(db) == full_build(site, tmp_path)


def test_a_loader_refuses_to_look_up_a_table_it_was_not_given(tmp_path):
    """Its ids would be read while the writer holds the file: the loader would wait for the writer's batch."""
    conn = sqlite3.connect(tmp_path / "cache.db")
    schema.create_schema(conn)
    loader = load.Loader(conn, writer=None, looked_up=load.LOOKED_UP_FOR_TAGS_YAML)
    assert loader.tag_id("develop") == 1 and loader.stack_id("e4s") == 1
    with pytest.raises(AssertionError, match="packages: looked up by a loader that was not given it"):
        loader._named_id("packages", "hdf5")


def _record_copies(monkeypatch):
    """[source] of each shutil.copyfile this process makes, and of each copy CopyAhead makes."""
    copied = []
    real_copy, real_start = shutil.copyfile, CopyAhead.start
    monkeypatch.setattr(shutil, "copyfile", lambda *paths: copied.append(paths[0]) or real_copy(*paths))
    monkeypatch.setattr(CopyAhead, "start", lambda ahead: copied.append(("ahead", ahead.source)) or real_start(ahead))
    return copied


def test_only_a_build_that_deletes_nothing_first_has_its_writer_copy_the_database(site, tmp_path, monkeypatch):
    """Adding pages, the writer process copies the database while the build reads them (this process copies
    nothing); changing a page, the build copies it while it plans, then deletes the page's rows before anything
    is written."""
    db = tmp_path / "cache.db"
    build([str(site)], db)
    copied = _record_copies(monkeypatch)
    write_page(site, "bolt", "develop-2025-06-01", [spec("a new bolt")])
    summary = build([str(site)], db)
    assert (summary.incremental, summary.pages_read, copied) == (True, 1, [])
    assert canonical(db) == full_build(site, tmp_path)
    write_page(site, "bolt", "develop-2025-06-01", [spec("another new bolt")])
    summary = build([str(site)], db)
    assert (summary.pages_read, copied) == (1, [("ahead", db)])
    assert canonical(db) == full_build(site, tmp_path)


@pytest.mark.parametrize("copy_file_range", ["missing", "failing", "copying nothing"])
def test_without_copy_file_range_a_build_that_deletes_first_copies_the_database_itself(
    site, tmp_path, monkeypatch, copy_file_range
):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    if copy_file_range == "missing":
        monkeypatch.delattr(os, "copy_file_range")
    elif copy_file_range == "failing":
        monkeypatch.setattr(os, "copy_file_range", lambda *_: (_ for _ in ()).throw(OSError(errno.EXDEV, "cross")))
    else:  # as on file systems where it returns 0 as if at the end of the file
        monkeypatch.setattr(os, "copy_file_range", lambda *_: 0)
    copied = _record_copies(monkeypatch)
    shutil.rmtree(site / "_cache" / "v0.21.2")
    summary = build([str(site)], db)
    assert (summary.pages_removed, copied) == (2, [("ahead", db), db])
    assert canonical(db) == full_build(site, tmp_path)


@pytest.mark.parametrize("change", ["a tag removed", "a page rewritten"])
def test_the_copy_is_made_while_the_plan_stats_the_files(site, tmp_path, monkeypatch, change):
    """Once the plan knows the build deletes first (files gone: before any file is looked at; a file changed:
    as soon as it is found), it copies the database while it looks at the others."""
    db = tmp_path / "cache.db"
    build([str(site)], db)
    if change == "a tag removed":
        shutil.rmtree(site / "_cache" / "v0.21.2")
    else:
        changed = site / "_cache" / "develop-2025-04-20" / "hdf5" / "specs.md"
        changed.write_text(changed.read_text().replace('"+mpi"', '"~mpi"'))
    events = []
    real_change, real_start = build_module._change, CopyAhead.start
    monkeypatch.setattr(
        build_module, "_change", lambda source, before: events.append(source.path) or real_change(source, before)
    )
    monkeypatch.setattr(CopyAhead, "start", lambda ahead: events.append("copy") or real_start(ahead))
    build([str(site)], db)
    assert events.count("copy") == 1
    looked_at = [event for event in events if event != "copy"]
    first = 0 if change == "a tag removed" else looked_at.index(str(changed)) + 1
    assert events.index("copy") == first < len(looked_at)
    assert canonical(db) == full_build(site, tmp_path)


def test_a_build_stopped_while_the_copy_is_made_leaves_no_copy(site, tmp_path, monkeypatch):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    before = db.read_bytes()
    shutil.rmtree(site / "_cache" / "v0.21.2")
    real_change = build_module._change

    def interrupted(source, before):
        real_change(source, before)
        raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "_change", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build([str(site)], db)
    assert db.read_bytes() == before
    assert list(tmp_path.glob(".cache.db.tmp-*")) == []


def test_a_copy_stopped_returns_within_a_chunk(tmp_path, monkeypatch):
    source, target = tmp_path / "source", tmp_path / "target"
    source.write_bytes(os.urandom(1 << 22))
    monkeypatch.setattr(CopyAhead, "CHUNK", 1)  # a byte at a time: seconds for the whole file
    ahead = CopyAhead(source, target)
    ahead.start()
    ahead.stop()
    assert not ahead.made()
    assert not target.exists() or target.stat().st_size < source.stat().st_size
    finished = CopyAhead(source, tmp_path / "whole")
    monkeypatch.setattr(CopyAhead, "CHUNK", 1 << 20)
    finished.start()
    assert finished.made() and (tmp_path / "whole").read_bytes() == source.read_bytes()


def _record_checks(monkeypatch, tmp_path, wait_for_load=0):
    """A function giving (the id of the process, whether the load had begun) of each stat of a recorded file
    (build._change), in order: the check of an addition runs in a child process, which appends to a file. The
    first stat waits up to wait_for_load seconds for the load to begin (build._load_file)."""
    log, loading = tmp_path / "checked-by", tmp_path / "loading"
    real_change, real_load_file = build_module._change, build_module._load_file

    def change(source, before):
        deadline = time.monotonic() + wait_for_load
        while not log.exists() and not loading.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        with open(log, "a") as checked:
            checked.write(f"{os.getpid()} {loading.exists()}\n")
        return real_change(source, before)

    def load_file(*given):
        loading.touch()
        return real_load_file(*given)

    monkeypatch.setattr(build_module, "_change", change)
    monkeypatch.setattr(build_module, "_load_file", load_file)
    _fork_the_check(monkeypatch)
    return lambda: [(int(pid), began == "True") for pid, began in map(str.split, log.read_text().splitlines())]


def _fork_the_check(monkeypatch):
    """The build's child process forked, as a build from the command line forks it: a forkserver's (this test
    process may have threads left by others) imports the module again, without the test's patches."""
    monkeypatch.setattr(build_module, "process_start_method", lambda: "fork")


def _new_tag(site, tag="develop-2025-06-01"):
    for number, package in enumerate(["bolt", "cli11"]):
        write_page(site, package, tag, [spec(f"new-{package}", versions=[f"1.{number}"])])


def test_an_addition_checks_the_files_recorded_before_in_a_child_process_while_it_loads(site, tmp_path, monkeypatch):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    checked_by = _record_checks(monkeypatch, tmp_path, wait_for_load=10)
    _new_tag(site)
    summary = build([str(site)], db)
    assert (summary.pages_read, summary.pages_unchanged) == (2, 24)
    (checker, _), *_ = checks = checked_by()
    assert checker != os.getpid() and checks == [(checker, True)] * 24
    assert canonical(db) == full_build(site, tmp_path)
    assert multiprocessing.active_children() == []


def test_a_build_that_deletes_first_checks_the_recorded_files_before_it_loads(site, tmp_path, monkeypatch):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    checked_by = _record_checks(monkeypatch, tmp_path)
    _new_tag(site)
    shutil.rmtree(site / "_cache" / "v0.21.2")
    summary = build([str(site)], db)
    assert (summary.pages_read, summary.pages_removed, summary.pages_unchanged) == (2, 2, 22)
    assert checked_by() == [(os.getpid(), False)] * 22
    assert canonical(db) == full_build(site, tmp_path)


@pytest.mark.parametrize("child", ["checks", "dies"])
def test_a_recorded_file_changed_while_a_tag_is_added_is_read_again_like_a_full_build(
    site, tmp_path, monkeypatch, child
):
    """The addition finds the change once it has loaded the new tag: it plans again, deletes the page's rows
    first and reads it again with the tag, keeping nothing of the first try. Where the child checking the
    files dies, the build checks them itself."""
    db = tmp_path / "cache.db"
    build([str(site)], db)
    if child == "dies":
        monkeypatch.setattr(build_module, "_check_in_child", lambda *_: os._exit(1))
        _fork_the_check(monkeypatch)
    planned = []
    real_plan = build_module._plan
    monkeypatch.setattr(
        build_module,
        "_plan",
        lambda *given, **named: planned.append(named.get("check_while_loading", False)) or real_plan(*given, **named),
    )
    _new_tag(site)
    changed = site / "_cache" / "develop-2025-04-20" / "hdf5" / "specs.md"
    changed.write_text(changed.read_text().replace('"+mpi"', '"~mpi"'))
    summary = build([str(site)], db)
    assert planned == [True, False]
    assert (summary.pages_read, summary.pages_unchanged, summary.pages_removed) == (3, 23, 0)
    assert canonical(db) == full_build(site, tmp_path)
    assert list(tmp_path.glob(".cache.db.tmp-*")) == [] and multiprocessing.active_children() == []


def test_a_recorded_file_touched_while_a_tag_is_added_is_recorded_as_it_is_now(site, tmp_path, monkeypatch):
    """Found in the child, after the load began: the writer records the file's new identity (and the folder
    listings of files unchanged in a folder listed again) before it finishes, as a full build would."""
    monkeypatch.setattr(pages, "RECENT_NS", 0)  # folders count as settled once listed
    notes = site / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("not a page")
    db = tmp_path / "cache.db"
    build([str(site)], db)
    _new_tag(site)
    os.utime(site / "_cache" / "develop" / "bolt" / "specs.md", ns=(1, 1))
    (notes / "b.txt").write_text("not a page either")  # the folder is listed again: a.txt is relisted
    summary = build([str(site)], db)
    assert (summary.pages_read, summary.pages_unchanged) == (2, 24)  # 23 pages and a.txt; bolt's touched
    assert canonical(db) == full_build(site, tmp_path)
    again = build([str(site)], db)
    assert (again.up_to_date, again.pages_read) == (True, 0)


def test_an_addition_interrupted_while_it_loads_leaves_the_database_and_no_process(site, tmp_path, monkeypatch):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    before = db.read_bytes()
    _new_tag(site)
    real_change = build_module._change

    def slow_change(source, recorded):  # the child is still checking when the build stops
        time.sleep(60)
        return real_change(source, recorded)

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "_change", slow_change)
    monkeypatch.setattr(build_module, "_load_file", interrupted)
    _fork_the_check(monkeypatch)
    with pytest.raises(build_module.Interrupted) as stopped:
        build([str(site)], db)
    assert not stopped.value.replaced and db.read_bytes() == before
    assert list(tmp_path.glob(".cache.db.tmp-*")) == [] and multiprocessing.active_children() == []


def test_a_new_tag_of_indexes_is_added_by_a_writer_that_copies_the_database(tmp_path, monkeypatch):
    """A tag of indexes the database does not have yet is added as pages are (the writer copies the database
    while the build reads the tag); a tag read before and changed goes first, so the build copies it first."""
    db = tmp_path / "cache.db"
    tags = {"develop": library_tag("develop", 12, 20), "v1": library_tag("v1", 10, 10)}
    build_mirrors(tmp_path / "mirrors", db, tags)
    copied = []
    real_copy = shutil.copyfile
    monkeypatch.setattr(shutil, "copyfile", lambda *paths: copied.append(paths) or real_copy(*paths))
    for number, (tag, records) in enumerate(
        [("v2", library_tag("v2", 8, 10)), ("develop", library_tag("develop", 5, 20))]
    ):
        tags[tag] = records
        summary = build_mirrors(tmp_path / "mirrors", db, tags)
        assert (summary.incremental, summary.index_tags_read, [source for source, _ in copied]) == (
            True,
            [tag],
            [db] * number,
        )
        fresh = tmp_path / f"fresh-{tag}.db"
        build_mirrors(tmp_path / "mirrors", fresh, tags)  # the same mirrors, written again as they are
        assert every_row(db) == every_row(fresh)


def test_a_version_gone_ranks_the_others_like_a_full_build(site, tmp_path):
    """An update ranks again only the packages whose versions changed: a version gone leaves a gap in the
    others' ranks (or none, the newest gone), a new one is loaded with rank 0; other packages keep theirs."""
    db = tmp_path / "cache.db"
    write_page(site, "bolt", "develop-2025-06-01", [spec("v9.0", versions=["9.0"]), spec("v9.3", versions=["9.3"])])
    middle = write_page(site, "bolt", "develop-2025-06-08", [spec("v9.1", versions=["9.1"])])
    newest = write_page(site, "bolt", "develop-2025-06-15", [spec("v9.4", versions=["9.4"])])
    build([str(site)], db)
    for gone in (middle, newest):
        shutil.rmtree(gone.parent.parent)
        build([str(site)], db)
        assert canonical(db) == full_build(site, tmp_path)


def test_touched_but_unchanged_pages_are_not_parsed_again(site, tmp_path):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    page = site / "_cache" / "develop" / "bolt" / "specs.md"
    os.utime(page, ns=(1, 1))
    summary = build([str(site)], db)
    assert (summary.up_to_date, summary.pages_read) == (False, 0)
    assert canonical(db) == full_build(site, tmp_path)


def test_a_page_fixed_after_keep_going_is_read_again(site, tmp_path):
    db = tmp_path / "cache.db"
    page = site / "_cache" / "develop" / "bolt" / "specs.md"
    good = page.read_text()
    first_spec = good.index("spec_details")
    page.write_text(good[:first_spec] + good[first_spec:].replace('"versions": ["2.0"]', '"versions": []', 1))
    summary = build([str(site)], db, keep_going=True)
    assert len(summary.rejected) == 1
    page.write_text(good)
    summary = build([str(site)], db)
    assert (summary.rejected, summary.pages_read) == ([], 1)
    assert canonical(db) == full_build(site, tmp_path)


def test_a_schema_change_means_a_full_build(site, tmp_path):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE build_info SET value = '0' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    summary = build([str(site)], db)
    assert (summary.incremental, summary.pages_read) == (False, 24)


def test_a_new_page_that_contradicts_the_database_is_refused(tmp_path):
    from spack_cache_db.records import InputError

    first = write_page(tmp_path, "bolt", "develop", [spec(1)])
    db = tmp_path / "cache.db"
    build([str(tmp_path / "_cache")], db)
    before = db.read_bytes()
    second = write_page(tmp_path, "bolt", "v0.23.1", [spec(1, target="zen3")])
    with pytest.raises(InputError) as raised:
        build([str(tmp_path / "_cache")], db)
    assert (raised.value.path, raised.value.field) == (str(second), "spec_details[0].hash")
    assert (
        f"but {first} lists it as bolt@1.0+mpi build_system=cmake arch=linux-ubuntu24.04-x86_64_v3"
        in raised.value.expected
    )
    assert db.read_bytes() == before


def test_a_new_page_that_contradicts_the_database_is_left_out_with_keep_going_like_a_full_build(tmp_path):
    """The writer finds the contradiction as it writes the page, in a build that only adds pages (its
    writer copied the database): the build takes the page back on the copy, and prunes what only it used."""
    write_page(tmp_path, "bolt", "develop", [spec(1)])
    db = tmp_path / "cache.db"
    build([str(tmp_path / "_cache")], db)
    second = write_page(tmp_path, "bolt", "v0.23.1", [spec(1, target="zen3"), spec(2, versions=["9.9"])])
    summary = build([str(tmp_path / "_cache")], db, keep_going=True)
    [rejected] = summary.rejected
    assert (rejected.path, rejected.field.endswith("].hash")) == (str(second), True)
    fresh = tmp_path / "fresh.db"
    build([str(tmp_path / "_cache")], fresh, keep_going=True)
    assert canonical(db) == canonical(fresh)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM versions WHERE version = '9.9'").fetchone() == (0,)


def write_history(root, tags, own_variant_sets=()):
    """Pages of these tags, ten packages each, every binary with its own hash, version and stack set (and, in
    the tags own_variant_sets names, its own variant set)."""
    for tag in tags:
        for package in range(10):
            specs = [
                spec(
                    f"{tag} {package} {n}",
                    versions=[f"{package}.{n}.{tag[-2:]}"],
                    stacks=[f"{tag}-{package}-{n}", "root"],
                    **({"variants": [f"opt={package}-{n}"]} if tag in own_variant_sets else {}),
                )
                for n in range(5)
            ]
            write_page(root, f"package-{package}", tag, specs)


def pruning_work(monkeypatch, inputs, db):
    """SQLite's virtual machine steps (to the hundred) of the pruning of a build of inputs bringing db up to date."""
    steps = [0]

    def counted(conn, *args, **kwargs):
        conn.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1), 100)
        try:
            return prune_orphans(conn, *args, **kwargs)
        finally:
            conn.set_progress_handler(None, 0)

    with monkeypatch.context() as patched:
        patched.setattr(maintenance, "prune_orphans", counted)
        build(inputs, db)
    return steps[0] * 100


def test_removing_a_tag_prunes_what_the_tag_had_not_the_history(tmp_path, monkeypatch):
    """Pruning after a tag goes looks at the rows the tag's rows referred to: ten times the history leaves its
    work as it was. It was a scan of every spec and listing, and for each stack set gone, of every listing
    (removing a tag of the 100-tag spread history: 28 s); for each variant set gone, of every configuration."""
    gone = "develop-2025-02-01"
    work = {}
    for size in (1, 10):
        site = tmp_path / f"site-{size}"
        write_history(site, [f"develop-2025-01-{day:02d}" for day in range(1, size + 1)] + [gone], [gone])
        db = tmp_path / f"cache-{size}.db"
        build([str(site)], db)
        shutil.rmtree(site / "_cache" / gone)
        work[size] = pruning_work(monkeypatch, [str(site)], db)
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT count(*) FROM stack_sets WHERE stacks LIKE ?", (f"%{gone}%",)).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM specs").fetchone() == (50 * size,)
        conn.close()
    assert 0 < work[10] <= 1.2 * work[1]


def test_removing_a_tag_built_from_its_index_prunes_what_the_tag_had_not_the_history(tmp_path, monkeypatch):
    """Likewise for tags built from build-cache indexes, whose edges go with their specs. Every edge refers to
    its dependency kind, with no index on that column: whether the kinds were still used was read from every
    edge of the history (3 s in the history built from indexes, 22.8M edges), now from the count of edges kept
    per kind."""
    from test_dependents import build_tags, library_tag

    work = {}
    for size in (1, 10):
        tags = {f"v{n}": library_tag(f"v{n}", 60, 400) for n in range(size)} | {"gone": library_tag("gone", 60, 40)}
        db = build_tags(tmp_path / f"history-{size}", tags)
        kept = [f"{tag}={tmp_path / f'history-{size}' / tag}" for tag in tags if tag != "gone"]
        work[size] = pruning_work(monkeypatch, kept, db)
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT count(*) FROM tags WHERE name = 'gone'").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM spec_dependencies").fetchone()[0] > 1500 * size
        conn.close()
    assert 0 < work[10] <= 1.2 * work[1]


@pytest.mark.parametrize("index", schema.FULL_TEXT)
def test_a_builds_new_rows_are_indexed_from_their_ids_whatever_the_statistics(tmp_path, index):
    """The full-text index reads a build's new rows (a full build's: every row) from the first new id on. With
    the statistics of the spread history (84 listings per stack set), SQLite went over every stack set instead,
    through listings_by_stack_set: 1.5 s instead of 0.1 s for a tag."""
    db = tmp_path / "cache.db"
    build([str(SITE)], db)
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM sqlite_stat1 WHERE tbl IN ('listings', 'stack_sets')")
    conn.executemany(
        "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES (?, ?, ?)",
        [
            ("listings", "listings_by_stack_set", "3276041 84"),
            ("listings", "sqlite_autoindex_listings_1", "3276041 12 1"),
            ("stack_sets", "sqlite_autoindex_stack_sets_1", "39018 1"),
        ],
    )
    conn.commit()
    conn.close()
    conn = sqlite3.connect(db)  # statistics are read with the schema
    plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {maintenance.new_rows_text(index)}", (1,))]
    assert plan[0] == "SEARCH new USING INTEGER PRIMARY KEY (rowid>?)", plan
