"""What a database is made of, so that it stays small without changing an answer or a build's speed: no table
of token counts behind the full-text search (columnsize=0), every search finding exactly the listings whose
text holds each of its words, and the index that deleting a configuration needs."""

import re
import shutil
import sqlite3

import pytest
from datasette.utils import escape_fts

from spack_cache_db.db import schema
from spack_cache_db.query import canned, find

# The searches the README and the metadata offer as examples, then words of each kind a listing has.
OFFERED = ["hdf5 mpi", "cuda_arch=80", "neoverse_v2 gcc", "e4s-oneapi", 'hdf5 mpi "neoverse_v2"', "mpi"]


DEPENDENTS = canned.named("dependents").sql


def objects(db):
    return {name for (name,) in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}


@pytest.mark.parametrize("db", ["cache_db", "index_db"])
def test_deleting_a_configuration_finds_its_specs_by_index(request, db):
    """Pruning a configuration (a page changed, a tag gone) makes SQLite look for the specs that still refer
    to it: without an index of specs by configuration that is a scan of every spec for each configuration
    (a tag of a 5M-binary history: 49 s). Saving that index in databases without edges cost this."""
    conn = sqlite3.connect(request.getfixturevalue(db))
    conn.execute("PRAGMA foreign_keys = ON")
    names = {
        root: name for name, root in conn.execute("SELECT name, rootpage FROM sqlite_master WHERE tbl_name = 'specs'")
    }
    program = conn.execute("EXPLAIN DELETE FROM configurations WHERE id = 1").fetchall()
    opened = {names.get(p2) for _, opcode, _, p2, *_ in program if opcode == "OpenRead"}
    assert "specs_by_configuration" in opened and "specs" not in opened


@pytest.mark.parametrize("db", ["cache_db", "index_db"])
def test_a_database_is_made_of_pages_of_the_size_chosen(request, db):
    """schema.PAGE_SIZE, set before the first table is made (and kept by VACUUM INTO): SQLite's default took 0.6
    bytes per binary more in the usual history."""
    conn = sqlite3.connect(request.getfixturevalue(db))
    assert conn.execute("PRAGMA page_size").fetchone()[0] == schema.PAGE_SIZE != 4096


def test_full_text_indexes_keep_no_token_counts(cache_db):
    """Only ranking reads a row's token counts (the _docsize table): in the spread shape they were 57 MB."""
    assert not {f"{index}_docsize" for index in schema.FULL_TEXT} & objects(cache_db)


def steps(conn, question):
    """SQLite's virtual machine steps (to the hundred) that question() takes."""
    counted = [0]
    conn.set_progress_handler(lambda: counted.__setitem__(0, counted[0] + 1), 100)
    question()
    conn.set_progress_handler(None, 0)
    return counted[0] * 100


def test_dependency_questions_on_pages_read_no_spec_by_configuration(cache_db, tmp_path):
    """A database built from pages has no edges: the questions that look specs up by configuration (what a
    ^dependency matches, what links against a package) must not read specs at all there. Twenty thousand more
    specs must not change their work."""
    grown = tmp_path / "cache.db"
    shutil.copy(cache_db, grown)
    conn = sqlite3.connect(grown)
    (configuration_id,) = conn.execute("SELECT id FROM configurations LIMIT 1").fetchone()
    conn.executemany(
        "INSERT INTO specs (hash, configuration_id, size, external) VALUES (?, ?, NULL, 0)",
        [(f"{n:032d}".translate(str.maketrans("0123456789", "abcdefghij")), configuration_id) for n in range(20000)],
    )
    conn.commit()
    (package,) = conn.execute("SELECT name FROM packages ORDER BY name LIMIT 1").fetchone()
    work = {}
    for db in (cache_db, grown):
        conn = find.open_database(db)
        work[db] = (
            steps(conn, lambda conn=conn: find.find(conn, f"^{package}")),
            steps(conn, lambda conn=conn: find.find(conn, f"hdf5 ^{package}")),
            steps(
                conn,
                lambda conn=conn: conn.execute(
                    DEPENDENTS, {"package": package, "hash": "", "tag": "", "after": ""}
                ).fetchall(),
            ),
        )
    assert work[grown] == work[cache_db]


def tokens(text):
    """FTS5's unicode61 tokens of ASCII text: runs of letters and digits, case folded."""
    return re.findall(r"[0-9a-z]+", (text or "").lower())


def holds(column_tokens, phrase):
    return any(
        column[start : start + len(phrase)] == phrase
        for column in column_tokens
        for start in range(len(column) - len(phrase) + 1)
    )


def expected_listings(texts, search):
    """The listings whose text has every word of search (as Datasette escapes it) as consecutive tokens of
    one column: what a full-text search must find."""
    phrases = [tokens(word) for word in re.findall(r'"([^"]*)"', escape_fts(search))]
    return {listing for listing, columns in texts.items() if all(holds(columns, p) for p in phrases if p)}


def searches(conn):
    """The offered searches, and each column's value of a few listings as a word (x86_64_v3, gcc@=13.2.0,
    ["e4s", "root"], ...), alone and with the package."""
    found = list(OFFERED)
    columns = schema.full_text_columns("listings_fts")
    for row in conn.execute(f"SELECT {', '.join(columns)} FROM listing_texts ORDER BY id LIMIT 3"):
        values = dict(zip(columns, row, strict=True))
        found += [str(value) for value in values.values() if value]
        found += [f"{values['package']} {values[column]}" for column in ("target", "os", "compiler")]
    return found


@pytest.mark.parametrize("db", ["cache_db", "index_db"])
def test_every_search_finds_the_listings_that_hold_its_words(request, db):
    """Full-text options that keep less (detail=column or none: no phrases such as x86_64_v3; another
    tokenizer; prefixes) must not change which binaries a search finds."""
    conn = sqlite3.connect(request.getfixturevalue(db))
    conn.create_function("escape_fts", 1, escape_fts)  # as Datasette registers it
    columns = schema.full_text_columns("listings_fts")
    texts = {
        row[0]: [tokens(value) for value in row[1:]]
        for row in conn.execute(f"SELECT id, {', '.join(columns)} FROM listing_texts")
    }
    found_any = 0
    for search in searches(conn):
        found = {
            listing
            for (listing,) in conn.execute(
                "SELECT rowid FROM listings_fts WHERE listings_fts MATCH escape_fts(?)", [search]
            )
        }
        assert found == expected_listings(texts, search), search
        found_any += bool(found)
    assert found_any >= 10
