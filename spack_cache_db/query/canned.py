"""The canned queries in queries/<name>.sql, which the web serves as its questions and the terminal runs as the
same SQL: each file starts with a YAML header in SQL comments (title, description, params, button: what its
form's button says, rows: what one row is, singular and plural, and, optionally, chart: the dashboard that
draws it, and hidden_columns: those its page leaves out, for JSON and CSV); the rest of the file is the
query, runnable as it is in Datasette and in sqlite3. Its :_spec_ parameters are magic: the plugin makes
them from the spec field (query/spec.py), and sqlite3 takes them as empty.

They are the Datasette plugin's package data (web/queries/; the checkout's top-level queries/ links there),
read from here without importing the plugin: a build or a question asked from the terminal does not wait
for Datasette to import.
"""

import functools
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from spack_cache_db.query import spec

QUERIES = resources.files("spack_cache_db") / "web" / "queries"
HEADER_FIELDS = {"title", "description", "params", "button", "rows", "chart", "hidden_columns"}
_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


class MetadataError(Exception):
    """A query file or the base metadata is not as expected: the message names the file and what is wrong."""


@dataclass(frozen=True)
class Query:
    name: str
    title: str
    description: str
    params: list
    button: str
    rows: list
    sql: str
    chart: str | None = None
    hidden_columns: list | None = None


def read_query(path):
    """The Query in queries/<name>.sql: its YAML comment header and the SQL after it."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    header_length = next((n for n, line in enumerate(lines) if not line.startswith("--")), len(lines))
    header = "\n".join(line[3:] if line.startswith("-- ") else line[2:] for line in lines[:header_length])
    try:
        fields = yaml.safe_load(header) or {}
    except yaml.YAMLError as error:
        raise MetadataError(f"{path}: expected a YAML header in -- comments ({error})") from error
    if not isinstance(fields, dict):
        raise MetadataError(f"{path}: expected the header to be YAML fields (title, description, params)")
    unknown = set(fields) - HEADER_FIELDS
    if unknown:
        raise MetadataError(f"{path}: unknown header field(s) {sorted(unknown)}; expected {sorted(HEADER_FIELDS)}")
    for name in ("title", "description", "button"):
        if not isinstance(fields.get(name), str) or not fields[name].strip():
            raise MetadataError(f"{path}: expected a {name} in the header")
    rows = fields.get("rows")
    if not (isinstance(rows, list) and len(rows) == 2 and all(isinstance(word, str) and word for word in rows)):
        raise MetadataError(
            f"{path}: expected rows in the header: what one row is, singular and plural ([binary, binaries])"
        )
    sql = "\n".join(lines[header_length:]).strip()
    params = fields.get("params") or []
    _check_params(path, params, sql)
    return Query(
        path.stem,
        fields["title"],
        fields["description"],
        list(params),
        fields["button"],
        rows,
        sql,
        fields.get("chart"),
        fields.get("hidden_columns"),
    )


def _check_params(path, params, sql):
    used = set(_PARAMETER.findall(sql))
    magic = {name for name in used if name.startswith("_")}
    if magic - set(spec.PARAMETERS):
        raise MetadataError(f"{path}: unknown magic parameter(s) {sorted(magic - set(spec.PARAMETERS))}")
    used -= magic
    if set(params) != used or len(params) != len(used):
        raise MetadataError(
            f"{path}: expected params to list each :parameter of the SQL once: "
            f"header has {params}, SQL uses {sorted(used)}"
        )


def read_queries(folder=QUERIES):
    return [read_query(path) for path in sorted(Path(folder).glob("*.sql"))]


@functools.cache
def named(name):
    """The package's canned query called name (queries/<name>.sql), read once."""
    return read_query(QUERIES / f"{name}.sql")
