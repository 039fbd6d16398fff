"""What a database is made of, so that it stays small without changing an answer: no index that nothing of
a database built from pages reads (specs by configuration is made only with dependency edges), no table of
token counts behind the full-text search (columnsize=0), and every search finding exactly the listings whose
text holds each of its words."""

import re
import shutil
import sqlite3

import pytest
from datasette.utils import escape_fts
from mirrors import sample_index, write_v2
from paths import SEEDS, SITE

from spack_cache_db.build import build
from spack_cache_db.db import schema
from spack_cache_db.query import find
from spack_cache_db.web import describe

# The searches the README and the metadata offer as examples, then words of each kind a listing has.
OFFERED = ["hdf5 mpi", "cuda_arch=80", "neoverse_v2 gcc", "e4s-oneapi", 'hdf5 mpi "neoverse_v2"', "mpi"]


DEPENDENTS = describe.read_query(describe.QUERIES / "dependents.sql").sql


def objects(db):
    return {name for (name,) in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}


def test_a_database_from_pages_has_no_index_only_edges_need(cache_db):
    assert not objects(cache_db) & set(schema.EDGE_INDEXES)
    assert not sqlite3.connect(cache_db).execute("SELECT 1 FROM spec_dependencies").fetchone()


def test_a_database_with_edges_has_the_indexes_they_need(index_db):
    assert set(schema.EDGE_INDEXES) <= objects(index_db)


def test_edges_added_to_a_database_from_pages_bring_their_indexes(tmp_path):
    """An incremental build that adds a tag from its indexes makes the indexes a full build would have."""
    db = tmp_path / "cache.db"
    build([SITE, SEEDS], db)
    write_v2(tmp_path / "v8", sample_index("8"))
    build([SITE, SEEDS, f"develop={tmp_path / 'v8'}"], db)
    assert set(schema.EDGE_INDEXES) <= objects(db)


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
    """A database built from pages has no edges, so no index of specs by configuration: the questions that
    look specs up by configuration (what a ^dependency matches, what links against a package) must not read
    specs at all there. Twenty thousand more specs must not change their work."""
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
                conn, lambda conn=conn: conn.execute(DEPENDENTS, {"package": package, "hash": "", "tag": ""}).fetchall()
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
