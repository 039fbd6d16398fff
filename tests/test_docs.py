"""Keep the README true to the CLI, the schema and the quick start."""

import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from paths import SEEDS
from test_metadata import row_limits

from spack_cache_db.build import build
from spack_cache_db.cli import cli
from spack_cache_db.query import canned

README_PATH = Path(__file__).parent.parent / "README.md"
README = README_PATH.read_text()


def section(heading):
    return README.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 300


def test_the_command_line_section_lists_every_command_and_every_option_of_build_and_find():
    """The README gives the CLI in brief; --help says the rest. Every command and option is named, and
    nothing is named that the CLI does not have."""
    shown = section("## Command line")
    listed = re.findall(r"^\| `(\w+)[ `]", shown, re.M)
    assert listed == sorted(cli.commands)
    named = set(re.findall(r"`(--[a-z-]+)", shown)) | {"--" + o for o in re.findall(r"`-\w/--([a-z-]+)`", shown)}
    options = {
        command: {
            name for parameter in cli.commands[command].params for name in parameter.opts if name.startswith("--")
        }
        for command in cli.commands
    }
    for command in ("build", "find"):
        assert options[command] - {"--output"} <= named, command  # -o is shown as `-o`
    assert named <= set().union(*options.values()) | {"--help"}


def test_the_command_line_section_gives_the_caps_of_the_answers_it_shares_with_the_web():
    shown = section("## Command line")
    for command, query in (("dependents", "dependents"), ("find", "find_binaries")):
        [line] = re.findall(rf"^\| `{command} .*$", shown, re.M)
        assert all(limit in line for limit in row_limits(canned.named(query))), (command, line)


def test_every_command_has_help_that_runs():
    for command in ["", *sorted(cli.commands)]:
        result = CliRunner().invoke(cli, [command, "--help"] if command else ["--help"], prog_name="build_db.py")
        assert result.exit_code == 0 and result.output.startswith("Usage: build_db.py")


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


def test_readme_sqlite_utils_examples_run_on_the_seeds(tmp_path):
    db = tmp_path / "cache.db"
    build([SEEDS], db)
    commands = re.findall(r"^(sqlite-utils .*)$", README, re.M)
    assert len(commands) == 2
    tool = Path(sys.executable).with_name("sqlite-utils")
    for command in commands:
        arguments = shlex.split(command)[1:]
        arguments[arguments.index("cache.db")] = str(db)
        shown = subprocess.run([str(tool), *arguments], capture_output=True, text=True, check=True, timeout=60).stdout
        assert "develop" in shown, command


def test_readme_names_every_column_of_the_binaries_view(tmp_path):
    db = tmp_path / "cache.db"
    build([SEEDS], db)
    columns = [row[1] for row in sqlite3.connect(db).execute("PRAGMA table_info(binaries)")]
    section = README.split("### The `binaries` view", 1)[1].split("\n### ", 1)[0]
    for column in columns:
        assert f"`{column}`" in section, column
