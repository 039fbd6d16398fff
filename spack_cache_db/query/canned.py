"""The canned queries in queries/<name>.sql, which the web serves as its questions and the terminal runs as the
same SQL: each file starts with a YAML header in SQL comments (title, description, params, button: what its
form's button says, rows: what one row is, singular and plural, and, optionally, chart: the dashboard that
draws it, hidden_columns: those its page leaves out, for JSON and CSV, tag_patterns: true when its tag takes
shell patterns, and next_page: {parameter: column, ...}, when the rows after a capped answer are asked for by
setting each parameter to its column of the last row); the rest of the file is the query, runnable as it is in
Datasette and in sqlite3. Its :_spec_ parameters are magic: the plugin makes them from the spec field
(query/spec.py), and sqlite3 takes them as empty.

A query whose answer is capped declares the cap once, as its common table expression row_limit (one row,
one column: rows), and its LIMITs read it there. The web page and the terminal run that table alone with the
same parameters (Query.row_limit_sql), to say "the first N" when the answer has as many rows as its cap.

They are the Datasette plugin's package data (web/queries/; the checkout's top-level queries/ links there),
read from here without importing the plugin: a build or a question asked from the terminal does not wait
for Datasette to import.
"""

import functools
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import yaml

from spack_cache_db.query import spec

QUERIES = resources.files("spack_cache_db") / "web" / "queries"
HEADER_FIELDS = {
    "title",
    "description",
    "params",
    "button",
    "rows",
    "chart",
    "hidden_columns",
    "tag_patterns",
    "next_page",
}
_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


class MetadataError(Exception):
    """A query file or the base metadata is not as expected: the message names the file and what is wrong."""


class NextPage(NamedTuple):
    """How the rows after a capped answer are asked for: each parameter set to its column of the last row (the
    columns the answer is ordered by, in that order). The last one names the row the answer goes on after."""

    columns: tuple  # ((parameter, column), ...)

    @property
    def parameters(self):
        return [parameter for parameter, _ in self.columns]


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
    row_limit_sql: str | None = None  # the most rows its answer has, for the same parameters; None: not capped
    next_page: NextPage | None = None
    tag_patterns: bool = False  # its tag takes shell patterns, several separated by spaces; else one name


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
    row_limit_sql = _row_limit_sql(path, sql)
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
        row_limit_sql,
        _next_page(path, fields.get("next_page"), params, row_limit_sql),
        _tag_patterns(path, fields.get("tag_patterns", False), params),
    )


def _tag_patterns(path, given, params):
    if given not in (True, False) or (given and "tag" not in params):
        raise MetadataError(f"{path}: expected tag_patterns to be true or false, and true only with a tag parameter")
    return given


def _next_page(path, given, params, row_limit_sql):
    if given is None:
        return None
    if not (isinstance(given, dict) and given and all(isinstance(word, str) for word in [*given, *given.values()])):
        raise MetadataError(f"{path}: expected next_page to be {{parameter: column, ...}}, found {given!r}")
    for parameter in given:
        if parameter not in params:
            raise MetadataError(f"{path}: next_page: expected one of the params {params}, found {parameter!r}")
    if row_limit_sql is None:
        raise MetadataError(f"{path}: next_page: expected a capped answer (a row_limit) to go on after")
    return NextPage(tuple(given.items()))


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


# The SQL text a query's structure is read from: comments and quoted text (skipped whole, so that their
# parentheses and words do not count), parentheses and words.
_TOKENS = re.compile(r"--[^\n]*|/\*.*?\*/|'[^']*'|\"[^\"]*\"|[()]|\w+", re.DOTALL)
_CTE_KEYWORDS = {"WITH", "RECURSIVE", "AS", "NOT", "MATERIALIZED"}


def _row_limit_sql(path, sql):
    """The query's WITH clause followed by SELECT rows FROM row_limit, when it has a row_limit; None otherwise."""
    depth, names = 0, set()
    for token in _TOKENS.finditer(sql):
        word = token.group()
        if word == "(":
            depth += 1
        elif word == ")":
            depth -= 1
        elif depth == 0 and word.upper() == "SELECT":
            return f"{sql[: token.start()]}SELECT rows FROM row_limit" if "row_limit" in names else None
        elif depth == 0 and word[0] not in "-/'\"" and word.upper() not in _CTE_KEYWORDS:
            names.add(word)
    raise MetadataError(f"{path}: expected a SELECT statement")


@dataclass
class Answer:
    """A canned query's answer, asked from the terminal."""

    columns: list
    rows: list  # dicts
    limit: int | None  # the most rows the query gives for these parameters (most_rows)

    @property
    def limited(self):
        """Whether there may be more than the web shows (and so the terminal too)."""
        return reaches_its_limit(len(self.rows), self.limit)


def reaches_its_limit(row_count, limit):
    """Whether an answer of row_count rows is as long as its query's cap (limit, None when it has none): there
    may be more rows than it shows."""
    return limit is not None and 0 < limit <= row_count


def most_rows(conn, query, params):
    """The most rows the query answers with these parameters (sqlite3 connection), or None if uncapped."""
    return None if query.row_limit_sql is None else conn.execute(query.row_limit_sql, params).fetchone()[0]


def ask(conn, query, params):
    """The query's Answer for these parameters (sqlite3 connection): its rows as dicts, by column name."""
    cursor = conn.execute(query.sql, params)
    columns = [column[0] for column in cursor.description]
    rows = [dict(zip(columns, row, strict=True)) for row in cursor]
    return Answer(columns, rows, most_rows(conn, query, params))


def read_queries(folder=QUERIES):
    return [read_query(path) for path in sorted(Path(folder).glob("*.sql"))]


@functools.cache
def named(name):
    """The package's canned query called name (queries/<name>.sql), read once."""
    return read_query(QUERIES / f"{name}.sql")
