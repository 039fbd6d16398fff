"""The metadata of every database this project built, whatever its file is called: `datasette x.db` with no
`-m` gets the titles, descriptions, canned queries, facets, dashboards and plugin settings of metadata.yml,
under the name Datasette gives the database (the file's name without .db).

At start-up the plugin finds which served databases this project built (their build_info says so) and
makes their metadata from the package's metadata.base.yml and queries/. Datasette asks for metadata
many times a request (once per cell of a table, to configure a plugin): each answer holds just the part
that was asked for. Metadata given with -m still wins.
"""

import copy
import functools
import sqlite3
import sys
import weakref

from datasette import hookimpl

from spack_cache_db.db.schema import SCHEMA_VERSION, of_this_schema
from spack_cache_db.web import describe

PLUGIN = "spack-cache-db"  # the key of this project's settings in the metadata's plugins
_served = weakref.WeakKeyDictionary()  # Datasette -> ({name of one of our databases: its path}, their metadata)
_outdated = weakref.WeakKeyDictionary()  # Datasette -> {name of one of our databases: what an older version built}


async def built_by_us(db):
    """Whether a served database is one this project built."""
    try:
        rows = await db.execute("SELECT 1 FROM build_info WHERE key = 'spack_cache_db_version'")
    except sqlite3.Error:
        return False
    return bool(rows.rows)


async def note_outdated(datasette, names):
    """Of our databases, those an older version of this project built (another schema): their pages may fail
    where they read what their schema lacks. Said at start-up, and by each page that fails so (blamed_on_schema)."""
    outdated = {}
    for name in names:
        db = datasette.databases[name]
        rows = await db.execute("SELECT key, value FROM build_info")
        built = dict(rows.rows)
        if not of_this_schema(built):
            outdated[name] = OUTDATED.format(path=db.path, version=built.get("schema_version"), current=SCHEMA_VERSION)
            sys.stderr.write(f"spack-cache-db: {outdated[name]}\n")
    _outdated[datasette] = outdated


OUTDATED = (
    "{path} was built by another version of spack-cache-db (schema {version}; this one reads {current}), and"
    " pages that read what its schema lacks fail: build it again (python build_db.py build YOUR INPUTS -o {path})"
)


def blamed_on_schema(datasette, database, error):
    """What to say of an error on a database another version of this project built, when it names what the
    schema lacks (no such table, column); None for any other error, or database."""
    return _outdated.get(datasette, {}).get(database) if "no such " in str(error or "") else None


def remember(datasette, names):
    """Serve metadata for these databases (ours, in the order Datasette serves them), unless the metadata
    given with -m is that already (the README's command): adding it again would only cost time."""
    metadata = metadata_for(names) if names else {}
    given = datasette.metadata()
    if metadata == given:
        metadata = {}
    elif names:
        _warn_of_metadata_for_another_name(given, names)
    _served[datasette] = ({name: datasette.urls.database(name) for name in names}, metadata)


def _warn_of_metadata_for_another_name(given, names):
    """metadata.yml describes the database called cache: given for a database of another name, its
    dashboards (which take precedence over ours) draw from a database that is not there."""
    described = set(given.get("databases") or {}) & {describe.DATABASE}
    if described and not described & set(names):
        sys.stderr.write(
            f"spack-cache-db: the metadata given with -m describes the database {describe.DATABASE!r}, which is not"
            f" served; {', '.join(map(repr, names))} get their own metadata from this plugin, but the -m"
            " dashboards will not find their database: leave out -m\n"
        )


def limit_sorting(datasette, name, sortable):
    """Let these tables and views of the database name be sorted by these columns only ({name: [columns]},
    sorting.py), also where the rest of our metadata is left to -m's copy of it (which says nothing of this):
    Datasette merges what both say, and what -m says wins."""
    metadata = _served[datasette][1]
    tables = metadata.setdefault("databases", {}).setdefault(name, {}).setdefault("tables", {})
    for table, columns in sortable.items():
        tables.setdefault(table, {})["sortable_columns"] = columns


def ours(datasette):
    """The served databases this project built, in the order Datasette serves them: {name: its path}
    (a page's links start with it; a cell's, thousands a page, look it up rather than build it)."""
    return _served.get(datasette, ({}, {}))[0]


def query_names():
    """The canned queries this project defines (queries/*.sql)."""
    return set(_built_metadata()["databases"][describe.DATABASE]["queries"])


def metadata_for(names):
    """metadata.yml as describe makes it, its database (and the dashboards' charts) under these names; the
    dashboards draw from the first."""
    metadata = _package_metadata()
    database = metadata["databases"].pop(describe.DATABASE)
    metadata["databases"] = {name: copy.deepcopy(database) for name in names}
    for dashboard in metadata.get("plugins", {}).get("datasette-dashboards", {}).values():
        for part in [*dashboard.get("filters", {}).values(), *dashboard.get("charts", {}).values()]:
            if part.get("db") == describe.DATABASE:
                part["db"] = names[0]
    return metadata


def _package_metadata():
    return copy.deepcopy(_built_metadata())


@functools.cache
def _built_metadata():
    return describe.build_metadata()


def asked(datasette, key, database, table):
    """What Datasette's lookup of key for this database and table reads of our metadata.

    Datasette looks a key up in the table's metadata, then the database's, then the top level, and stops at
    the first level that has it: only that level of ours can be read. Answering with that level alone
    keeps cheap the lookups Datasette makes for every cell of a page, which merge the answer with the
    metadata given with -m. Like that metadata, ours is handed out as it is: Datasette merges -m into it
    (the same values every time) and plugins may set keys in it."""
    metadata = _served.get(datasette, ({}, {}))[1]
    if not metadata or key is None or key == "databases":
        return metadata
    database_metadata = metadata["databases"].get(database) if database else None
    table_metadata = (database_metadata or {}).get("tables", {}).get(table) if table else None
    if table_metadata is not None and key in table_metadata:
        return {"databases": {database: {"tables": {table: {key: table_metadata[key]}}}}}
    if database_metadata is not None and key in database_metadata:
        return {"databases": {database: {key: database_metadata[key]}}}
    return {key: metadata[key]} if key in metadata else {}


@hookimpl
def get_metadata(datasette, key, database, table):
    return asked(datasette, key, database, table)
