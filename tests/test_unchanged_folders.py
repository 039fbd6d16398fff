"""A build onto an earlier one does not list again the folders of files that did not change since that build
listed them, and still finds every file added, removed or changed in them."""

import os
import random
import shutil
import sqlite3
import time
from types import SimpleNamespace

import pytest
from paths import SITE
from test_incremental import canonical, full_build

from spack_cache_db import build as build_module
from spack_cache_db.build import build, find_page_inputs
from spack_cache_db.read import files, inputs, pages
from spack_cache_db.read.pages import find_inputs

PAGE = ("_cache", "develop", "bolt")  # a folder of one page


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(SITE, site)
    return site


@pytest.fixture
def settled(monkeypatch):
    """Folders count as settled once listed: the tests' folders were all made just before."""
    monkeypatch.setattr(pages, "RECENT_NS", 0)


@pytest.fixture
def listed(monkeypatch, site):
    """The folders of the site the build lists, as the walk names them."""
    folders, scandir = [], os.scandir

    def listing(path):
        if os.fspath(path).startswith(str(site)):
            folders.append(os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(pages.os, "scandir", listing)
    return folders


def folder_rows(db):
    """{path: whether its folder's listing was recorded} of the files the build recorded."""
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT path, folder_entries IS NOT NULL FROM sources ORDER BY path"))


def notes(site, *names):
    """A folder of files that are not pages, beside _cache (where any file must be a page)."""
    folder = site / "notes"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text("not a page")
    return folder


def change_later(folder, change):
    """Make the change once the file system's clock has moved on from the folder's change time (its tick is a
    few milliseconds), and check that the folder's change time did change: otherwise the test tests nothing."""
    before = os.stat(folder).st_ctime_ns
    time.sleep(0.05)
    change()
    assert os.stat(folder).st_ctime_ns != before


def test_an_unchanged_rebuild_lists_only_the_folders_that_hold_folders(site, tmp_path, settled, listed):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    assert all(folder_rows(db).values()) and len(folder_rows(db)) == 24
    listed.clear()
    summary = build([str(site)], db)
    assert summary.up_to_date and summary.pages_unchanged == 24
    holding_folders = [str(site), str(site / "_cache"), *(str(tag) for tag in sorted((site / "_cache").iterdir()))]
    assert sorted(listed) == sorted(holding_folders)


def test_the_files_found_are_those_a_walk_of_every_folder_finds(site, tmp_path, settled):
    db = tmp_path / "cache.db"
    notes(site, "a.txt", "b.txt")
    build([str(site)], db)
    arguments = inputs.classify([str(site)])
    found = find_page_inputs(arguments, build_module._existing_sources(db))
    assert found == find_inputs(arguments.pages)
    assert len(found.files) == 26 and all(source.listing is not None for source in found.files)


def test_a_file_added_to_an_unchanged_folder_is_read(site, tmp_path, settled):
    db = tmp_path / "cache.db"
    folder = notes(site, "a.txt")
    build([str(site)], db)
    change_later(folder, lambda: notes(site, "b.txt"))
    summary = build([str(site)], db)
    assert summary.pages_unchanged == 25
    assert str(folder / "b.txt") in folder_rows(db)


def test_a_page_removed_from_an_unchanged_folder_is_removed(site, tmp_path, settled):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    folder = site.joinpath(*PAGE)
    change_later(folder, lambda: (folder / "specs.md").unlink())
    summary = build([str(site)], db)
    assert (summary.pages_removed, summary.pages_unchanged) == (1, 23)
    assert canonical(db) == full_build(site, tmp_path)


def test_a_folder_put_in_place_of_another_is_listed(site, tmp_path, settled):
    db = tmp_path / "cache.db"
    folder = notes(site, "a.txt")
    build([str(site)], db)
    copy = folder.with_name("copy")
    shutil.copytree(folder, copy)
    (copy / "b.txt").write_text("not a page")
    time.sleep(0.05)
    os.rename(folder, folder.with_name("old"))
    os.rename(copy, folder)
    shutil.rmtree(folder.with_name("old"))
    build([str(site)], db)
    assert str(folder / "b.txt") in folder_rows(db)
    assert canonical(db) == full_build(site, tmp_path)


def test_a_page_changed_in_an_unchanged_folder_is_read_again(site, tmp_path, settled):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    page = site.joinpath(*PAGE, "specs.md")
    ctime = os.stat(page.parent).st_ctime_ns
    page.write_text(page.read_text().replace('"2.0"', '"2.0.1"'))
    assert os.stat(page.parent).st_ctime_ns == ctime  # written in place: the folder is as it was
    summary = build([str(site)], db)
    assert (summary.pages_read, summary.pages_unchanged) == (1, 23)
    assert canonical(db) == full_build(site, tmp_path)


def test_a_folder_whose_files_were_not_all_recorded_is_listed(site, tmp_path, settled, listed):
    """With --tag 'v*' the develop tag's page is not read, so not recorded; the file beside it is (a page that
    cannot be read, with --keep-going). The next build, of every tag, must find the page all the same."""
    db = tmp_path / "cache.db"
    folder = site.joinpath(*PAGE)
    (folder / "notes.txt").write_text("not a page")
    build([str(site)], db, tags=("v*",), keep_going=True)
    assert str(folder / "notes.txt") in folder_rows(db) and str(folder / "specs.md") not in folder_rows(db)
    listed.clear()
    summary = build([str(site)], db, keep_going=True)
    assert str(folder) in listed
    assert str(folder / "specs.md") in folder_rows(db) and summary.pages_read >= 1


@pytest.fixture
def unsettled(monkeypatch):
    """Folders count as just changed for an hour: however slow the machine, the tests' folders are."""
    monkeypatch.setattr(pages, "RECENT_NS", 3600 * 10**9)


def test_folders_that_changed_just_before_are_not_recorded(site, tmp_path, unsettled):
    db = tmp_path / "cache.db"
    build([str(site)], db)
    assert not any(folder_rows(db).values())


@pytest.mark.parametrize("other", ["folder", "link", "fifo"])
def test_a_folder_of_anything_but_regular_files_is_not_recorded(site, tmp_path, settled, other):
    folder = notes(site, "a.txt")
    {
        "folder": lambda: (folder / "more").mkdir(),
        "link": lambda: (folder / "b.txt").symlink_to(folder / "a.txt"),
        "fifo": lambda: os.mkfifo(folder / "pipe"),
    }[other]()
    db = tmp_path / "cache.db"
    build([str(site)], db)
    in_notes = {path: recorded for path, recorded in folder_rows(db).items() if path.startswith(str(folder))}
    others = {path: recorded for path, recorded in folder_rows(db).items() if path not in in_notes}
    assert str(folder / "a.txt") in in_notes and not any(in_notes.values())
    assert len(others) == 24 and all(others.values())


def test_folders_settled_since_an_earlier_build_are_recorded_by_the_next_that_writes(
    site, tmp_path, monkeypatch, listed, unsettled
):
    db = tmp_path / "cache.db"
    build([str(site)], db)  # every folder just made: none recorded
    monkeypatch.setattr(pages, "RECENT_NS", 0)
    assert build([str(site)], db).up_to_date  # nothing else to write: nothing written
    assert not any(folder_rows(db).values())
    site.joinpath(*PAGE, "specs.md").touch()
    build([str(site)], db)
    assert all(folder_rows(db).values())
    listed.clear()
    build([str(site)], db)
    assert str(site.joinpath(*PAGE)) not in listed and len(listed) == 2 + len(os.listdir(site / "_cache"))


def test_a_folder_whose_files_were_recorded_in_different_listings_is_listed(site, tmp_path, settled, listed):
    db = tmp_path / "cache.db"
    folder = notes(site, "a.txt", "b.txt")
    build([str(site)], db)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE sources SET folder_ctime_ns = folder_ctime_ns - 1 WHERE path = ?", (str(folder / "b.txt"),)
        )
    listed.clear()
    build([str(site)], db)
    assert listed.count(str(folder)) == 1


def test_builds_between_changes_of_every_kind_record_the_files_a_full_walk_finds(site, tmp_path, settled):
    """Twenty changes, each followed by a build onto the last one: what it recorded is what a walk of every
    folder finds, and the last database is the full build's."""
    db, choose = tmp_path / "cache.db", random.Random(19)
    folders = [notes(site, "a.txt").with_name(f"notes{number}") for number in range(3)]
    pages_left = sorted(site.glob("_cache/*/*/specs.md"))

    def add():
        folder = choose.choice(folders)
        folder.mkdir(exist_ok=True)
        (folder / f"{choose.randrange(1000)}.txt").write_text("not a page")

    def remove():
        files = sorted(site.glob("notes*/*.txt"))
        if files:
            choose.choice(files).unlink()

    def rewrite():
        files = sorted(site.glob("notes*/*.txt"))
        if files:
            choose.choice(files).write_text("still not a page")

    def remove_page():
        pages_left.pop(choose.randrange(len(pages_left))).unlink()

    def replace_folder():
        folder = choose.choice([folder for folder in folders if folder.exists()] or folders)
        copy = folder.with_name("copy")
        shutil.copytree(folder, copy) if folder.exists() else copy.mkdir()
        (copy / "new.txt").write_text("not a page")
        shutil.rmtree(folder, ignore_errors=True)
        os.rename(copy, folder)

    build([str(site)], db)
    for _ in range(20):
        time.sleep(0.02)
        choose.choice([add, remove, rewrite, remove_page, replace_folder])()
        build([str(site)], db)
        with sqlite3.connect(db) as conn:
            recorded = {row[0] for row in conn.execute("SELECT path FROM sources")}
        assert recorded == {source.path for source in find_inputs([str(site)]).files}
    assert canonical(db) == full_build(site, tmp_path)


def test_a_folder_listing_past_64_bits_is_stored_and_compared_as_sqlite_keeps_it(tmp_path):
    folder = SimpleNamespace(st_size=4096, st_mtime_ns=1, st_ctime_ns=2**63 + 1, st_ino=2**64 - 1)
    listing = files.folder_listing(folder, 3)
    assert listing == (-(2**63) + 1, -1, 3) and all(-(2**63) <= value < 2**63 for value in listing)
    with sqlite3.connect(tmp_path / "listing.db") as conn:
        stored = conn.execute("SELECT ?, ?, ?", listing).fetchone()
    assert files.same_listing(folder, files.FolderListing(*stored))
    assert not files.same_listing(SimpleNamespace(**{**vars(folder), "st_ino": 2**64 - 2}), listing)


def test_a_folder_holding_a_file_the_build_cannot_record_is_listed_again(site, tmp_path, settled, listed):
    folder = notes(site, "a.txt")
    (folder / os.fsdecode(b"\xff.txt")).write_text("not a page")  # a name that is not UTF-8: a problem, not a source
    db = tmp_path / "cache.db"
    assert len(build([str(site)], db, keep_going=True).rejected) == 1
    listed.clear()
    build([str(site)], db, keep_going=True)
    assert listed.count(str(folder)) == 1
