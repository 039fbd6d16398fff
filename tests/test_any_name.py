"""A database this project built is served with its metadata whatever its file is called, with or without -m."""

import shutil
import sqlite3

import pytest
import yaml
from datasette.app import Datasette
from paths import METADATA_YML

from spack_cache_db.web import describe

pytestmark = pytest.mark.asyncio

METADATA = describe.build_metadata()
QUERIES = METADATA["databases"]["cache"]["queries"]


@pytest.fixture
def spack_db(cache_db, tmp_path):
    """The samples' database under another name: Datasette calls it spack."""
    path = tmp_path / "spack.db"
    shutil.copy(cache_db, path)
    return path


async def started(*files, immutable=True, metadata=None):
    """Datasette as `datasette [-i] FILE... [-m metadata.yml]` starts it."""
    files = [str(file) for file in files]
    ds = Datasette(immutables=files if immutable else [], files=[] if immutable else files, metadata=metadata)
    await ds.invoke_startup()
    return ds


async def get(ds, path):
    response = await ds.client.get(path)
    assert response.status_code == 200, (path, response.text[:300])
    return response


@pytest.mark.parametrize("immutable", [True, False])
async def test_plain_datasette_serves_a_database_of_any_name_with_its_questions(spack_db, immutable):
    ds = await started(spack_db, immutable=immutable)
    database = (await get(ds, "/spack.json")).json()
    assert [query["name"] for query in database["queries"]] == list(QUERIES)
    for name, query in QUERIES.items():
        page = await get(ds, f"/spack/{name}")
        assert query["title"] in page.text
    rows = (await get(ds, "/spack/find_binaries.json?package=hdf5&tag=develop-2025-04-20&_shape=objects")).json()
    assert len(rows["rows"]) == 46
    assert (await get(ds, "/spack/binaries.json?_size=0")).json()["facet_results"].keys() == {
        "tag",
        "os",
        "target",
        "compiler",
        "stacks",
    }


async def test_its_site_text_and_dashboards_name_it(spack_db):
    ds = await started(spack_db)
    metadata = (await get(ds, "/-/metadata.json")).json()
    assert metadata["title"] == METADATA["title"]
    assert set(metadata["databases"]) == {"spack"}
    assert metadata["databases"]["spack"]["tables"] == METADATA["databases"]["cache"]["tables"]
    for dashboard in metadata["plugins"]["datasette-dashboards"].values():
        parts = [*dashboard.get("filters", {}).values(), *dashboard["charts"].values()]
        assert {part["db"] for part in parts if "db" in part} == {"spack"}
    page = await get(ds, "/-/dashboards/package-history?package=bolt")
    assert "bolt" in page.text


async def test_metadata_given_with_m_is_what_it_was(cache_db):
    ds = await started(cache_db, metadata=yaml.safe_load(METADATA_YML.read_text()))
    assert ds.metadata() == METADATA
    assert (await get(ds, "/cache/find_binaries")).text.count(QUERIES["find_binaries"]["title"]) >= 1


async def test_metadata_given_with_m_wins_and_the_rest_stays(spack_db):
    given = {"title": "Our cache", "databases": {"spack": {"queries": {"find_binaries": {"title": "Find it"}}}}}
    ds = await started(spack_db, metadata=given)
    assert ds.metadata("title") == "Our cache"
    queries = await ds.get_canned_queries("spack", None)
    assert queries["find_binaries"]["title"] == "Find it"
    assert queries["find_binaries"]["sql"] == QUERIES["find_binaries"]["sql"]
    assert list(queries) == list(QUERIES)


async def test_a_database_this_project_did_not_build_gets_nothing(spack_db, tmp_path):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE build_info (key TEXT, value TEXT)")
    ds = await started(other)
    assert ds.metadata() == {}
    both = await started(spack_db, other)
    assert set(both.metadata("databases")) == {"spack"}
    assert (await get(both, "/other.json")).json()["queries"] == []


async def test_two_of_our_databases_each_get_their_questions(cache_db, spack_db):
    ds = await started(spack_db, cache_db)
    for name in ("spack", "cache"):
        assert [query["name"] for query in (await get(ds, f"/{name}.json")).json()["queries"]] == list(QUERIES)
    charts = ds.metadata("plugins")["datasette-dashboards"]["package-history"]["charts"]
    assert {chart["db"] for chart in charts.values()} == {"spack"}, "the dashboards draw from the first"


async def test_metadata_yml_given_for_a_database_of_another_name_is_warned_of(spack_db, cache_db, capsys):
    metadata = yaml.safe_load(METADATA_YML.read_text())
    await started(spack_db, metadata=metadata)
    warning = capsys.readouterr().err
    assert warning.startswith(
        "spack-cache-db: the metadata given with -m describes the database 'cache', which is not served"
    )
    assert warning.endswith("leave out -m\n") and warning.count("\n") == 1
    await started(cache_db, metadata=metadata)
    await started(spack_db)
    assert capsys.readouterr().err == ""
