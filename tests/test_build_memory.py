"""What the builder keeps in memory is bounded by one tag, not by the history: in the spread shape listings
(configuration x stack set) are about one per binary, and a map of them held for the whole build (3.28M
entries on the 100-tag spread history) took the build past 1 GiB. The listings it queued are remembered from
batch to batch up to a fixed number (LISTINGS_REMEMBERED), set here to one tag's. Checked by the size of
every container the loader holds once the history is loaded, never by timing or by the process's memory."""

import sqlite3

import pytest
from pagemaker import spec, write_page

from spack_cache_db import build as build_module
from spack_cache_db.build import build
from spack_cache_db.db import load

TAGS = [f"develop-2025-0{month}-01" for month in range(1, 7)]
PACKAGES = ("alpha", "beta", "gamma", "delta")
SPECS_PER_PAGE = 12  # a tag has more listings (48) than the loader has tables to keep a dict of (35)
LISTINGS_PER_TAG = SPECS_PER_PAGE * len(PACKAGES)


def write_spread_history(site, tags):
    """The same specs in every tag (as in weekly snapshots), each tag's binaries in stacks of their own: every
    tag adds as many listings as it has binaries, and no configuration."""
    for number, tag in enumerate(tags):
        for package in PACKAGES:
            specs = [
                spec(f"{package}/{n}", versions=[f"1.{n}"], stacks=["root", f"stack{number}", f"other{n % 2}"])
                for n in range(SPECS_PER_PAGE)
            ]
            write_page(site, package, tag, specs)


def container_sizes(value, name):
    """(name, number of entries) of value and of every dict, set or list inside its dicts."""
    if isinstance(value, dict | set | list):
        yield name, len(value)
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from container_sizes(inner, f"{name}[{key!r}]")


@pytest.fixture
def loader_sizes(monkeypatch):
    """Run a build with a batch per page, recording {container: entries} of the loader once every page is read."""
    sizes = {}
    read_tags_yaml = load.load_tags_yaml

    def measure_then_load(loader, tags):
        sizes.update(container_sizes(vars(loader), "loader"))
        return read_tags_yaml(loader, tags)

    monkeypatch.setattr(build_module, "FLUSH_EVERY", 1)
    monkeypatch.setattr(load, "LISTINGS_REMEMBERED", LISTINGS_PER_TAG)
    monkeypatch.setattr(load, "load_tags_yaml", measure_then_load)
    return sizes


def listings_per_tag(db):
    conn = sqlite3.connect(db)
    try:
        total = conn.execute("SELECT count(*) FROM listings").fetchone()[0]
        (largest,) = conn.execute(
            "SELECT max(n) FROM (SELECT count(DISTINCT listing_id) AS n FROM page_specs"
            " JOIN pages ON pages.id = page_id GROUP BY tag_id)"
        ).fetchone()
        return total, largest
    finally:
        conn.close()


def assert_bounded_by_one_tag(sizes, db):
    total, one_tag = listings_per_tag(db)
    assert total == len(TAGS) * one_tag == len(TAGS) * LISTINGS_PER_TAG  # many more listings than any tag
    largest = max(sizes, key=sizes.get)
    assert sizes[largest] <= one_tag, f"{largest} holds {sizes[largest]} entries, the history's {total} listings"


def test_a_full_build_keeps_no_more_than_one_tag(tmp_path, loader_sizes):
    site, db = tmp_path / "site", tmp_path / "cache.db"
    write_spread_history(site, TAGS)
    build([str(site)], db)
    assert_bounded_by_one_tag(loader_sizes, db)


def test_adding_a_tag_reads_no_map_of_the_history(tmp_path, loader_sizes):
    site, db = tmp_path / "site", tmp_path / "cache.db"
    write_spread_history(site, TAGS[:-1])
    build([str(site)], db)
    loader_sizes.clear()
    write_spread_history(site, TAGS)  # the same pages again, and the last tag
    build([str(site)], db)
    assert_bounded_by_one_tag(loader_sizes, db)


def test_the_stack_lists_checked_are_remembered_for_one_tag(tmp_path, monkeypatch):
    """Each tag of this history has its own two lists of stacks, as binaries of the spread shape have lists of
    their own: the reader's memory of lists it checked holds one tag's, not the history's."""
    remembered = []

    class Measured(build_module.Configurations):
        def new_tag(self):
            remembered.append(len(self.stacks))
            super().new_tag()

    monkeypatch.setattr(build_module, "Configurations", Measured)
    site = tmp_path / "site"
    write_spread_history(site, TAGS)
    build([str(site)], tmp_path / "cache.db")
    assert remembered[1:] == [2] * (len(TAGS) - 1)  # each earlier tag's lists, then forgotten
