"""Fixtures shared by the test modules."""

from pathlib import Path

import pytest

from spack_cache_db.build import build

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = [str(ROOT / "tests" / "data" / "cache.spack.io"), str(ROOT / "seeds")]


@pytest.fixture(scope="session")
def cache_db(tmp_path_factory):
    """cache.db built from the project's samples and seeds, once per session.

    Named cache.db because Datasette names the database after the file, and metadata.yml's canned
    queries belong to the database called cache.
    """
    path = tmp_path_factory.mktemp("samples") / "cache.db"
    build(SAMPLES, path)
    return path
