"""Odd URLs that Datasette 0.65 answers with a 500: the plugin answers a 400 that says what was wrong, and
leaves no traceback in the server's log."""

import asyncio
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import pytest
import pytest_asyncio
from datasette.app import Datasette
from datasette.views.base import DatasetteError
from datasette.views.table import TableView
from datasette_server import datasette

from spack_cache_db.web import describe

BINARY_COLUMNS = "tag, package, version, version_rank, hash, compiler, os, platform, target, variants, stacks"
TOO_SLOW = "(select count(*) from specs a, specs b, specs c) > 0"  # 613³ rows: far past 200 ms
EXPECTED_A_LIST = 'expected a JSON list of values such as ["a", "b"], or values separated by commas'
EXPECTED_A_THROUGH = '_through: expected JSON such as {"table": "...", "column": "...", "value": "..."}'
NUL = "contains a NUL character (%00)"
BOTH_SORTS = "_sort and _sort_desc: expected one of them, not both (a page is sorted by one column)"
PAST_64_BITS = "_next: expected the place to go on from, as the page's next link gives it, within SQLite's integers"

ODD_URLS = [
    ("/cache/binaries?_sort=nosuch", f'_sort: binaries has no column "nosuch"; its columns are {BINARY_COLUMNS}'),
    ("/cache/binaries.json?_sort_desc=nosuch", '_sort_desc: binaries has no column "nosuch"'),
    ("/cache/tags?_sort=nosuch", '_sort: tags has no column "nosuch"; its columns are id, name, kind'),
    ("/cache/binaries?_sort=nosuch&_sort_desc=tag", '_sort: binaries has no column "nosuch"'),
    ("/cache/binaries?_sort_desc=%00", f"_sort_desc: {NUL}"),
    ("/cache/binaries?_facet=%00", f"_facet: {NUL}"),
    ("/cache/binaries.json?_facet_array=%00", f"_facet_array: {NUL}"),
    ("/cache/binaries?_where=%00", f"_where: {NUL}"),
    ("/cache/binaries?%00=1", f'"\\u0000": {NUL}'),
    ("/cache/binaries?tag__in=%5B1", f"tag__in: {EXPECTED_A_LIST}"),
    ("/cache/binaries.json?tag__notin=%5B", f"tag__notin: {EXPECTED_A_LIST}"),
    ("/cache/binaries?tag__in=%5B%5B1%5D%5D", f"tag__in: {EXPECTED_A_LIST}"),
    (
        "/cache/binaries?_next=abc",
        '_next: expected the number of rows to skip, as the page\'s next link gives it, not "abc"',
    ),
    ("/cache/binaries.json?_sort=tag&_next=1x", "_next: expected the number of rows to skip"),
    ("/cache/binary_stacks?_next=1e3", "_next: expected the number of rows to skip"),
    ("/cache/binaries?_sort=tag&_sort_desc=package", BOTH_SORTS),
    ("/cache/binary_stacks.json?_sort=tag&_sort_desc=stack", BOTH_SORTS),
    ("/cache/problems?_sort=path&_sort_desc=field", BOTH_SORTS),
    ("/cache/binaries?_next=99999999999999999999999", PAST_64_BITS),
    ("/cache/binary_stacks.json?_next=9223372036854775808", PAST_64_BITS),
    ("/cache/problems.json?_next=-9223372036854775809", PAST_64_BITS),
    ("/cache/tags?_sort=name&_next=develop,99999999999999999999999", PAST_64_BITS),
    ("/cache/binaries?_timelimit=abc", '_timelimit: expected a number of milliseconds, not "abc"'),
    ("/cache/find_binaries.json?_timelimit=1.5", '_timelimit: expected a number of milliseconds, not "1.5"'),
    ("/cache/binaries?_through=%7B", EXPECTED_A_THROUGH),
    ("/cache/binaries?_through=%7B%7D", EXPECTED_A_THROUGH),
    ('/cache/binaries?_through={"table":"nosuch","column":"x","value":"1"}', EXPECTED_A_THROUGH),
    (f"/cache/binaries.csv?_size=max&_where={TOO_SLOW}", "/cache/binaries.csv ran past the time limit of 200 ms"),
    (f"/cache/specs.csv?_where={TOO_SLOW}", "/cache/specs.csv ran past the time limit of 200 ms"),
    (
        "/cache.csv?sql=with recursive r(x) as (select 1 union all select x %2B 1 from r) select count(*) from r",
        "/cache.csv ran past the time limit of 200 ms",
    ),
]


@pytest_asyncio.fixture
async def ds(cache_db):
    """Served as `datasette serve` serves it: start-up hooks first."""
    ds = Datasette(immutables=[str(cache_db)], metadata=describe.build_metadata(), settings={"sql_time_limit_ms": 200})
    await ds.invoke_startup()
    return ds


def shown_error(response):
    if response.headers["content-type"].startswith("application/json"):
        return response.json()["error"]
    text = re.search(r'border: 3px solid red;">(.*?)</div>', response.text, re.S).group(1)
    return text.replace("&#34;", '"').replace("&#39;", "'").replace("&amp;", "&")


@pytest.mark.asyncio
@pytest.mark.parametrize("path, message", ODD_URLS, ids=[path for path, _ in ODD_URLS])
async def test_an_odd_url_is_a_bad_request_that_says_what_was_wrong(ds, path, message):
    response = await asyncio.wait_for(ds.client.get(path), 10)
    assert response.status_code == 400, response.text[:300]
    error = shown_error(response)
    assert message in error
    assert "\n" not in error and "Traceback" not in response.text


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path",
    [
        "/cache/find_binaries",
        "/cache/find_binaries.json",
        "/cache/tag_diff",
        # Datasette runs the question for a POST: one that runs out of time (as under load) is still a POST
        "/cache/find_binaries?_timelimit=1",
        "/cache/tag_diff?_timelimit=1",
    ],
)
async def test_a_post_to_a_question_is_refused_with_what_to_do(ds, path):
    response = await asyncio.wait_for(ds.client.post(path, data={"package": "hdf5"}), 10)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET"
    name = path.split("/")[2].split("?")[0].removesuffix(".json")
    assert (
        shown_error(response)
        == f"{name} is a question: it writes nothing, so it takes GET (its form or a link), not POST."
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path",
    [
        "/cache/binaries?_sort=tag",
        "/cache/binaries?tag__in=develop,v0.23.1",
        "/cache/binaries?_next=100",
        "/cache/tags?_next=9223372036854775807",
        "/cache/problems?_sort_desc=path",
    ],
)
async def test_the_same_arguments_well_formed_are_answered(ds, path):
    response = await asyncio.wait_for(ds.client.get(path), 10)
    assert response.status_code == 200


@pytest.mark.asyncio
async def test_a_server_fault_stays_a_500(ds, monkeypatch):
    """Only a request at fault gets a 400: a failure in Datasette itself is still reported as one."""

    async def broken(*args, **kwargs):
        raise RuntimeError("broken")

    monkeypatch.setattr(ds, "get_canned_queries", broken)
    response = await asyncio.wait_for(ds.client.get("/cache.json?_sort=nosuch"), 10)
    assert response.status_code == 500


@pytest.mark.asyncio
async def test_a_datasette_error_about_the_request_is_a_bad_request(ds, monkeypatch):
    """Datasette raises DatasetteError (a 500 unless it says otherwise) for arguments it cannot use: whichever
    it is, the answer is a 400 with its message."""

    async def refuse(*args, **kwargs):
        raise DatasetteError("Cannot do that\nwith this")

    monkeypatch.setattr(TableView, "data", refuse)
    for path in ("/cache/tags.json", "/cache/binaries.json?tag=develop"):
        response = await asyncio.wait_for(ds.client.get(path), 10)
        assert (response.status_code, shown_error(response)) == (400, "Cannot do that with this")


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        error.close()
        return error.code


def test_bad_requests_leave_no_traceback_in_the_server_log(cache_db):
    """Served as the README says: the 400s are answered, and the log says nothing of them; a fault of the
    server's own still shows its traceback there."""
    with tempfile.TemporaryFile() as log:
        with datasette(
            "-i", cache_db, "--setting", "suggest_facets", "off", "--setting", "sql_time_limit_ms", "200", log=log
        ) as base:
            statuses = [get(base + urllib.parse.quote(path, safe="/?=&%")) for path, _ in ODD_URLS]
            statuses.append(get(base + "/cache/binaries.csv?_stream=on&_next=1"))
            served = get(base + "/cache/binaries.json?_size=1")
        log.seek(0)
        text = log.read().decode()
    assert statuses == [400] * len(statuses) and served == 200
    assert [line for line in text.splitlines() if not line.startswith("INFO:")] == []


@pytest.mark.asyncio
@pytest.mark.parametrize("page", ["packages.csv", "dependencies.csv", "nothing", "diff/more"])
async def test_an_address_under_our_pages_that_is_none_of_them_is_not_found_naming_them(ds, page):
    """Datasette would take /cache/-/... for a table called '-' (400: no such table)."""
    response = await asyncio.wait_for(ds.client.get(f"/cache/-/{page}"), 10)
    assert response.status_code == 404
    assert shown_error(response) == (
        f"No page /-/{page} here: the pages are /-/dependencies, /-/diff, /-/packages, each also as .json."
    )
