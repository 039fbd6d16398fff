"""The shape of cache.db, in one place: tables, indexes, full-text search and views. Every other module
takes a table's columns from here (COLUMNS, insert_sql), never restates them."""

import graphlib
import hashlib

import sqlite_utils

SCHEMA_VERSION = 4  # 3: build-cache indexes, dependencies between specs, sources' identity; 4: version keys

TABLES = """
CREATE TABLE tags (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('develop', 'release', 'snapshot', 'other')),
    snapshot_date TEXT,
    release_version TEXT,
    sort_order INTEGER NOT NULL,
    mirror_url TEXT NOT NULL
);
CREATE TABLE stacks (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE tag_stacks (
    tag_id INTEGER NOT NULL REFERENCES tags(id),
    stack_id INTEGER NOT NULL REFERENCES stacks(id),
    PRIMARY KEY (tag_id, stack_id)
) WITHOUT ROWID;
CREATE TABLE packages (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE versions (
    id INTEGER PRIMARY KEY,
    package_id INTEGER NOT NULL REFERENCES packages(id),
    version TEXT NOT NULL,
    version_rank INTEGER NOT NULL,
    version_key TEXT NOT NULL DEFAULT '',
    UNIQUE (package_id, version)
);
CREATE TABLE compilers (
    id INTEGER PRIMARY KEY,
    label TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    version TEXT,
    version_key TEXT NOT NULL DEFAULT ''
);
CREATE TABLE oss (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE platforms (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE targets (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE variants (
    id INTEGER PRIMARY KEY,
    raw TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    operator TEXT NOT NULL CHECK (operator IN ('+', '~', '=', ':=')),
    value TEXT NOT NULL
);
CREATE TABLE variant_values (
    variant_id INTEGER NOT NULL REFERENCES variants(id),
    position INTEGER NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (variant_id, position)
) WITHOUT ROWID;
CREATE TABLE variant_sets (
    id INTEGER PRIMARY KEY,
    variants TEXT NOT NULL UNIQUE,
    spec_variants TEXT NOT NULL
);
CREATE TABLE variant_set_members (
    variant_set_id INTEGER NOT NULL REFERENCES variant_sets(id),
    position INTEGER NOT NULL,
    variant_id INTEGER NOT NULL REFERENCES variants(id),
    PRIMARY KEY (variant_set_id, position)
) WITHOUT ROWID;
CREATE TABLE stack_sets (
    id INTEGER PRIMARY KEY,
    stacks TEXT NOT NULL UNIQUE
);
CREATE TABLE stack_set_members (
    stack_set_id INTEGER NOT NULL REFERENCES stack_sets(id),
    stack_id INTEGER NOT NULL REFERENCES stacks(id),
    PRIMARY KEY (stack_set_id, stack_id)
) WITHOUT ROWID;
CREATE TABLE configurations (
    id INTEGER PRIMARY KEY,
    version_id INTEGER NOT NULL REFERENCES versions(id),
    compiler_id INTEGER NOT NULL REFERENCES compilers(id),
    os_id INTEGER NOT NULL REFERENCES oss(id),
    platform_id INTEGER NOT NULL REFERENCES platforms(id),
    target_id INTEGER NOT NULL REFERENCES targets(id),
    variant_set_id INTEGER NOT NULL REFERENCES variant_sets(id),
    UNIQUE (version_id, compiler_id, os_id, platform_id, target_id, variant_set_id)
);
CREATE TABLE specs (
    id INTEGER PRIMARY KEY,
    hash TEXT NOT NULL CHECK (length(hash) = 32),
    configuration_id INTEGER NOT NULL REFERENCES configurations(id),
    size INTEGER,
    external INTEGER NOT NULL CHECK (external IN (0, 1))
);
CREATE TABLE dependency_kinds (
    id INTEGER PRIMARY KEY,
    deptypes TEXT NOT NULL,
    virtuals TEXT NOT NULL,
    UNIQUE (deptypes, virtuals)
);
CREATE TABLE spec_dependencies (
    spec_id INTEGER NOT NULL REFERENCES specs(id),
    dependency_id INTEGER NOT NULL REFERENCES specs(id),
    kind_id INTEGER NOT NULL REFERENCES dependency_kinds(id),
    PRIMARY KEY (spec_id, dependency_id)
) WITHOUT ROWID;
CREATE TABLE listings (
    id INTEGER PRIMARY KEY,
    configuration_id INTEGER NOT NULL REFERENCES configurations(id),
    stack_set_id INTEGER NOT NULL REFERENCES stack_sets(id),
    UNIQUE (configuration_id, stack_set_id)
);
CREATE TABLE sources (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    inode INTEGER NOT NULL,
    digest TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('page', 'rejected', 'old layout', 'not a page', 'skipped'))
) WITHOUT ROWID;
CREATE TABLE indexes (
    tag_id INTEGER NOT NULL REFERENCES tags(id),
    stack_id INTEGER NOT NULL REFERENCES stacks(id),
    url TEXT NOT NULL,
    mirror_url TEXT NOT NULL,
    layout TEXT NOT NULL CHECK (layout IN ('v2', 'v3', 'file')),
    database_version TEXT NOT NULL,
    checksum TEXT NOT NULL,
    etag TEXT,
    last_modified TEXT,
    records INTEGER NOT NULL,
    PRIMARY KEY (tag_id, stack_id)
) WITHOUT ROWID;
CREATE TABLE pages (
    id INTEGER PRIMARY KEY,
    tag_id INTEGER NOT NULL REFERENCES tags(id),
    package_id INTEGER NOT NULL REFERENCES packages(id),
    path TEXT NOT NULL,
    digest TEXT NOT NULL,
    num_specs INTEGER NOT NULL,
    meta TEXT NOT NULL,
    sorted_keys INTEGER NOT NULL,
    key_order TEXT,
    extra TEXT,
    UNIQUE (tag_id, package_id)
);
CREATE TABLE page_specs (
    page_id INTEGER NOT NULL REFERENCES pages(id),
    spec_id INTEGER NOT NULL REFERENCES specs(id),
    position INTEGER NOT NULL,
    listing_id INTEGER NOT NULL REFERENCES listings(id),
    compiler_exact INTEGER NOT NULL,
    standard_tarball INTEGER NOT NULL,
    extra TEXT,
    PRIMARY KEY (page_id, spec_id)
) WITHOUT ROWID;
CREATE TABLE problems (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    field TEXT NOT NULL,
    message TEXT NOT NULL,
    severity TEXT NOT NULL CHECK (severity IN ('warning', 'error')),
    tag TEXT,
    package TEXT
);
CREATE TABLE microarchitectures (
    name TEXT PRIMARY KEY,
    vendor TEXT NOT NULL,
    family TEXT NOT NULL,
    generation INTEGER NOT NULL
);
CREATE TABLE runs_on (
    host TEXT NOT NULL REFERENCES microarchitectures(name),
    target TEXT NOT NULL REFERENCES microarchitectures(name),
    PRIMARY KEY (host, target)
) WITHOUT ROWID;
CREATE TABLE row_counts (
    name TEXT PRIMARY KEY,
    count INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE binaries_cube (
    tag TEXT NOT NULL,
    os TEXT NOT NULL,
    target TEXT NOT NULL,
    compiler TEXT NOT NULL,
    stacks TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (tag, os, target, compiler, stacks)
) WITHOUT ROWID;
CREATE TABLE binary_stacks_cube (
    tag TEXT NOT NULL,
    stack TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (tag, stack)
) WITHOUT ROWID;
CREATE TABLE tag_cells (
    tag TEXT NOT NULL,
    os TEXT NOT NULL,
    target TEXT NOT NULL,
    compiler TEXT NOT NULL,
    binaries INTEGER NOT NULL,
    packages INTEGER NOT NULL,
    PRIMARY KEY (tag, os, target, compiler)
) WITHOUT ROWID;
CREATE TABLE build_info (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

INDEXES = """
CREATE UNIQUE INDEX specs_by_hash ON specs(hash);
CREATE INDEX page_specs_by_spec ON page_specs(spec_id);
CREATE INDEX page_specs_by_listing ON page_specs(listing_id);
CREATE INDEX pages_by_package ON pages(package_id);
CREATE INDEX pages_by_path ON pages(path);
CREATE INDEX spec_dependencies_by_dependency ON spec_dependencies(dependency_id);
CREATE INDEX stack_set_members_by_stack ON stack_set_members(stack_id);
CREATE INDEX variant_set_members_by_variant ON variant_set_members(variant_id);
CREATE INDEX problems_by_path ON problems(path);
"""

FULL_TEXT = """
CREATE VIRTUAL TABLE listings_fts USING fts5(
    package, version, compiler, os, platform, target, variants, stacks,
    content="listing_texts", content_rowid="id"
);
CREATE VIRTUAL TABLE packages_fts USING fts5(
    name, content="packages", content_rowid="id", tokenize="trigram"
);
"""

# A configuration's Spack spec string, from the tables a view joins (normalise.spec_string writes the same).
SPEC_SQL = (
    "packages.name || '@' || versions.version || variant_sets.spec_variants"
    " || ' arch=' || platforms.name || '-' || oss.name || '-' || targets.name"
    " || CASE WHEN compilers.name = 'none' THEN '' ELSE ' %' || compilers.label END"
)

# The tables a configuration's parts are named in, joined from configurations.
_CONFIGURATION_PARTS = """JOIN versions ON versions.id = configurations.version_id
JOIN packages ON packages.id = versions.package_id
JOIN compilers ON compilers.id = configurations.compiler_id
JOIN oss ON oss.id = configurations.os_id
JOIN platforms ON platforms.id = configurations.platform_id
JOIN targets ON targets.id = configurations.target_id
JOIN variant_sets ON variant_sets.id = configurations.variant_set_id"""

VIEWS = f"""
CREATE VIEW binaries AS
SELECT
    tags.name AS tag,
    packages.name AS package,
    versions.version AS version,
    versions.version_rank AS version_rank,
    specs.hash AS hash,
    compilers.label AS compiler,
    oss.name AS os,
    platforms.name AS platform,
    targets.name AS target,
    variant_sets.variants AS variants,
    stack_sets.stacks AS stacks,
    {SPEC_SQL} AS spec,
    'spack mirror add ' || tags.name || ' ' || tags.mirror_url || char(10)
        || 'spack buildcache keys --install --trust' || char(10)
        || 'spack install --use-buildcache only /' || specs.hash AS install,
    specs.size AS size,
    tags.sort_order AS tag_order,
    page_specs.listing_id AS listing_id
FROM page_specs
JOIN pages ON pages.id = page_specs.page_id
JOIN tags ON tags.id = pages.tag_id
JOIN packages ON packages.id = pages.package_id
-- Every key here is NOT NULL and checked, so LEFT JOIN gives the rows an inner join would. It lets SQLite
-- skip the joins a plain select of a few columns does not need (an aggregate such as count(*) still makes
-- every lookup), and keeps page_specs first in the plan; configurations come through the listing (the
-- spec's own configuration) so a search can lead.
LEFT JOIN specs ON specs.id = page_specs.spec_id
LEFT JOIN listings ON listings.id = page_specs.listing_id
LEFT JOIN configurations ON configurations.id = listings.configuration_id
LEFT JOIN versions ON versions.id = configurations.version_id
LEFT JOIN compilers ON compilers.id = configurations.compiler_id
LEFT JOIN oss ON oss.id = configurations.os_id
LEFT JOIN platforms ON platforms.id = configurations.platform_id
LEFT JOIN targets ON targets.id = configurations.target_id
LEFT JOIN variant_sets ON variant_sets.id = configurations.variant_set_id
LEFT JOIN stack_sets ON stack_sets.id = listings.stack_set_id;

-- What the full-text index reads: a listing spelled out. The index keeps only its tokens; the text
-- is read from the tables each time, so it is not stored twice.
CREATE VIEW listing_texts AS
SELECT
    listings.id AS id,
    packages.name AS package,
    versions.version AS version,
    compilers.label AS compiler,
    oss.name AS os,
    platforms.name AS platform,
    targets.name AS target,
    variant_sets.variants AS variants,
    stack_sets.stacks AS stacks
FROM listings
JOIN configurations ON configurations.id = listings.configuration_id
{_CONFIGURATION_PARTS}
JOIN stack_sets ON stack_sets.id = listings.stack_set_id;

CREATE VIEW configuration_specs AS
SELECT configurations.id AS configuration_id, {SPEC_SQL} AS spec
FROM configurations
{_CONFIGURATION_PARTS};

CREATE VIEW binary_stacks AS
SELECT
    tags.name AS tag,
    packages.name AS package,
    specs.hash AS hash,
    stacks.name AS stack,
    coalesce(
        indexes.mirror_url,
        CASE WHEN stacks.name = 'root' THEN tags.mirror_url ELSE tags.mirror_url || '/' || stacks.name END
    ) AS mirror_url
FROM page_specs
JOIN pages ON pages.id = page_specs.page_id
JOIN tags ON tags.id = pages.tag_id
JOIN packages ON packages.id = pages.package_id
JOIN specs ON specs.id = page_specs.spec_id
JOIN listings ON listings.id = page_specs.listing_id
JOIN stack_set_members ON stack_set_members.stack_set_id = listings.stack_set_id
JOIN stacks ON stacks.id = stack_set_members.stack_id
LEFT JOIN indexes ON indexes.tag_id = tags.id AND indexes.stack_id = stacks.id;

-- One row per dependency edge, from Spack's build-cache indexes (pages do not have them).
CREATE VIEW dependencies AS
SELECT
    specs.hash AS hash,
    packages.name AS package,
    versions.version AS version,
    dependency.hash AS dependency_hash,
    dependency_packages.name AS dependency,
    dependency_versions.version AS dependency_version,
    dependency_kinds.deptypes AS deptypes,
    dependency_kinds.virtuals AS virtuals,
    dependency.external AS external
FROM spec_dependencies
JOIN specs ON specs.id = spec_dependencies.spec_id
JOIN configurations ON configurations.id = specs.configuration_id
JOIN versions ON versions.id = configurations.version_id
JOIN packages ON packages.id = versions.package_id
JOIN specs AS dependency ON dependency.id = spec_dependencies.dependency_id
JOIN configurations AS dependency_configurations ON dependency_configurations.id = dependency.configuration_id
JOIN versions AS dependency_versions ON dependency_versions.id = dependency_configurations.version_id
JOIN packages AS dependency_packages ON dependency_packages.id = dependency_versions.package_id
JOIN dependency_kinds ON dependency_kinds.id = spec_dependencies.kind_id;
"""


# Counting or faceting the binaries view live takes seconds on the whole history; the Datasette
# plugin (web/counts.py, web/facets.py) answers the row counts of whole tables, and the facets of pages
# filtered only by the cube's columns, from counts taken at build time (<view>_cube); tag_cells
# answers tag_matrix for a whole tag. A build recounts only the tags whose pages it changed, in steps
# that avoid sorting a million rows at once: binaries per (page, listing), then per tag, package and
# the ids the counts need.
_COUNT_BINARIES = [
    """CREATE TEMP TABLE page_listing_counts AS
    SELECT page_id, listing_id, count(*) AS n
    FROM pages CROSS JOIN page_specs ON page_specs.page_id = pages.id
    WHERE pages.tag_id IN (SELECT id FROM recount)
    GROUP BY page_id, listing_id""",
    """CREATE TEMP TABLE package_counts AS
    SELECT pages.tag_id, pages.package_id, listings.stack_set_id, os_id, target_id, compiler_id, sum(n) AS n
    FROM page_listing_counts
    CROSS JOIN pages ON pages.id = page_id
    CROSS JOIN listings ON listings.id = listing_id
    CROSS JOIN configurations ON configurations.id = listings.configuration_id
    GROUP BY 1, 2, 3, 4, 5, 6""",
    """CREATE TEMP TABLE binary_counts AS
    SELECT tag_id, stack_set_id, os_id, target_id, compiler_id, sum(n) AS n
    FROM package_counts GROUP BY 1, 2, 3, 4, 5""",
    """INSERT INTO tag_cells
    SELECT tags.name, oss.name, targets.name, compilers.label, sum(n), count(DISTINCT package_id)
    FROM package_counts
    JOIN tags ON tags.id = tag_id JOIN oss ON oss.id = os_id JOIN targets ON targets.id = target_id
    JOIN compilers ON compilers.id = compiler_id
    GROUP BY tag_id, os_id, target_id, compiler_id""",
]
# binaries and binary_stacks, counted per combination of the columns people facet and filter by.
_CUBES = [
    """INSERT INTO binaries_cube
    SELECT tags.name, oss.name, targets.name, compilers.label, stack_sets.stacks, n
    FROM binary_counts
    JOIN tags ON tags.id = tag_id JOIN oss ON oss.id = os_id JOIN targets ON targets.id = target_id
    JOIN compilers ON compilers.id = compiler_id JOIN stack_sets ON stack_sets.id = stack_set_id""",
    """INSERT INTO binary_stacks_cube
    SELECT tags.name, stacks.name, sum(n)
    FROM binary_counts
    JOIN tags ON tags.id = tag_id JOIN stack_set_members USING (stack_set_id)
    JOIN stacks ON stacks.id = stack_set_members.stack_id
    GROUP BY tags.name, stacks.name""",
]
_VIEW_COUNTS = {
    "binaries": "SELECT coalesce(sum(count), 0) FROM binaries_cube",
    "dependencies": "SELECT count(*) FROM spec_dependencies",
    "binary_stacks": "SELECT coalesce(sum(count), 0) FROM binary_stacks_cube",
}


def _tables(ddl):
    db = sqlite_utils.Database(memory=True)
    db.executescript(ddl)
    return {name: db[name] for name in db.table_names()}


_DECLARED = _tables(TABLES)
COLUMNS = {name: tuple(column.name for column in table.columns) for name, table in _DECLARED.items()}
# An order in which every row's parents (foreign keys) are written before it.
LOAD_ORDER = tuple(
    graphlib.TopologicalSorter(
        {name: {key.other_table for key in table.foreign_keys} - {name} for name, table in _DECLARED.items()}
    ).static_order()
)


# Columns with a DEFAULT are filled in once everything is loaded (version keys), not by the rows written.
INSERTED_COLUMNS = {
    name: tuple(column.name for column in table.columns if column.default_value is None)
    for name, table in _DECLARED.items()
}


def insert_sql(table, replace_on_conflict=False):
    """INSERT of a row of table, its values in INSERTED_COLUMNS order; with replace_on_conflict, a row whose
    primary key exists already is updated instead."""
    columns = INSERTED_COLUMNS[table]
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    if replace_on_conflict:
        keys = _DECLARED[table].pks
        updates = ", ".join(f"{column} = excluded.{column}" for column in columns if column not in keys)
        sql += f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
    return sql


# Incremental builds only build onto a database of exactly this shape.
SCHEMA_DIGEST = hashlib.blake2b((TABLES + INDEXES + FULL_TEXT + VIEWS).encode(), digest_size=8).hexdigest()


def create_schema(conn):
    """Create every table, index, full-text index and view of an empty database."""
    conn.executescript(TABLES + INDEXES + FULL_TEXT + VIEWS)


def refresh_counts(conn, tag_ids=None):
    """Recount the cubes and tag_cells for these tags (None: every tag), then row_counts of every table and view."""
    conn.execute("CREATE TEMP TABLE recount (id INTEGER PRIMARY KEY)")
    if tag_ids is None:
        conn.execute("INSERT INTO recount SELECT id FROM tags")
    else:
        conn.executemany("INSERT OR IGNORE INTO recount VALUES (?)", [(tag_id,) for tag_id in tag_ids])
    for table in ("binaries_cube", "binary_stacks_cube", "tag_cells"):
        conn.execute(
            f"DELETE FROM {table} WHERE tag IN (SELECT name FROM tags WHERE id IN (SELECT id FROM recount))"
            " OR tag NOT IN (SELECT name FROM tags)"
        )
    for statement in _COUNT_BINARIES + _CUBES:
        conn.execute(statement)
    for temporary in ("recount", "page_listing_counts", "package_counts", "binary_counts"):
        conn.execute(f"DROP TABLE temp.{temporary}")
    counts = {view: conn.execute(sql).fetchone()[0] for view, sql in _VIEW_COUNTS.items()}
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    counts.update({table: conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] for table in tables})
    counts["row_counts"] = len(counts)
    conn.execute("DELETE FROM row_counts")
    conn.executemany("INSERT INTO row_counts VALUES (?, ?)", sorted(counts.items()))
