"""Keep the README true to the CLI, the schema and the quick start."""

import os
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import SEEDS

from spack_cache_db.build import build
from spack_cache_db.cli import cli

README_PATH = Path(__file__).parent.parent / "README.md"
README = README_PATH.read_text()
HELP_BLOCK = re.compile(r"```\n\$ python build_db\.py ((?:\w+ )?)--help\n.*?```", re.S)


def help_text(command):
    args = [command, "--help"] if command else ["--help"]
    result = CliRunner().invoke(cli, args, prog_name="build_db.py", terminal_width=80)
    assert result.exit_code == 0
    return result.output


def help_block(command):
    shown = f"$ python build_db.py {command} --help".replace("  ", " ")
    return f"```\n{shown}\n{help_text(command)}```"


@pytest.mark.parametrize("command", ["", *sorted(cli.commands)])
def test_readme_shows_the_current_help_of_every_command(command):
    """After changing the CLI, UPDATE_README=1 pytest tests/test_docs.py rewrites the help blocks."""
    if os.environ.get("UPDATE_README"):
        README_PATH.write_text(HELP_BLOCK.sub(lambda m: help_block(m.group(1).strip()), README_PATH.read_text()))
    assert help_block(command) in README_PATH.read_text()


def test_quick_start_has_exactly_two_commands():
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```(?:bash|sh)?\n(.*?)```", quick_start, re.S)
    assert len(commands) == 2
    assert all(len(c.strip().splitlines()) == 1 for c in commands)
    assert "datasette -i cache.db -m metadata.yml" in commands[0] and "build_db.py" in commands[0]
    assert "pytest" in commands[1]
    assert ".ci/run" not in commands[1]
    assert commands[1].strip() in Path(__file__).parent.parent.joinpath(".ci/run").read_text()


def test_readme_example_sql_runs_on_the_seeds(tmp_path):
    db = tmp_path / "cache.db"
    build([SEEDS], db)
    queries = re.findall(r"```sql\n(.*?)```", README, re.S)
    assert len(queries) >= 3
    conn = sqlite3.connect(db)
    for sql in queries:
        assert conn.execute(sql).fetchall(), sql


def test_readme_names_every_column_of_the_binaries_view(tmp_path):
    db = tmp_path / "cache.db"
    build([SEEDS], db)
    columns = [row[1] for row in sqlite3.connect(db).execute("PRAGMA table_info(binaries)")]
    section = README.split("### The `binaries` view", 1)[1].split("\n### ", 1)[0]
    for column in columns:
        assert f"`{column}`" in section, column
