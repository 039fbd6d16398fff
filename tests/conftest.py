"""Fixtures shared by the test modules."""

import pytest
from paths import SEEDS, SITE

from spack_cache_db.build import build

SAMPLES = [SITE, SEEDS]


@pytest.fixture(scope="session")
def cache_db(tmp_path_factory):
    """cache.db built from the project's samples and seeds, once per session.

    Named cache.db because Datasette names the database after the file, and metadata.yml's canned
    queries belong to the database called cache.
    """
    path = tmp_path_factory.mktemp("samples") / "cache.db"
    build(SAMPLES, path)
    return path
