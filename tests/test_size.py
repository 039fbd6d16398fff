"""What a database is made of, so that it stays small without changing an answer: no index that nothing of
a database built from pages reads (specs by configuration is made only with dependency edges)."""

import shutil
import sqlite3

from mirrors import sample_index, write_v2
from paths import SEEDS, SITE

from spack_cache_db.build import build
from spack_cache_db.db import schema
from spack_cache_db.query import find
from spack_cache_db.web import describe

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
