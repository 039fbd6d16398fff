"""A database an older version of spack-cache-db built, served by this one: what its schema lacks fails, and
every page that fails for it says so, and how to mend it, rather than answer 500 or an SQL error alone."""

import html
import shutil
import sqlite3

import pytest
from datasette.app import Datasette

from spack_cache_db.db.schema import SCHEMA_VERSION


@pytest.fixture
def outdated_db(cache_db, tmp_path):
    """cache.db as the last schema version built it: without the view it added."""
    path = tmp_path / "cache.db"
    shutil.copy(cache_db, path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP VIEW tag_before")
        conn.execute("UPDATE build_info SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION - 1),))
    return path


def said(path):
    return (
        f"{path} was built by another version of spack-cache-db (schema {SCHEMA_VERSION - 1}; this one reads"
        f" {SCHEMA_VERSION}), and pages that read what its schema lacks fail: build it again (python build_db.py"
        f" build YOUR INPUTS -o {path})"
    )


@pytest.mark.asyncio
async def test_an_outdated_database_is_served_saying_what_to_do_where_it_fails(outdated_db, capsys):
    ds = Datasette(immutables=[str(outdated_db)])
    await ds.invoke_startup()
    assert f"spack-cache-db: {said(outdated_db)}" in capsys.readouterr().err
    failed = await ds.client.get("/cache/tag_diff?to_tag=develop-2025-04-20")  # the page's own lookups fail
    assert failed.status_code == 503 and said(outdated_db) in html.unescape(failed.text)
    asked = await ds.client.get("/cache/tag_diff?from_tag=develop&to_tag=develop")  # the question's SQL fails
    assert "no such table: tag_before" in asked.text and said(outdated_db) in html.unescape(asked.text)
    as_json = (await ds.client.get("/cache/tag_diff.json?from_tag=develop&to_tag=develop")).json()
    assert as_json["messages"] == [said(outdated_db)]
    assert (await ds.client.get("/cache/binaries")).status_code == 200  # what its schema has still answers


@pytest.mark.asyncio
async def test_a_database_this_version_built_says_nothing_of_it(cache_db, capsys):
    ds = Datasette(immutables=[str(cache_db)])
    await ds.invoke_startup()
    assert "another version" not in capsys.readouterr().err
    assert (await ds.client.get("/cache/tag_diff?to_tag=develop-2025-04-20")).status_code == 200


@pytest.mark.asyncio
async def test_what_fails_for_another_reason_there_is_not_blamed_on_its_schema(outdated_db):
    ds = Datasette(immutables=[str(outdated_db)])
    await ds.invoke_startup()  # with the usual time limit: its own queries are not the ones cut short
    response = await ds.client.get("/cache/binaries?_search=linux&_sort=package&_timelimit=1")
    assert response.status_code == 400 and "another version" not in html.unescape(response.text)
