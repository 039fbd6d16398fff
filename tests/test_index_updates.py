"""Issue 22: an incremental build from build-cache indexes compares everything that reaches the database, the
mirror URLs included, and ends where a fresh build of the same inputs ends: every row of every table."""

import json
import os
import shutil
import sqlite3
from dataclasses import dataclass, field

from dump import every_row
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mirrors import sample_index, serving, subset, write_v2, write_v3

from spack_cache_db.build import build
from spack_cache_db.read import index_tags

INDEX = sample_index("8")
BINARIES = sorted(h for h, r in json.loads(INDEX)["database"]["installs"].items() if r["in_buildcache"])


@dataclass
class Index:
    binaries: tuple  # of hashes: the binaries the index lists
    layout: str  # v2 or v3
    moves: int = 0  # how often its mirror moved: its folder is named after it


@dataclass
class Site:
    """A listing and the mirrors it names, as a server would hold them: {tag: {label: Index}}."""

    root: object
    tags: dict = field(default_factory=dict)

    def write(self):
        """Write every mirror and the listing; returns the listing's path."""
        listing = {}
        for tag, indexes in sorted(self.tags.items()):
            listing[tag] = [{"label": label, "url": self._write(tag, label, index)} for label, index in indexes.items()]
        path = self.root / "cache_spack_io_index.json"
        path.write_text(json.dumps(listing))
        return path

    def _write(self, tag, label, index):
        folder = f"{tag}/{label}-{index.moves}"
        data = subset(INDEX, list(index.binaries))
        if index.layout == "v2":
            write_v2(self.root / folder, data)
            return folder
        return f"{folder}/{write_v3(self.root / folder, data)}"


def assert_incremental_is_fresh(site, db, tmp_path):
    listing = site.write()
    build([str(listing)], db)
    fresh = tmp_path / "fresh.db"
    fresh.unlink(missing_ok=True)
    build([str(listing)], fresh)
    assert every_row(db) == every_row(fresh)


def mirror_urls(db):
    conn = sqlite3.connect(db)
    try:
        return {
            "tags": conn.execute("SELECT name, mirror_url FROM tags ORDER BY name").fetchall(),
            "stacks": sorted(set(conn.execute("SELECT tag, stack, mirror_url FROM binary_stacks").fetchall())),
            "install": sorted({row[0].split("\n")[0] for row in conn.execute("SELECT install FROM binaries")}),
        }
    finally:
        conn.close()


def test_a_root_mirror_that_moved_with_the_same_content_is_named_anew(tmp_path):
    site = Site(tmp_path / "site", {"develop": {"root": Index(tuple(BINARIES), "v3")}})
    db = tmp_path / "cache.db"
    build([str(site.write())], db)
    site.tags["develop"]["root"].moves += 1
    summary = build([str(site.write())], db)
    assert not summary.up_to_date and summary.index_tags_read == ["develop"]
    moved = str(site.root / "develop" / "root-1")
    assert mirror_urls(db) == {
        "tags": [("develop", moved)],
        "stacks": [("develop", "root", moved)],
        "install": [f"spack mirror add develop {moved}"],
    }
    assert_incremental_is_fresh(site, db, tmp_path)


def test_a_stack_mirror_that_moved_is_named_anew_and_not_read_again(tmp_path, monkeypatch):
    site = Site(
        tmp_path / "site",
        {"develop": {"root": Index(tuple(BINARIES), "v2"), "e4s": Index(tuple(BINARIES[:2]), "v2")}},
    )
    db = tmp_path / "cache.db"
    build([str(site.write())], db)
    site.tags["develop"]["e4s"].moves += 1
    site.tags["develop"]["root"] = Index(tuple(BINARIES[1:]), "v2")  # the tag changed: its root is read again
    listing = site.write()
    read = []
    parse, listed = index_tags.read_indexes.parse_index, index_tags.read_indexes.listed_binaries
    monkeypatch.setattr(index_tags.read_indexes, "parse_index", lambda url, *a: read.append(url) or parse(url, *a))
    monkeypatch.setattr(index_tags.read_indexes, "listed_binaries", lambda url, *a: read.append(url) or listed(url, *a))
    build([str(listing)], db)
    monkeypatch.undo()
    assert read == [str(site.root / "develop" / "root-0" / "build_cache" / "index.json")]
    moved = str(site.root / "develop" / "e4s-1")
    assert ("develop", "e4s", moved) in mirror_urls(db)["stacks"]
    assert_incremental_is_fresh(site, db, tmp_path)


def test_a_snapshot_listed_by_another_index_on_its_mirror_is_read_again(tmp_path):
    """Its mirror moved to v3 in place, the same binaries: the listing names the blob, no longer the mirror whose
    v2 index the last build read. A snapshot never changes, but what the listing names did."""
    site = Site(tmp_path / "site", {"develop-2025-01-05": {"root": Index(tuple(BINARIES[:1]), "v2")}})
    db = tmp_path / "cache.db"
    build([str(site.write())], db)
    site.tags["develop-2025-01-05"]["root"] = Index(tuple(BINARIES[:1]), "v3")
    summary = build([str(site.write())], db)
    assert summary.index_tags_read == ["develop-2025-01-05"]
    assert_incremental_is_fresh(site, db, tmp_path)


# --- Any sequence of changes a server can make: the incremental build equals a fresh build ---------------------

TAGS = ("develop", "mine", "develop-2025-01-05", "v1.0.0")  # the last two are immutable: never rewritten in place
MUTABLE = TAGS[:2]
LABELS = ("root", "e4s", "ml")
SOME_BINARIES = st.lists(st.sampled_from(BINARIES), min_size=1, max_size=len(BINARIES), unique=True).map(
    lambda found: tuple(sorted(found))
)
INDEXES = st.builds(Index, SOME_BINARIES, st.sampled_from(["v2", "v3"]))
CHANGES = st.one_of(
    st.tuples(st.just("content"), st.sampled_from(MUTABLE), st.sampled_from(LABELS), INDEXES),
    st.tuples(st.just("move"), st.sampled_from(TAGS), st.sampled_from(LABELS)),
    st.tuples(st.just("add stack"), st.sampled_from(TAGS), st.sampled_from(LABELS[1:]), INDEXES),
    st.tuples(st.just("remove stack"), st.sampled_from(TAGS), st.sampled_from(LABELS[1:])),
    st.tuples(st.just("remove tag"), st.sampled_from(TAGS)),
    st.tuples(st.just("add tag"), st.sampled_from(TAGS), INDEXES),
)


def change(site, step):
    kind, tag, *rest = step
    indexes = site.tags.get(tag)
    if kind == "add tag" and indexes is None:
        site.tags[tag] = {"root": rest[0]}
    elif indexes is None:
        return
    elif kind == "remove tag":
        del site.tags[tag]
    elif kind == "content" and rest[0] in indexes:
        label, new = rest
        indexes[label] = Index(new.binaries, new.layout, indexes[label].moves)
    elif kind == "move" and rest[0] in indexes:
        indexes[rest[0]].moves += 1
    elif kind == "add stack" and rest[0] not in indexes:
        indexes[rest[0]] = rest[1]
    elif kind == "remove stack":
        indexes.pop(rest[0], None)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(st.dictionaries(st.sampled_from(TAGS), INDEXES, min_size=1), st.lists(CHANGES, min_size=1, max_size=3))
def test_any_changes_on_the_server_rebuild_to_what_a_fresh_build_gives(tmp_path_factory, first, steps):
    root = tmp_path_factory.mktemp("history")
    site = Site(root / "site", {tag: {"root": index} for tag, index in first.items()})
    db = root / "cache.db"
    build([str(site.write())], db)
    for step in steps:
        change(site, step)
        if not site.tags:
            continue
        assert_incremental_is_fresh(site, db, root)
    shutil.rmtree(root)


def test_an_index_without_a_content_address_keeps_the_validators_of_its_last_answer(tmp_path):
    """Touched on the server, the same bytes: the next build asks with the validators the server gives now."""
    index = tmp_path / "site" / "develop" / "index.json"
    index.parent.mkdir(parents=True)
    index.write_bytes(INDEX)
    db, fresh = tmp_path / "cache.db", tmp_path / "fresh.db"
    with serving(tmp_path / "site") as (base, _):
        build([f"develop={base}/develop/index.json"], db)
        later = index.stat().st_mtime + 100
        os.utime(index, (later, later))
        assert build([f"develop={base}/develop/index.json"], db).index_tags_read == ["develop"]
        build([f"develop={base}/develop/index.json"], fresh)
        assert build([f"develop={base}/develop/index.json"], db).up_to_date  # asked with them: 304
    assert every_row(db) == every_row(fresh)
