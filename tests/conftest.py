"""Fixtures shared by the test modules."""

import gc

import pytest
from paths import SEEDS, SITE

from spack_cache_db.build import build

SAMPLES = [SITE, SEEDS]


@pytest.fixture(autouse=True)
def unfrozen_collector():
    """The plugin's start-up keeps what exists then out of the collector's reach, as suits a server's one
    Datasette; a test's Datasette must not stay in memory for the rest of the session."""
    yield
    gc.unfreeze()


@pytest.fixture(scope="session")
def cache_db(tmp_path_factory):
    """cache.db built from the project's samples and seeds, once per session.

    Named cache.db because Datasette names the database after the file, and metadata.yml's canned
    queries belong to the database called cache.
    """
    path = tmp_path_factory.mktemp("samples") / "cache.db"
    build(SAMPLES, path)
    return path


@pytest.fixture(scope="session")
def index_db(tmp_path_factory):
    """cache.db built from Spack's sample indexes: Database 8 as develop (dependencies with deptypes and
    virtuals, build-only ones, an external gcc, gcc-runtime shared by libdwarf and libelf) and Database 7
    as v0.23.0, each a v2 mirror."""
    from mirrors import sample_index, write_v2

    folder = tmp_path_factory.mktemp("indexes")
    for version in ("7", "8"):
        write_v2(folder / f"v{version}", sample_index(version))
    path = folder / "cache.db"
    build([f"develop={folder / 'v8'}", f"v0.23.0={folder / 'v7'}"], path)
    return path


@pytest.fixture(scope="session")
def previous(tmp_path_factory):
    """A database built before bad input arrives: what a failed build must leave byte for byte."""
    from pagemaker import spec, write_page

    root = tmp_path_factory.mktemp("previous")
    write_page(root, "cli11", "develop", [spec("previous-cli11", versions=["2.4.2"])])
    build([str(root / "_cache")], root / "cache.db")
    return root / "cache.db"
