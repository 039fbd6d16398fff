"""Binaries that match a spec: the find question's SQL (web/queries/find_binaries.sql), run by `find` with the
parameters the web's form and magic parameters give it, so that both answer the same; and, when nothing
matched, the names of the spec the database does not hold, with the closest it does."""

import difflib
import fnmatch
import json
import sqlite3
from dataclasses import dataclass

from spack_cache_db import normalise
from spack_cache_db.db.connection import database_uri
from spack_cache_db.db.schema import NO_DEPENDENCIES, SCHEMA_DIGEST, SCHEMA_VERSION, of_this_schema
from spack_cache_db.query import canned
from spack_cache_db.query import spec as spec_module
from spack_cache_db.read.files import read_start
from spack_cache_db.records import InputError

QUERY = canned.named("find_binaries")
EVERY_TAG = "*"
LIST_COLUMNS = ("variants", "stacks")  # JSON arrays in the database, lists in JSON output
WEB_ONLY_COLUMNS = ("links",)  # Markdown links between the web's pages

# The names a spec can hold, and the SQL that lists those the database has.
KNOWN_NAMES = {
    "package": "SELECT name FROM packages"
    " UNION SELECT json_each.value FROM dependency_kinds, json_each(dependency_kinds.virtuals)",
    "compiler": "SELECT DISTINCT name FROM compilers",
    "operating system": "SELECT name FROM oss",
    "platform": "SELECT name FROM platforms",
    "target": "SELECT name FROM targets UNION SELECT name FROM microarchitectures",
    "host CPU": "SELECT name FROM microarchitectures",
    "tag": "SELECT name FROM tags",
}


class FindError(Exception):
    """The database cannot be asked: one line saying which file and why."""


@dataclass
class Unknown:
    kind: str  # a key of KNOWN_NAMES
    name: str
    close: list  # the closest names the database holds

    def __str__(self):
        said = f"No {self.kind} here is called '{self.name}'"
        return said + (f": did you mean {' or '.join(self.close)}?" if self.close else ".")


def open_database(path):
    """A read-only connection to a database this project built with this schema; raises FindError."""
    try:
        start = read_start(path, 16)  # a FIFO would block SQLite's open
    except InputError as error:
        raise FindError(f"{path}: {error.expected}") from error
    if start is None:
        raise FindError(f"{path}: no such database (build one with: python build_db.py -o {path})")
    try:
        conn = sqlite3.connect(database_uri(path), uri=True)
        built = dict(conn.execute("SELECT key, value FROM build_info"))
    except sqlite3.DatabaseError as error:
        raise FindError(f"{path}: expected a database built by spack-cache-db ({error})") from error
    if not of_this_schema(built):
        conn.close()
        found = built.get("schema_version", "none")
        raise FindError(
            f"{path}: expected schema version {SCHEMA_VERSION} (digest {SCHEMA_DIGEST}), found {found}"
            f" (digest {built.get('schema_digest', 'none')}): build it again with this version"
        )
    return conn


def parameters(spec_text, tags=(), host=""):
    """The find question's parameters as the web's form and magic parameters give them."""
    given = {name: "" for name in QUERY.params}
    given.update(spec=spec_text, host=host, tag=" ".join(tags) or EVERY_TAG)
    given.update(spec_module.sql_parameters(spec_text))
    return given


def find(conn, spec_text, tags=(), host=""):
    """The binaries matching a spec (which must parse), in the web answer's order, without its links: at most as
    many as the web shows."""
    answer = canned.ask(conn, QUERY, parameters(spec_text, tags, host))
    columns = [column for column in answer.columns if column not in WEB_ONLY_COLUMNS]
    rows = [{column: _value(column, row[column]) for column in columns} for row in answer.rows]
    return canned.Answer(columns, rows, answer.limit)


def _value(column, value):
    return json.loads(value) if column in LIST_COLUMNS else value


def unknown_names(spec, tags, host, known):
    """What in a spec (and in the tag patterns and host) names something the database does not hold;
    known(kind) lists the names of a kind it holds."""
    unknown = []
    for kind, name in _names(spec, tags, host):
        names = known(kind)
        if kind == "tag":
            held = any(fnmatch.fnmatchcase(held, name) for held in names)
        else:
            held = name in names or kind == "compiler" and normalise.other_compiler_name(name) in names
        if not held:
            unknown.append(Unknown(kind, name, difflib.get_close_matches(name, names, n=3, cutoff=0.6)))
    return unknown


def unanswerable(spec, has_edges):
    """What a spec asks that the database cannot answer whatever it holds: a dependency (^dep), of one
    without edges (built from pages)."""
    return [NO_DEPENDENCIES] if spec.dependencies and not has_edges else []


def _names(spec, tags, host):
    for node in spec.nodes:
        if node.name:
            yield "package", node.name
        if node.compiler:
            yield "compiler", node.compiler
        if node.os:
            yield "operating system", node.os
        if node.platform:
            yield "platform", node.platform
        for target in node.targets or []:
            for name in (target.get("is"), target.get("from"), target.get("to")):
                if name:
                    yield "target", name
    if host:
        yield "host CPU", host
    for pattern in tags:
        yield "tag", pattern


def known_in(conn):
    """known() for unknown_names over an open database."""
    cache = {}

    def known(kind):
        if kind not in cache:
            cache[kind] = sorted({row[0] for row in conn.execute(KNOWN_NAMES[kind])})
        return cache[kind]

    return known
