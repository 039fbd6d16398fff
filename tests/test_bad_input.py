"""Bad pages are rejected naming file, field and expectation, losing nothing; odd but valid pages build whole."""

import csv
import shutil
import sqlite3
import sys

import pytest
from click.testing import CliRunner
from pagemaker import page_facts
from paths import DATA, SEEDS

from spack_cache_db.cli import cli
from spack_cache_db.db.export import export

sys.path.insert(0, str(DATA))
from make_odd_pages import big_page_text, random_bytes_page  # noqa: E402


def expected(folder):
    with open(DATA / folder / "EXPECTED.tsv", newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


BAD = expected("bad")
ODD = expected("odd")


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    """A database built before the bad input arrives: it must stay byte for byte as it was."""
    db = tmp_path_factory.mktemp("previous") / "cache.db"
    assert run("build", SEEDS, "-o", db, "--quiet").exit_code == 0
    return db


def test_the_corpus_has_at_least_30_bad_pages():
    assert len(BAD) >= 30
    assert (DATA / "bad" / "02-random-binary.md").read_bytes() == random_bytes_page()


@pytest.mark.parametrize("case", BAD, ids=[c["path"] for c in BAD])
def test_bad_page_is_rejected_and_the_previous_database_is_kept(case, previous, tmp_path):
    output = tmp_path / "cache.db"
    shutil.copyfile(previous, output)
    before = output.read_bytes()
    given = DATA / "bad" / case["path"]
    result = run("build", SEEDS, given, "-o", output)
    assert result.exit_code == 1, result.output
    named = DATA / "bad" / case["error_file"]
    message = result.output.splitlines()[0]
    assert message.startswith(f"Error: {named}: {case['field']}"), message
    assert case["fragment"] in message
    assert output.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.db"]


@pytest.mark.parametrize("case", BAD, ids=[c["path"] for c in BAD])
def test_keep_going_records_the_bad_page_and_builds_the_rest(case, tmp_path):
    output = tmp_path / "cache.db"
    result = run("build", SEEDS, DATA / "bad" / case["path"], "-o", output, "--keep-going")
    assert result.exit_code == 0, result.output
    assert "1 rejected" in result.output
    conn = sqlite3.connect(output)
    [(path, field)] = conn.execute("SELECT path, field FROM problems WHERE severity = 'error'").fetchall()
    assert (path, field.split("[")[0]) == (str(DATA / "bad" / case["error_file"]), case["field"].split("[")[0])
    assert conn.execute("SELECT count(*) FROM specs").fetchone()[0] >= 407
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


@pytest.mark.parametrize("case", ODD, ids=[c["path"] for c in ODD])
def test_odd_page_builds_with_every_spec(case, tmp_path):
    output = tmp_path / "cache.db"
    page = DATA / "odd" / case["path"]
    result = run("build", page, "-o", output)
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(output)
    found = conn.execute("SELECT tag, package, count(*) FROM binaries GROUP BY tag, package").fetchall()
    assert found == [(case["tag"], case["title"], int(case["specs"]))]
    warnings = sorted(row[0] for row in conn.execute("SELECT field FROM problems"))
    assert warnings == sorted(filter(None, case["warnings"].split(",")))


@pytest.mark.parametrize("case", ODD, ids=[c["path"] for c in ODD])
def test_odd_page_exports_with_the_same_facts(case, tmp_path):
    page = DATA / "odd" / case["path"]
    assert run("build", page, "-o", tmp_path / "cache.db", "--quiet").exit_code == 0
    export(tmp_path / "cache.db", tmp_path / "out")
    again = tmp_path / "out" / "_cache" / case["tag"] / case["title"] / "specs.md"
    assert page_facts(again) == page_facts(page)


def test_odd_pages_build_together_with_the_samples(tmp_path):
    result = run("build", DATA / "odd", DATA / "cache.spack.io", "-o", tmp_path / "cache.db")
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(tmp_path / "cache.db")
    assert conn.execute("SELECT count(*) FROM pages").fetchone()[0] == 24 + len(ODD)
    assert conn.execute("SELECT version FROM versions WHERE version = '1.10'").fetchone() == ("1.10",)
    assert conn.execute("SELECT name FROM tags WHERE name = '2025.10'").fetchone() == ("2025.10",)
    assert conn.execute("SELECT name FROM oss WHERE name LIKE '%DROP TABLE%'").fetchone() == (
        "ubuntu'; DROP TABLE specs; --",
    )


def test_a_page_with_20000_specs_builds_whole(tmp_path):
    page = tmp_path / "big.md"
    page.write_text(big_page_text())
    result = run("build", page, "-o", tmp_path / "cache.db")
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(tmp_path / "cache.db")
    assert conn.execute("SELECT count(*), count(DISTINCT hash) FROM binaries").fetchone() == (20000, 20000)
    assert conn.execute("SELECT count(*) FROM problems").fetchone() == (0,)
