"""metadata.yml: generated from metadata.base.yml and queries/, up to date, and describing everything users see."""

import re
import sqlite3
import subprocess
import sys
import tomllib

import pytest
import yaml
from click.testing import CliRunner
from paths import METADATA_YML, ROOT

from spack_cache_db.cli import cli
from spack_cache_db.db import schema
from spack_cache_db.query import canned, spec
from spack_cache_db.web import describe, views

METADATA = describe.build_metadata()
DATABASE = METADATA["databases"]["cache"]
QUERIES = DATABASE["queries"]
DASHBOARDS = METADATA["plugins"]["datasette-dashboards"]


def visible_tables_and_views(db_path):
    """Tables and views Datasette lists: everything but full-text indexes and SQLite's own tables."""
    with sqlite3.connect(db_path) as conn:
        names = [
            name
            for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'view')")
            if not name.startswith("sqlite_") and "_fts" not in name
        ]
        return {name: [row[1] for row in conn.execute(f"PRAGMA table_info({name})")] for name in names}


def test_committed_metadata_is_what_describe_generates():
    assert METADATA_YML.read_text(encoding="utf-8") == describe.generate(), (
        "metadata.yml is out of date: run python build_db.py metadata"
    )


def test_generated_metadata_reads_back_as_the_same_metadata():
    assert yaml.safe_load(describe.generate()) == METADATA


def test_site_has_title_description_source_and_about():
    for key in ("title", "description_html", "source", "source_url", "about", "about_url"):
        assert METADATA[key], key
    assert "cache.spack.io" in METADATA["source_url"]


def test_every_table_view_and_column_is_described(cache_db):
    described = DATABASE["tables"]
    tables = visible_tables_and_views(cache_db)
    assert sorted(described) == sorted(tables)
    for table, columns in tables.items():
        assert described[table].get("description"), table
        assert sorted(described[table]["columns"]) == sorted(columns), table
        assert all(text.strip() for text in described[table]["columns"].values()), table


def test_facets_sorts_and_labels_name_real_columns(cache_db):
    tables = visible_tables_and_views(cache_db)
    for table, settings in DATABASE["tables"].items():
        named = [settings.get(key) for key in ("sort", "sort_desc", "label_column", "fts_pk") if settings.get(key)]
        for facet in settings.get("facets", []):
            named.extend(facet.values() if isinstance(facet, dict) else [facet])
        assert set(named) <= set(tables[table]), table


def test_facets_cover_what_people_filter_binaries_by():
    facets = DATABASE["tables"]["binaries"]["facets"]
    assert {"tag", "os", "target", "compiler", "stacks"} <= {
        next(iter(f.values())) if isinstance(f, dict) else f for f in facets
    }
    assert DATABASE["tables"]["binaries"]["fts_table"] == "listings_fts"


def test_every_query_has_title_description_and_its_parameters():
    assert len(QUERIES) >= 9
    for name, entry in QUERIES.items():
        assert entry["title"].strip() and entry["description"].strip(), name
        used = set(re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", entry["sql"]))
        magic = {parameter for parameter in used if parameter.startswith("_")}  # made by the plugin, not a field
        assert sorted(entry["params"]) == sorted(used - magic), name
        assert magic <= set(spec.PARAMETERS), name
        assert not entry["sql"].lstrip().startswith("--"), name


def test_search_query_escapes_what_people_type():
    assert "escape_fts(" in QUERIES["search_specs"]["sql"]


def test_dashboards_draw_canned_queries():
    for dashboard in DASHBOARDS.values():
        for chart in dashboard["charts"].values():
            assert chart["db"] == "cache"
            assert chart["query"] in {entry["sql"] for entry in QUERIES.values()}
            assert chart["library"] == "vega-lite"
    assert {"package-history", "tag-overview"} <= set(DASHBOARDS)


def test_chart_plugin_stays_within_the_minor_version_whose_static_files_the_package_page_uses():
    with open(ROOT / "pyproject.toml", "rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    ranges = [re.fullmatch(r"datasette-dashboards>=0\.(\d+)(?:\.\d+)*,<0\.(\d+)", d) for d in dependencies]
    lower, upper = next((int(m[1]), int(m[2])) for m in ranges if m)
    assert upper == lower + 1


HEADER = "-- title: T\n-- description: D\n-- button: B\n-- rows: [row, rows]\n"


def write_query(folder, name, text):
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.sql"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("SELECT 1", "expected a title"),
        ("-- title: T\nSELECT 1", "expected a description"),
        ("-- title: T\n-- description: D\nSELECT 1", "expected a button"),
        ("-- title: T\n-- description: D\n-- button: B\nSELECT 1", "expected rows in the header"),
        ("-- title: T\n-- description: D\n-- button: B\n-- rows: [row]\nSELECT 1", "expected rows in the header"),
        (f"{HEADER}SELECT :package", "expected params to list each :parameter"),
        (f"{HEADER}-- params: [tag]\nSELECT :package", "expected params to list each :parameter"),
        (f"{HEADER}-- colour: red\nSELECT 1", "unknown header field"),
        ("-- title: [unclosed\nSELECT 1", "expected a YAML header"),
        (f"{HEADER}-- next_page: after\nSELECT 1", "expected next_page to be {parameter: column, ...}"),
        (f"{HEADER}-- next_page: {{}}\nSELECT 1", "expected next_page to be {parameter: column, ...}"),
        (f"{HEADER}-- next_page: {{after: hash}}\nSELECT 1", "next_page: expected one of the params [], found 'after'"),
        (
            f"{HEADER}-- params: [after]\n-- next_page: {{after: hash}}\nSELECT :after",
            "next_page: expected a capped answer (a row_limit) to go on after",
        ),
        (f"{HEADER}-- tag_patterns: true\nSELECT 1", "expected tag_patterns to be true or false, and true only with"),
        (f"{HEADER}-- params: [tag]\n-- tag_patterns: yes please\nSELECT :tag", "expected tag_patterns to be true"),
    ],
)
def test_query_files_that_are_not_as_expected_are_refused(tmp_path, text, complaint):
    path = write_query(tmp_path, "broken", text)
    with pytest.raises(canned.MetadataError, match=re.escape(complaint)):
        canned.read_query(path)


def test_query_file_header_and_sql_are_split(tmp_path):
    path = write_query(
        tmp_path,
        "answer",
        "-- title: The answer\n-- description: >-\n--   Always 42.\n-- params: [x]\n-- button: Ask\n"
        "-- rows: [answer, answers]\nSELECT 42, :x\n",
    )
    query = canned.read_query(path)
    assert (query.name, query.title, query.description, query.params, query.button, query.rows, query.sql) == (
        "answer",
        "The answer",
        "Always 42.",
        ["x"],
        "Ask",
        ["answer", "answers"],
        "SELECT 42, :x",
    )


def test_base_must_list_every_query(tmp_path):
    base = tmp_path / "base.yml"
    base.write_text("databases:\n  cache:\n    queries:\n      answer: {}\n")
    write_query(tmp_path / "queries", "answer", f"{HEADER}SELECT 42")
    write_query(tmp_path / "queries", "other", f"{HEADER}SELECT 43")
    with pytest.raises(describe.MetadataError, match=r"missing \['other'\]"):
        describe.build_metadata(base, tmp_path / "queries")


def test_metadata_command_writes_and_checks(tmp_path):
    output = tmp_path / "metadata.yml"
    runner = CliRunner()
    stale = runner.invoke(cli, ["metadata", "--check", "-o", str(output)])
    assert stale.exit_code == 1
    written = runner.invoke(cli, ["metadata", "-o", str(output)])
    assert written.exit_code == 0, written.output
    assert output.read_text() == describe.generate()
    fresh = runner.invoke(cli, ["metadata", "--check", "-o", str(output)])
    assert fresh.exit_code == 0 and "up to date" in fresh.output


def test_metadata_to_a_folder_that_is_not_there_is_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "build_db.py"), "metadata", "-o", "missing/metadata.yml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert (
        result.stderr
        == "Error: missing/metadata.yml: expected a file that can be written (No such file or directory)\n"
    )


SITE_SETTINGS = METADATA["plugins"]["spack-cache-db"]


def test_every_parameter_of_every_question_has_a_field(cache_db):
    """Every parameter a form asks for: not those that go on after a capped answer (its link sets them)."""
    fields = SITE_SETTINGS["fields"]
    going_on = {
        param for name in QUERIES if canned.named(name).next_page for param in canned.named(name).next_page.parameters
    }
    used = {param for entry in QUERIES.values() for param in entry["params"]} - going_on
    assert going_on and used == set(fields)
    conn = sqlite3.connect(cache_db)
    for name, field in fields.items():
        assert field["label"].strip(), name
        if "choices" in field:
            assert conn.execute(field["choices"]).fetchall(), name
    for name, entry in QUERIES.items():
        assert set(entry.get("fields", {})) <= set(entry["params"]), name


# Tables of names, each row a value a form may offer: a form's choices may read them whole.
NAME_TABLES = {"tags", "stacks", "oss", "platforms", "targets", "compilers", "microarchitectures"}


def test_a_forms_choices_read_whole_no_table_but_the_names_they_offer(cache_db):
    """Every question's page reads its fields' choices: a table that grows with the binaries, their tags or
    the combinations of their values (such as tag_cells) is read by its key, never whole."""
    conn = sqlite3.connect(cache_db)
    for name, field in SITE_SETTINGS["fields"].items():
        if "choices" in field:
            steps = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {field['choices']}")]
            scanned = {step.split()[1] for step in steps if step.startswith("SCAN ") and "CONSTANT ROW" not in step}
            assert scanned <= NAME_TABLES, (name, steps)


def test_the_questions_listed_first_are_queries_and_tables_of_the_database(cache_db):
    tables = visible_tables_and_views(cache_db)
    for section in SITE_SETTINGS["questions"]:
        for item in section["items"]:
            if isinstance(item, str):
                assert item in QUERIES, item
            elif "page" in item:
                assert item["page"] in views.PAGES and item["title"].strip(), item
            else:
                assert item["table"] in tables and item["title"].strip(), item
                assert set(item.get("columns", [])) <= set(tables[item["table"]]), item
    listed = {
        item if isinstance(item, str) else ("page", item["page"]) if "page" in item else item["table"]
        for s in SITE_SETTINGS["questions"]
        for item in s["items"]
    }
    assert len(listed) == sum(len(s["items"]) for s in SITE_SETTINGS["questions"]), "each listed once"


def row_limits(query):
    """The caps of a canned query's answer, written as people read them ("1,000"): with every parameter empty,
    and with every one given (a package, say)."""
    conn = sqlite3.connect(":memory:")
    schema.create_schema(conn)
    return {
        f"{canned.most_rows(conn, query, {**dict.fromkeys(spec.PARAMETERS, ''), **dict.fromkeys(query.params, given)}):,}"
        for given in ("", "x")
    }


@pytest.mark.parametrize("query", [q for q in canned.read_queries() if q.row_limit_sql], ids=lambda q: q.name)
def test_a_capped_question_says_its_caps(query):
    """Its description (the page's and the JSON's only word on it) names each cap, as the row_limit has it."""
    assert all(limit in query.description for limit in row_limits(query)), (row_limits(query), query.description)
