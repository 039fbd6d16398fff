import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from pagemaker import page_facts, spec, write_page
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


def test_a_meta_is_kept_only_where_export_would_not_write_it_again(tmp_path):
    """The build keeps a page's meta where its text is not the one the page's binaries imply (here: the same
    facts, written without spaces), and export writes that back; where it is, export writes it again."""
    specs = [spec(1), spec(2, stacks=["root"])]
    implied = write_page(tmp_path / "site", "bolt", "develop", specs)
    compact = write_page(tmp_path / "site", "cli11", "develop", [spec(3), spec(4, stacks=["root"])])
    spaced = next(line for line in compact.read_text().splitlines() if line.startswith("meta: "))
    without_spaces = json.dumps(json.loads(spaced.removeprefix("meta: ")), separators=(",", ":"))
    compact.write_text(compact.read_text().replace(spaced, f"meta: {without_spaces}"))
    build([tmp_path / "site"], tmp_path / "cache.db")
    with closing(sqlite3.connect(tmp_path / "cache.db")) as conn:
        kept = dict(conn.execute("SELECT path, meta FROM pages"))
    assert kept == {str(implied): None, str(compact): without_spaces}
    export(tmp_path / "cache.db", tmp_path / "out")
    for path in (implied, compact):
        title, tag, *_ = page_facts(path)
        assert (tmp_path / "out" / "_cache" / tag / title / "specs.md").read_bytes() == path.read_bytes()
