"""What the public can do to a served cache.db: hostile input is answered, never a 500; nothing writes."""

import hashlib

import pytest
from datasette.app import Datasette

from spack_cache_db import describe

pytestmark = pytest.mark.asyncio

METADATA = describe.build_metadata()
QUERIES = METADATA["databases"]["cache"]["queries"]
RAW_HOSTILE = ["%ff%fe%fd", "%c3%28", "%ed%a0%80", "%00", "%e2%82", "x%80y"]


@pytest.fixture(scope="module")
def ds(cache_db):
    return Datasette(immutables=[str(cache_db)], metadata=METADATA)


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_a_10000_character_parameter_is_answered(ds, name):
    for param in QUERIES[name]["params"]:
        response = await ds.client.get(f"/cache/{name}.json?{param}={'a' * 10000}")
        assert response.status_code == 200, (name, param, response.text[:300])


@pytest.mark.parametrize("raw", RAW_HOSTILE)
@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_non_utf8_percent_escapes_are_answered(ds, name, raw):
    query = "&".join(f"{param}={raw}" for param in QUERIES[name]["params"])
    response = await ds.client.get(f"/cache/{name}.json?{query}")
    assert response.status_code == 200, (name, raw, response.text[:300])


@pytest.mark.parametrize(
    "path",
    [
        "/cache/binaries.json?_search=" + "%22" * 3 + "NEAR(",
        "/cache/binaries.json?_search=%ff%fe",
        "/cache/binaries.json?_search=" + "x" * 10000,
        "/cache/binaries.json?_search=-- ; DROP TABLE specs",
        "/cache/binaries.json?package=%27%3B+DROP+TABLE+specs%3B+--",
        "/cache/listing_texts.json?_search=*",
        "/cache/packages.json?_search=%22%28",
    ],
)
async def test_hostile_table_requests_are_answered(ds, path):
    response = await ds.client.get(path)
    assert response.status_code in (200, 400), (path, response.text[:300])
    assert response.status_code == 200 or "error" in response.json()


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM specs",
        "DROP TABLE specs",
        "UPDATE tags SET name = 'x'",
        "INSERT INTO problems (path, field, message, severity) VALUES ('a', 'b', 'c', 'warning')",
        "PRAGMA journal_mode = WAL",
        "ATTACH DATABASE '/tmp/x.db' AS x",
        "select 1; DELETE FROM specs",
    ],
)
async def test_nothing_writes_to_the_database_through_the_web(ds, cache_db, sql):
    before = digest(cache_db)
    for method in ("get", "post"):
        response = await getattr(ds.client, method)("/cache.json", params={"sql": sql})
        assert response.status_code in (400, 403, 405), (method, sql, response.status_code)
    assert digest(cache_db) == before
    rows = (await ds.client.get("/cache.json?sql=select+count(*)+from+specs&_shape=array")).json()
    assert rows == [{"count(*)": 613}]
