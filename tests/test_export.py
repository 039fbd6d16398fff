from pathlib import Path

import pytest
from pagemaker import page_facts
from paths import SEEDS, SITE

from spack_cache_db.build import build
from spack_cache_db.db.export import export
from spack_cache_db.read.pages import SourceFile, find_inputs, read_page

INPUTS = [SEEDS, SITE]
PAGE_FILES = [f.path for f in find_inputs(INPUTS).files]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    build(INPUTS, root / "cache.db")
    assert export(root / "cache.db", root / "out") == len(PAGE_FILES)
    return root / "out"


def exported_path(exported, path):
    title, tag, *_ = page_facts(path)
    return exported / "_cache" / tag / title / "specs.md"


def test_every_seed_and_sample_is_in_the_corpus():
    assert len(PAGE_FILES) == 29


@pytest.mark.parametrize("path", PAGE_FILES)
def test_export_gives_back_the_same_facts(exported, path):
    assert page_facts(exported_path(exported, path)) == page_facts(path)


@pytest.mark.parametrize("path", PAGE_FILES)
def test_generator_form_pages_come_back_byte_for_byte(exported, path):
    page = read_page(SourceFile(path, True), Path(path).read_bytes())
    if not page.sorted_keys:
        pytest.skip("older hash-first page: same facts, not the same bytes")
    assert exported_path(exported, path).read_bytes() == Path(path).read_bytes()


def test_most_pages_are_in_generator_form():
    sorted_pages = [p for p in PAGE_FILES if read_page(SourceFile(p, True), Path(p).read_bytes()).sorted_keys]
    assert len(sorted_pages) == 19
