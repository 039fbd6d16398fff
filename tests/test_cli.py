import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from pagemaker import spec, write_page
from paths import ROOT, SEEDS, SITE
from terminal import run_in_terminal

from spack_cache_db.cli import cli
from spack_cache_db.db.schema import COLUMNS, NAMED_INDEXES, SCHEMA_DIGEST, SCHEMA_VERSION


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_no_arguments_builds_cache_db_from_the_bundled_seeds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run()
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("Built cache.db in ")
    assert lines[1].split() == ["pages", "5", "(5", "read,", "0", "unchanged,", "0", "removed,", "0", "rejected)"]
    assert lines[2].split()[:2] == ["specs", "407"]
    assert [line.split()[:2] for line in lines[3:6]] == [["tags", "2"], ["packages", "5"], ["problems", "0"]]
    conn = sqlite3.connect(tmp_path / "cache.db")
    assert conn.execute("SELECT count(*) FROM binaries").fetchone() == (407,)


def test_build_paths_to_output_and_quiet(tmp_path):
    result = run("build", SITE, "-o", str(tmp_path / "s.db"), "--quiet")
    assert (result.exit_code, result.output) == (0, "")
    assert sqlite3.connect(tmp_path / "s.db").execute("SELECT count(*) FROM pages").fetchone() == (24,)


def test_second_build_is_up_to_date(tmp_path):
    out = str(tmp_path / "s.db")
    run("build", SEEDS, "-o", out)
    result = run("build", SEEDS, "-o", out)
    assert result.exit_code == 0
    assert result.output.startswith(f"{out} is up to date (5 pages unchanged)")


def test_invalid_input_exits_1_naming_file_field_and_expectation(tmp_path):
    out = tmp_path / "cache.db"
    run("build", SEEDS, "-o", str(out))
    before = out.read_bytes()
    bad = write_page(tmp_path / "site", "bolt", "develop", [spec(1, versions=["1.0", "2.0"])])
    result = run("build", SEEDS, str(bad), "-o", str(out))
    assert result.exit_code == 1
    assert f"Error: {bad}: spec_details[0].versions: expected exactly one version, found 2" in result.output
    assert f"{out} was left as it was." in result.output
    assert out.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["cache.db", "site"]


def test_inputs_without_a_page_are_an_error_that_keeps_the_database(tmp_path):
    out = tmp_path / "cache.db"
    run("build", SEEDS, "-o", str(out))
    before = out.read_bytes()
    wrong = tmp_path / "notes"
    wrong.mkdir()
    (wrong / "todo.md").write_text("# not a cache page\n")
    result = run("build", str(wrong), "-o", str(out))
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {wrong}: expected cache pages (such as _cache/<tag>/<package>/specs.md) or build-cache indexes,"
        " found none\n"
        f"{out} was left as it was.\n"
    )
    assert out.read_bytes() == before
    assert run("build", SEEDS, str(wrong), "-o", str(out), "--quiet").exit_code == 0  # pages elsewhere: fine


def test_keep_going_says_what_it_rejected(tmp_path):
    bad = write_page(tmp_path / "site", "bolt", "develop", [spec(1, stacks="root")])
    result = run("build", SEEDS, str(bad), "-o", str(tmp_path / "c.db"), "--keep-going")
    assert result.exit_code == 0
    assert "1 rejected" in result.output
    assert f"rejected: {bad}: spec_details[0].stacks: expected a list of non-empty strings" in result.output


def test_strict_fails_on_warnings(tmp_path):
    page = write_page(tmp_path / "site", "bolt", "develop", [spec(1)], meta={"num_specs": 1})
    result = run("build", str(page), "-o", str(tmp_path / "c.db"), "--strict")
    assert result.exit_code == 1
    assert "--strict" in result.output and "meta.compilers: missing from meta" in result.output
    assert not (tmp_path / "c.db").exists()


def test_usage_errors_exit_2(tmp_path):
    assert run("build", str(tmp_path / "missing")).exit_code == 2
    assert run("build", "--no-such-option").exit_code == 2
    assert run("export").exit_code == 2


def test_export_and_check(tmp_path):
    db = str(tmp_path / "c.db")
    run("build", SEEDS, "-o", db)
    result = run("export", db, str(tmp_path / "out"))
    assert result.exit_code == 0
    assert result.output == f"Wrote 5 page(s) under {tmp_path / 'out' / '_cache'}\n"
    assert (tmp_path / "out/_cache/develop/py-mpi4py/specs.md").read_bytes() == (
        Path(SEEDS) / "003_95d4df9caf125ef9.txt"
    ).read_bytes()
    result = run("check", db)
    assert result.exit_code == 0
    assert result.output.splitlines()[:3] == [
        "ok   integrity_check",
        "ok   foreign_key_check",
        f"ok   schema version {SCHEMA_VERSION} (digest {SCHEMA_DIGEST})",
    ]


def test_check_fails_on_a_broken_database(tmp_path):
    db = tmp_path / "c.db"
    run("build", SEEDS, "-o", str(db))
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM specs WHERE id = 1")
    conn.commit()
    conn.close()
    result = run("check", str(db))
    assert result.exit_code == 1
    assert "FAIL foreign_key_check" in result.output


def test_check_fails_on_tables_that_are_not_as_the_schema_declares(tmp_path):
    db = tmp_path / "c.db"
    run("build", SEEDS, "-o", str(db))
    indexes = sum(map(len, NAMED_INDEXES.values()))
    assert "page_specs_by_listing" in NAMED_INDEXES["page_specs"]  # one a full build makes after its rows
    assert {
        "ok   " + f"{len(COLUMNS)} tables as schema.py declares them",
        "ok   " + f"{indexes} indexes as schema.py declares them",
    } <= set(run("check", str(db)).output.splitlines())
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE indexes DROP COLUMN etag")
    conn.execute("DROP TABLE tag_cells")
    conn.execute("DROP INDEX page_specs_by_listing")
    conn.commit()
    conn.close()
    result = run("check", str(db))
    assert result.exit_code == 1
    assert {
        "FAIL tables: expected indexes, tag_cells as schema.py declares them",
        "FAIL indexes: expected those of page_specs as schema.py declares them",
    } <= set(result.output.splitlines())


def test_check_fails_on_something_else(tmp_path):
    other = tmp_path / "x.db"
    other.write_bytes(b"not a database at all" * 100)
    result = run("check", str(other))
    assert result.exit_code == 1
    assert result.output.startswith(f"FAIL {other}")


def test_a_terminal_shows_a_progress_bar_with_rates(tmp_path):
    stdout, terminal = run_in_terminal("build", SITE, "-o", str(tmp_path / "c.db"))
    assert "Reading pages" in terminal and "24/24" in terminal
    assert "pages/s" in terminal and "specs/s" in terminal
    assert stdout.startswith(f"Built {tmp_path / 'c.db'} in ")


def test_quiet_and_pipes_show_no_progress(tmp_path):
    stdout, terminal = run_in_terminal("build", SEEDS, "-o", str(tmp_path / "c.db"), "--quiet")
    assert (stdout, terminal) == ("", "")
    piped = run("build", SEEDS, "-o", str(tmp_path / "d.db"))
    assert "Reading pages" not in piped.output


def test_the_command_line_imports_no_datasette():
    """A build, and a question asked from the terminal, run the canned queries' SQL without the Datasette
    plugin: importing Datasette took a quarter of a second of every command."""
    imported = subprocess.run(
        [sys.executable, "-c", "import sys, spack_cache_db.cli; print(sorted({m.split('.')[0] for m in sys.modules}))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "'spack_cache_db'" in imported and "'datasette'" not in imported


def test_ctrl_c_while_the_modules_are_imported_says_so_without_a_traceback():
    """Ctrl-C in the first tenth of a second lands in an import (forced there: the import of the commands)."""
    script = (
        "import builtins, runpy, sys\n"
        "real_import = builtins.__import__\n"
        "def interrupted(name, *args, **kwargs):\n"
        "    if name == 'spack_cache_db.cli':\n"
        "        raise KeyboardInterrupt\n"
        "    return real_import(name, *args, **kwargs)\n"
        "builtins.__import__ = interrupted\n"
        "sys.argv = ['build_db.py', 'build']\n"
        "runpy.run_path('build_db.py', run_name='__main__')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert (result.returncode, result.stdout, result.stderr) == (130, "", "Interrupted before anything was done.\n")


def test_a_spec_with_a_control_character_is_said_with_it_escaped(cache_db):
    """What a terminal would act on (an escape sequence) is written as Python writes it, as in every message."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "build_db.py"), "find", "hdf5\x1b[31m", "--db", str(cache_db)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "\\x1b" in result.stderr, result.stderr
