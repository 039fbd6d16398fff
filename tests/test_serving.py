"""What the public can do to a served cache.db: hostile input is answered, never a 500; nothing writes."""

import asyncio
import hashlib
import html as html_module
import re
import urllib.parse

import pytest
import yaml
from datasette.app import Datasette
from pagemaker import spec, write_page
from watched import own_rise_from_now

from spack_cache_db.build import build
from spack_cache_db.web import describe

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


async def get_within(ds, path, seconds=20, **kwargs):
    """Datasette's answer, or a failed test when it takes longer than seconds."""
    return await asyncio.wait_for(ds.client.get(path, **kwargs), seconds)


@pytest.mark.parametrize(
    "sql",
    [
        "select printf('%.*c', 2000000000, 'x')",
        "select length(printf('%.*c', 100000000, 'x'))",
        "select length(zeroblob(100000000))",
        "select length(randomblob(100000000))",
        "select length(replace(hex(zeroblob(5000000)), '0', '0123456789'))",
        "select format('%2000000000d', 1)",
        "select printf('%.*c%.*c', 10, 'x', '99999999999', 'y')",
        "select printf('%-*s', -2000000000, 'x')",
        "select printf('%.3000000000s', zeroblob(10))",
    ],
)
async def test_a_statement_that_builds_a_huge_value_fails_fast(ds, sql):
    rise = own_rise_from_now()
    response = await get_within(ds, "/cache.json", params={"sql": sql}, seconds=3)
    assert response.status_code == 400, response.text[:300]
    assert response.json()["error"] == "string or blob too big"
    assert rise() < 200 * 2**20, "a value of at most 16 MB should have been built"


@pytest.mark.parametrize(
    "sql, expected",
    [
        ("select printf('%5.2f|%-4d|%s|%%|%.3c', 3.14159, 7, 'spack', 'z')", " 3.14|7   |spack|%|zzz"),
        ("select format('%*d', 6, 42)", "    42"),
        ("select printf('%.*c', 1000, 'x') = replace(hex(zeroblob(500)), '0', 'x')", 1),
        ("select printf('%,d and %q', 1234567, 'it''s')", "1,234,567 and it''s"),
        ("select printf(NULL)", None),
        ("select printf('%s')", ""),
    ],
)
async def test_printf_within_the_limits_answers_as_sqlite_does(ds, sql, expected):
    response = await get_within(ds, "/cache.json?_shape=arrays", params={"sql": sql})
    assert response.status_code == 200, response.text[:300]
    assert response.json()["rows"] == [[expected]]


async def test_a_statement_that_grows_a_value_row_by_row_stops_at_the_time_limit(ds):
    sql = "with recursive n(i) as (select 1 union all select i + 1 from n) select length(group_concat(printf('%.1000c', 'x'))) from n"
    rise = own_rise_from_now()
    response = await get_within(ds, "/cache.json", params={"sql": sql})
    assert response.status_code == 400
    assert "SQL query took too long" in response.json()["error"]
    assert rise() < 200 * 2**20


# Tag, stack and package names are plain names (the readers refuse others: tests/test_network.py); the characters
# they may carry that mean something in a URL must survive their links.
ODD_STACK = "e4s+rocm.6_x-y"
ODD_TAG = "odd+tag"


@pytest.fixture(scope="module")
def odd_names_db(tmp_path_factory):
    """A database whose names carry URL syntax: a stack, a tags.yaml tag, a package with +."""
    root = tmp_path_factory.mktemp("hostile") / "site"
    stacks = [ODD_STACK, "a+b.c", "100-tick_back", "root"]
    write_page(root, "g++", "develop", [spec("g++", stacks=stacks), spec("g++2", stacks=["root"])])
    (root / "_data").mkdir()
    (root / "_data" / "tags.yaml").write_text(
        yaml.safe_dump([{"name": "develop", "stacks": stacks}, {"name": ODD_TAG, "stacks": [ODD_STACK]}])
    )
    path = root.parent / "cache.db"
    build([str(root)], path)
    return path


def links_in(html):
    return re.findall(r'<a href="([^"]*)"', html)


async def follow(ds, page, href):
    """The page a relative link on page leads to."""
    target = urllib.parse.urlsplit(urllib.parse.urljoin("http://localhost" + page, html_module.unescape(href)))
    return await get_within(ds, f"{target.path}?{target.query}")


@pytest.mark.parametrize("tag", ["develop", ODD_TAG])
async def test_names_survive_their_links(odd_names_db, tag):
    ds = Datasette(immutables=[str(odd_names_db)], metadata=METADATA)
    page = "/cache/stacks_in_tag?" + urllib.parse.urlencode({"tag": tag})
    response = await get_within(ds, page)
    assert response.status_code == 200
    rows = (await get_within(ds, page.replace("stacks_in_tag", "stacks_in_tag.json") + "&_shape=objects")).json()[
        "rows"
    ]
    stacks = [row["stack"] for row in rows]
    assert ODD_STACK in stacks
    followed = [link for link in links_in(response.text) if link.startswith("stack_packages?")]
    assert len(followed) == len(stacks)
    for stack, href in zip(stacks, followed, strict=True):
        target = urllib.parse.parse_qs(urllib.parse.urlsplit(html_module.unescape(href)).query)
        assert target == {"tag": [tag], "stack": [stack]}, href
        assert (await follow(ds, page, href)).status_code == 200


async def test_a_package_name_with_a_plus_survives_its_links(odd_names_db):
    ds = Datasette(immutables=[str(odd_names_db)], metadata=METADATA)
    page = "/cache/find_binaries?package=g%2B%2B"
    response = await get_within(ds, page)
    versions = next(link for link in links_in(response.text) if link.startswith("package_versions?"))
    assert versions == "package_versions?package=g%2B%2B"
    followed = await follow(ds, page, versions)
    assert followed.status_code == 200 and "1.0" in followed.text
