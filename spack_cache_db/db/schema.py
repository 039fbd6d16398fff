"""The shape of cache.db, in one place: tables, indexes, full-text search and views. Everything else about a
table is derived from its declaration here, never restated: its columns and rows (COLUMNS, ROWS), insert
statements, the order rows are written in, its identity (its UNIQUE key: how the loader looks rows up), its
references and which of its rows are orphans (foreign keys; ON DELETE CASCADE marks a row that belongs
to its parent), and the columns of its full-text index."""

import ast
import collections
import functools
import graphlib
import hashlib
import operator
import re
from typing import NamedTuple

import sqlite_utils

from spack_cache_db.normalise import (
    COMPILER_TEMPLATE,
    NO_COMPILER,
    OTHER_COMPILER_NAMES,
    SPEC_TEMPLATE,
    sql_literal,
    template_sql,
)

# 3: build-cache indexes, edges, sources' identity; 4: cascades; 5: version keys; 6: deptype flags on
# dependency_kinds; 7: facet counts (per value and pair of values) in place of binaries_cube; 8: full-text
# indexes without column sizes, dependency_edge_counts; 9: listings by stack set; 10: binaries per listing;
# 11: configurations by variant set; 12: per-tag rows by tag; 13: the view tag_before; 14: the view
# tag_stack_cell_names; 15: page_stacks, key_orders, and a page's meta only where its binaries imply another;
# no digest of pages (sources has it); 16: the listing of a source's folder
SCHEMA_VERSION = 16

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
    variant_id INTEGER NOT NULL REFERENCES variants(id) ON DELETE CASCADE,
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
    variant_set_id INTEGER NOT NULL REFERENCES variant_sets(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    variant_id INTEGER NOT NULL REFERENCES variants(id),
    PRIMARY KEY (variant_set_id, position)
) WITHOUT ROWID;
CREATE TABLE stack_sets (
    id INTEGER PRIMARY KEY,
    stacks TEXT NOT NULL UNIQUE
);
CREATE TABLE stack_set_members (
    stack_set_id INTEGER NOT NULL REFERENCES stack_sets(id) ON DELETE CASCADE,
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
-- The specs a tag's indexes give as dependencies only, not as binaries (externals, build-only compilers): those
-- no page of the tag lists. By configuration and tag: a package's are found without looking for a page of
-- each of its specs, which are as many as the history has.
CREATE TABLE dependency_only_specs (
    configuration_id INTEGER NOT NULL REFERENCES configurations(id),
    tag_id INTEGER NOT NULL REFERENCES tags(id),
    spec_id INTEGER NOT NULL REFERENCES specs(id),
    PRIMARY KEY (configuration_id, tag_id, spec_id)
) WITHOUT ROWID;
CREATE TABLE dependency_kinds (
    id INTEGER PRIMARY KEY,
    deptypes TEXT NOT NULL,
    virtuals TEXT NOT NULL,
    is_build INTEGER NOT NULL CHECK (is_build IN (0, 1)),
    is_link INTEGER NOT NULL CHECK (is_link IN (0, 1)),
    is_run INTEGER NOT NULL CHECK (is_run IN (0, 1)),
    is_test INTEGER NOT NULL CHECK (is_test IN (0, 1)),
    UNIQUE (deptypes, virtuals)
);
CREATE TABLE spec_dependencies (
    spec_id INTEGER NOT NULL REFERENCES specs(id) ON DELETE CASCADE,
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
    path TEXT PRIMARY KEY ON CONFLICT REPLACE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    inode INTEGER NOT NULL,
    digest TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('page', 'rejected', 'old layout', 'not a page', 'skipped')),
    -- The folder the file was listed in, as read/files.py's FolderListing says it was listed, when the next build
    -- need not list it again (a folder of files only, not changed just before); NULL otherwise. A column of each
    -- of its files rather than a table of folders: the paths of a history's 90,000 folders would take 1 byte
    -- per binary (of the 160 the usual history may take), these columns 0.24.
    folder_ctime_ns INTEGER,
    folder_inode INTEGER,
    folder_entries INTEGER,
    CHECK ((folder_ctime_ns IS NULL) = (folder_inode IS NULL) AND (folder_inode IS NULL) = (folder_entries IS NULL))
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
-- The orders in which pages that do not sort their spec_details' keys write them (export writes them back so):
-- a few, each shared by many pages.
CREATE TABLE key_orders (
    id INTEGER PRIMARY KEY,
    keys TEXT NOT NULL UNIQUE
);
CREATE TABLE pages (
    id INTEGER PRIMARY KEY,
    tag_id INTEGER NOT NULL REFERENCES tags(id),
    package_id INTEGER NOT NULL REFERENCES packages(id),
    path TEXT NOT NULL,
    num_specs INTEGER NOT NULL,
    -- As the page has it where it is not the text the page's binaries imply (a disagreement is in problems);
    -- NULL where it is that text, which export writes again.
    meta TEXT,
    sorted_keys INTEGER NOT NULL,
    key_order_id INTEGER REFERENCES key_orders(id),
    extra TEXT,
    UNIQUE (tag_id, package_id)
);
CREATE TABLE page_specs (
    page_id INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
    spec_id INTEGER NOT NULL REFERENCES specs(id),
    position INTEGER NOT NULL,
    listing_id INTEGER NOT NULL REFERENCES listings(id),
    compiler_exact INTEGER NOT NULL,
    standard_tarball INTEGER NOT NULL,
    extra TEXT,
    PRIMARY KEY (page_id, spec_id)
) WITHOUT ROWID;
-- A page's binaries per stack (its meta's num_specs_by_stack, counted from its binaries): a tag's stacks and
-- packages are counted from a few rows per page, not from every binary.
CREATE TABLE page_stacks (
    page_id INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
    stack_id INTEGER NOT NULL REFERENCES stacks(id),
    binaries INTEGER NOT NULL,
    PRIMARY KEY (page_id, stack_id)
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
    host TEXT NOT NULL REFERENCES microarchitectures(name) ON DELETE CASCADE,
    target TEXT NOT NULL REFERENCES microarchitectures(name) ON DELETE CASCADE,
    PRIMARY KEY (host, target)
) WITHOUT ROWID;
CREATE TABLE row_counts (
    name TEXT PRIMARY KEY,
    count INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE binaries_facet_counts (
    facet TEXT NOT NULL,
    value TEXT NOT NULL,
    binaries INTEGER NOT NULL,
    PRIMARY KEY (facet, value)
) WITHOUT ROWID;
CREATE TABLE binaries_facet_pairs (
    facet TEXT NOT NULL,
    value TEXT NOT NULL,
    other TEXT NOT NULL,
    other_value TEXT NOT NULL,
    binaries INTEGER NOT NULL,
    PRIMARY KEY (facet, value, other, other_value)
) WITHOUT ROWID;
CREATE TABLE binaries_tag_facet_pairs (
    tag TEXT NOT NULL,
    facet TEXT NOT NULL,
    value TEXT NOT NULL,
    other TEXT NOT NULL,
    other_value TEXT NOT NULL,
    binaries INTEGER NOT NULL,
    PRIMARY KEY (tag, facet, value, other, other_value)
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
-- By ids, not names as tag_cells (which counts.py reads as a cube of the view's columns): a tag has a cell per
-- stack, os, target and compiler its binaries have, a few per binary where each binary has its own stacks. The
-- stack by name: deleting a row that a cell refers to reads every cell (no index but the key), and a removed
-- tag's stacks often go with it, where an os, a target or a compiler seldom goes.
CREATE TABLE tag_stack_cells (
    tag_id INTEGER NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
    stack TEXT NOT NULL,
    os_id INTEGER NOT NULL REFERENCES oss(id) ON DELETE CASCADE,
    target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
    compiler_id INTEGER NOT NULL REFERENCES compilers(id) ON DELETE CASCADE,
    binaries INTEGER NOT NULL,
    packages INTEGER NOT NULL,
    PRIMARY KEY (tag_id, stack, os_id, target_id, compiler_id)
) WITHOUT ROWID;
CREATE TABLE tag_version_counts (
    version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
    tag_id INTEGER NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
    binaries INTEGER NOT NULL,
    PRIMARY KEY (version_id, tag_id)
) WITHOUT ROWID;
CREATE TABLE dependency_edge_counts (
    version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
    kind_id INTEGER NOT NULL REFERENCES dependency_kinds(id) ON DELETE CASCADE,
    edges INTEGER NOT NULL,
    PRIMARY KEY (version_id, kind_id)
) WITHOUT ROWID;
-- Beside each listing's binaries, the ids of the values its binaries have of the view's facets (those of its
-- configuration and its stack set): a search's count reads this row for each match, and checks a facet's filter
-- on it. Copies of what the listing refers to, not references of their own: deleting the listing deletes them.
CREATE TABLE listing_binaries (
    listing_id INTEGER PRIMARY KEY REFERENCES listings(id) ON DELETE CASCADE,
    os_id INTEGER NOT NULL,
    target_id INTEGER NOT NULL,
    compiler_id INTEGER NOT NULL,
    stack_set_id INTEGER NOT NULL,
    binaries INTEGER NOT NULL
);
CREATE TABLE build_info (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

INDEXES = """
CREATE UNIQUE INDEX specs_by_hash ON specs(hash);
CREATE INDEX page_specs_by_spec ON page_specs(spec_id);
CREATE INDEX pages_by_package ON pages(package_id);
CREATE INDEX stack_set_members_by_stack ON stack_set_members(stack_id);
CREATE INDEX variant_set_members_by_variant ON variant_set_members(variant_id);
CREATE INDEX problems_by_path ON problems(path);
"""
# Indexes that nothing reads while rows are loaded: a new database gets them once its rows are written
# (create_indexes_after_load), built from sorted rows. Kept through millions of random inserts instead, they
# cost the writer process, the busier one, about 25 s of CPU in a 100-tag history's build (36 s in the
# spread shape); made afterwards, 4-7 s.
INDEXES_AFTER_LOAD = """
CREATE INDEX page_specs_by_listing ON page_specs(listing_id);
CREATE INDEX spec_dependencies_by_dependency ON spec_dependencies(dependency_id, kind_id);
-- Also what deleting a configuration reads: SQLite looks for specs that still refer to it, one scan of every
-- spec per configuration without this index (a changed tag of a 5M-binary history: 49 s instead of 2).
CREATE INDEX specs_by_configuration ON specs(configuration_id);
-- Likewise for deleting a stack set: without it, a scan of every listing per stack set (removing a tag of
-- the spread history: 24 s for 218 stack sets).
CREATE INDEX listings_by_stack_set ON listings(stack_set_id);
-- And for deleting a spec: SQLite looks for rows that still name it, one scan of the table per spec without it.
CREATE INDEX dependency_only_specs_by_spec ON dependency_only_specs(spec_id);
-- And for deleting a variant set: without it, a scan of every configuration per variant set (removing a tag
-- of the usual history: 0.15 s for its 17 variant sets, of the 4 s the removal takes).
CREATE INDEX configurations_by_variant_set ON configurations(variant_set_id);
-- And for deleting a stack: without it, a scan of every page's stacks per stack.
CREATE INDEX page_stacks_by_stack ON page_stacks(stack_id);
-- And for deleting a tag: without them, a scan of each table (the counts of every version in every tag, the
-- dependency-only specs of every tag) for the tag. (Whether an os, a platform, a target or a compiler is still
-- used is read from every configuration: a few rows, once a removal deletes configurations; an index each
-- would cost more room than their scans time, about 10 ms each in the usual history.)
CREATE INDEX tag_version_counts_by_tag ON tag_version_counts(tag_id);
CREATE INDEX dependency_only_specs_by_tag ON dependency_only_specs(tag_id);
"""

_EVERY_INDEX = INDEXES + INDEXES_AFTER_LOAD

# Full-text indexes (FTS5), each over the rows of one table: its columns are those of the table or view its
# text is read from (but id), so the text is not stored twice.
FULL_TEXT = {
    # index: (the table whose ids are its rowids, the table or view it reads their text from, its tokenizer)
    "listings_fts": ("listings", "listing_texts", None),
    "packages_fts": ("packages", "packages", "trigram"),  # any part of a name
}

# A configuration's Spack spec string (normalise.SPEC_TEMPLATE), from the tables a view joins.
SPEC_SQL = (
    template_sql(
        SPEC_TEMPLATE,
        {
            "package": "packages.name",
            "version": "versions.version",
            "variants": "variant_sets.spec_variants",
            "platform": "platforms.name",
            "os": "oss.name",
            "target": "targets.name",
        },
    )
    + f" || CASE WHEN compilers.name = '{NO_COMPILER}' THEN ''"
    f" ELSE {template_sql(COMPILER_TEMPLATE, {'compiler': 'compilers.label'})} END"
)

# What a configuration's parts are named by, each a join from configurations (packages through versions).
_CONFIGURATION_PARTS = {
    "versions": "versions ON versions.id = configurations.version_id",
    "packages": "packages ON packages.id = versions.package_id",
    "compilers": "compilers ON compilers.id = configurations.compiler_id",
    "oss": "oss ON oss.id = configurations.os_id",
    "platforms": "platforms ON platforms.id = configurations.platform_id",
    "targets": "targets ON targets.id = configurations.target_id",
    "variant_sets": "variant_sets ON variant_sets.id = configurations.variant_set_id",
}
# Every key here is NOT NULL and checked, so LEFT JOIN gives the rows an inner join would. It lets SQLite
# skip the joins a select of a few columns does not need (an aggregate such as count(*) still makes every
# lookup), and keeps the table the view starts from first in the plan.


def _left_joined(parts):
    return "\n".join(f"LEFT JOIN {_CONFIGURATION_PARTS[part]}" for part in parts)


# The commands that install a tag's binary, but its hash.
_INSTALL_SQL = (
    "'spack mirror add ' || tags.name || ' ' || tags.mirror_url || char(10)"
    " || 'spack buildcache keys --install --trust' || char(10) || 'spack install --use-buildcache only /'"
)

# What the dependency questions say of a database without dependency edges (built from pages only): the web's
# questions read it from the view sentences, the terminal and the package page from here.
NO_DEPENDENCIES = (
    "This database has no dependencies: they come from build-cache indexes (build it from a"
    " cache_spack_io_index.json or a mirror); cache.spack.io's pages do not list them."
)

_COMPILER_ALIASES_SQL = ", ".join(
    f"({sql_literal(name)}, {sql_literal(other)})" for name, other in OTHER_COMPILER_NAMES.items()
)

VIEWS = f"""
-- A compiler's name in the other of Spack 0.x and 1.x, both ways (normalise.OTHER_COMPILER_NAMES): a question
-- that takes a compiler finds the binaries of either name (oneapi, intel-oneapi-compilers).
CREATE VIEW compiler_aliases(name, other) AS VALUES {_COMPILER_ALIASES_SQL};

-- What the questions say, written once: of a database without dependency edges (NO_DEPENDENCIES).
CREATE VIEW sentences AS
SELECT {sql_literal(NO_DEPENDENCIES)} AS no_dependencies;

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
    {_INSTALL_SQL} || specs.hash AS install,
    specs.size AS size,
    tags.sort_order AS tag_order,
    page_specs.listing_id AS listing_id
FROM page_specs
JOIN pages ON pages.id = page_specs.page_id
JOIN tags ON tags.id = pages.tag_id
JOIN packages ON packages.id = pages.package_id
-- Configurations come through the listing (the spec's own configuration) so a search can lead; the package
-- is the page's.
LEFT JOIN specs ON specs.id = page_specs.spec_id
LEFT JOIN listings ON listings.id = page_specs.listing_id
LEFT JOIN configurations ON configurations.id = listings.configuration_id
{_left_joined(part for part in _CONFIGURATION_PARTS if part != "packages")}
LEFT JOIN stack_sets ON stack_sets.id = listings.stack_set_id;

-- What the full-text index reads: a listing spelled out. The index keeps only its tokens; the text
-- is read from the tables each time, so it is not stored twice.
CREATE VIEW listing_texts AS
SELECT
    listings.id AS id,
    configuration_specs.package,
    configuration_specs.version,
    configuration_specs.compiler,
    configuration_specs.os,
    configuration_specs.platform,
    configuration_specs.target,
    configuration_specs.variants,
    stack_sets.stacks AS stacks
FROM listings
JOIN configuration_specs ON configuration_specs.configuration_id = listings.configuration_id
JOIN stack_sets ON stack_sets.id = listings.stack_set_id;

-- A configuration spelled out: its parts' names, and its spec string. Canned queries join it by
-- configuration_id for whatever of a binary they show.
CREATE VIEW configuration_specs AS
SELECT
    configurations.id AS configuration_id,
    versions.package_id,
    packages.name AS package,
    versions.version,
    versions.version_rank,
    compilers.label AS compiler,
    compilers.name AS compiler_name,
    compilers.version AS compiler_version,
    oss.name AS os,
    platforms.name AS platform,
    targets.name AS target,
    variant_sets.variants,
    {SPEC_SQL} AS spec
FROM configurations
-- Versions inner joined: a filter on the package then starts from its versions (by the index on package_id and
-- version) and their configurations (by the index that starts with version_id), where a LEFT JOIN kept
-- configurations first and scanned every one of them (?package=cit of a spread history: 67 ms against 3).
JOIN {_CONFIGURATION_PARTS["versions"]}
{_left_joined(part for part in _CONFIGURATION_PARTS if part != "versions")};

-- The tag a question shows when none is given: develop, or else the first tag with pages in the usual order.
CREATE VIEW default_tag AS
SELECT name FROM tags WHERE EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id) ORDER BY sort_order LIMIT 1;

-- The tag a comparison with a tag starts from when none is given: the next tag with pages in the usual order of
-- the same kind (the release before a release, the snapshot before a snapshot), or any kind after develop. The
-- oldest release is not compared with the newest snapshot, nor the oldest tag with nothing: they have none.
CREATE VIEW tag_before AS
SELECT tags.name, (
    SELECT earlier.name FROM tags AS earlier
    WHERE earlier.sort_order > tags.sort_order AND tags.kind IN (earlier.kind, 'develop')
        AND EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = earlier.id)
    ORDER BY earlier.sort_order LIMIT 1
) AS before
FROM tags;

-- How to install a tag's binaries: install || hash is the three commands for one of them.
CREATE VIEW tag_installs AS
SELECT tags.id AS tag_id, tags.name AS tag, {_INSTALL_SQL} AS install
FROM tags;

-- Each version with its package's name.
CREATE VIEW version_names AS
SELECT
    versions.package_id,
    packages.name AS package,
    versions.id AS version_id,
    versions.version,
    versions.version_rank
FROM versions
JOIN packages ON packages.id = versions.package_id;

-- The binaries of each tag per stack, os, target and compiler (tag_stack_cells), by name: stacks is the one stack
-- a row counts. The binaries page's count when it is filtered by one stack and any of the others.
CREATE VIEW tag_stack_cell_names AS
SELECT
    tags.name AS tag,
    cells.stack AS stacks,
    oss.name AS os,
    targets.name AS target,
    compilers.label AS compiler,
    cells.binaries
FROM tag_stack_cells AS cells
JOIN tags ON tags.id = cells.tag_id
JOIN oss ON oss.id = cells.os_id
JOIN targets ON targets.id = cells.target_id
JOIN compilers ON compilers.id = cells.compiler_id;

-- How many binaries each tag has of each version of a package (counted by the build).
CREATE VIEW version_tags AS
SELECT
    version_names.*,
    tags.id AS tag_id,
    tags.name AS tag,
    tags.kind,
    tags.snapshot_date,
    tags.sort_order AS tag_order,
    tag_version_counts.binaries
FROM version_names
JOIN tag_version_counts ON tag_version_counts.version_id = version_names.version_id
JOIN tags ON tags.id = tag_version_counts.tag_id;

-- One row per version of a package: the tags that have it (as the build counted them), in the usual order.
CREATE VIEW version_history AS
SELECT
    version_names.*,
    (SELECT count(*) FROM tag_version_counts WHERE version_id = version_names.version_id) AS tags,
    (
        SELECT json_group_object(tag, binaries) FROM (
            SELECT tag, binaries FROM version_tags WHERE version_id = version_names.version_id ORDER BY tag_order
        )
    ) AS specs_per_tag,
    (SELECT tag FROM version_tags WHERE version_id = version_names.version_id ORDER BY tag_order LIMIT 1) AS newest_tag,
    (SELECT tag FROM version_tags WHERE version_id = version_names.version_id ORDER BY tag_order DESC LIMIT 1) AS oldest_tag,
    (
        SELECT json_group_array(tag) FROM (
            SELECT tag FROM version_tags WHERE version_id = version_names.version_id AND kind = 'snapshot' ORDER BY tag_order
        )
    ) AS snapshots_newest_first,
    (
        SELECT json_group_array(tag) FROM (
            SELECT tag FROM version_tags WHERE version_id = version_names.version_id AND kind = 'release' ORDER BY tag_order
        )
    ) AS releases,
    EXISTS (SELECT 1 FROM version_tags WHERE version_id = version_names.version_id AND kind = 'develop') AS in_develop
FROM version_names;

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

-- The stack sets that hold each stack, by the stack's name (a listing's stacks are its stack set).
CREATE VIEW stack_memberships AS
SELECT stacks.name AS stack, stack_set_members.stack_set_id
FROM stacks
JOIN stack_set_members ON stack_set_members.stack_id = stacks.id;

-- Each spec by id: its hash, package and version (and whether it is an external).
CREATE VIEW spec_names AS
SELECT specs.id, specs.hash, version_names.package, version_names.version, specs.external
FROM specs
JOIN configurations ON configurations.id = specs.configuration_id
JOIN version_names ON version_names.version_id = configurations.version_id;

-- The tags whose pages list each spec (a binary of a tag is a spec its pages list), and its package.
CREATE VIEW spec_tags AS
SELECT page_specs.spec_id, pages.tag_id, pages.package_id
FROM page_specs
JOIN pages ON pages.id = page_specs.page_id;

-- Each page's tag by name: the binaries page's facets count a page's binaries once, then name its tag.
CREATE VIEW page_tags AS
SELECT pages.id AS page_id, tags.name AS tag
FROM pages
JOIN tags ON tags.id = pages.tag_id;

-- A spec and a spec it links against: the edges whose kind has the link flag.
CREATE VIEW link_edges AS
SELECT spec_dependencies.spec_id, spec_dependencies.dependency_id
FROM spec_dependencies
JOIN dependency_kinds ON dependency_kinds.id = spec_dependencies.kind_id
WHERE dependency_kinds.is_link;

-- One row per dependency edge, from Spack's build-cache indexes (pages do not have them). The dependency is
-- joined, so that its edges, and their count, are read from the index of edges by dependency; the spec that
-- depends is looked up for the rows shown only (filters on it are narrowed to its spec_id: see metadata).
CREATE VIEW dependencies AS
SELECT
    spec_dependencies.spec_id,
    (SELECT hash FROM specs WHERE specs.id = spec_dependencies.spec_id) AS hash,
    (SELECT package FROM spec_names WHERE spec_names.id = spec_dependencies.spec_id) AS package,
    (SELECT version FROM spec_names WHERE spec_names.id = spec_dependencies.spec_id) AS version,
    dependency.hash AS dependency_hash,
    dependency.package AS dependency,
    dependency.version AS dependency_version,
    (SELECT deptypes FROM dependency_kinds WHERE dependency_kinds.id = spec_dependencies.kind_id) AS deptypes,
    (SELECT virtuals FROM dependency_kinds WHERE dependency_kinds.id = spec_dependencies.kind_id) AS virtuals,
    dependency.external
FROM spec_dependencies
JOIN spec_names AS dependency ON dependency.id = spec_dependencies.dependency_id;

-- Edges per dependency (its package and version) and kind, named as the dependencies view names them (counted
-- by the build): the row count of a page of that view filtered by these columns, a few rows read by key.
CREATE VIEW dependency_edge_totals AS
SELECT
    version_names.package AS dependency,
    version_names.version AS dependency_version,
    dependency_kinds.deptypes,
    dependency_kinds.virtuals,
    dependency_edge_counts.edges
FROM dependency_edge_counts
JOIN version_names ON version_names.version_id = dependency_edge_counts.version_id
JOIN dependency_kinds ON dependency_kinds.id = dependency_edge_counts.kind_id;
"""


# Counting or faceting the binaries view live takes seconds on the whole history; the Datasette
# plugin (web/counts.py, web/facets.py) answers the row counts of whole tables from row_counts, and the
# counts and facets of pages filtered by a few facet values from counts taken at build time: per value and
# per pair of values of the facet columns (binaries_facet_counts, binaries_facet_pairs; per tag:
# binaries_tag_facet_pairs), and binary_stacks from its cube (tag x stack: binary_stacks_cube); tag_cells
# answers tag_matrix for a whole tag, and tag_stack_cells for a stack of it.


class CountedFacet(NamedTuple):
    """A column the binaries view is faceted by, as the build counts it: the column of listing_counts with
    the id of a binary's value, and the table and column naming it. For an array, that id is a set's, and
    members names the table of the set's members, its set column and its member column: a binary counts
    once for each member."""

    column: str
    names: str
    name: str
    members: tuple[str, str, str] | None = None


# The facets of the binaries view: tag, then the facets counted per tag.
PER_TAG = "tag"
BINARY_FACETS = {
    PER_TAG: CountedFacet("tag_id", "tags", "name"),
    "os": CountedFacet("os_id", "oss", "name"),
    "target": CountedFacet("target_id", "targets", "name"),
    "compiler": CountedFacet("compiler_id", "compilers", "label"),
    "stacks": CountedFacet("stack_set_id", "stacks", "name", ("stack_set_members", "stack_set_id", "stack_id")),
}


# The array that stack_counts and tag_stack_cells count per member: a binary once in each of its stacks.
_SPREAD = "stacks"


def _counts_of(facets):
    """The table of the recounted tags' counts by ids to count these facets from, the smallest that has them, and
    whether it counts an array's members rather than its sets: scalar_counts (a row per tag and cell) for no
    array, stack_counts (per tag, stack and cell: 8,116 rows in a spread tag) for the stacks with facets of the
    cell, and listing_counts (per listing) for the rest, stacks x stacks."""
    arrays = [facet for facet in facets if BINARY_FACETS[facet].members]
    if not arrays:
        return "scalar_counts", False
    if arrays == [_SPREAD]:
        return "stack_counts", True
    return "listing_counts", False


def _value_id(facet, alias, spread):
    """The id of a facet's value in grouped.<alias>, and the join it needs: a set's member for an array counted by
    its sets (spread: by its members already)."""
    counted = BINARY_FACETS[facet]
    if counted.members is None or spread:
        return f"grouped.{alias}", ""
    members, of_set, member = counted.members
    return (
        f"{alias}_members.{member}",
        f"JOIN {members} AS {alias}_members ON {alias}_members.{of_set} = grouped.{alias}",
    )


def _per_tag(facets, into):
    """INSERT INTO into (tag, then for each facet its name and value, then binaries): the recounted tags'
    binaries per tag and values of these facets, from the smallest table of counts that has them (_counts_of).
    Counted by ids, an array's sets spread over their members, and only then named: the sorter's rows carry no
    text (benchmarks/README.md has what both saved)."""
    counted, spread = _counts_of(facets)
    aliased = {f"f{n}": facet for n, facet in enumerate(facets)}
    columns = {
        alias: BINARY_FACETS[facet].members[2]
        if spread and BINARY_FACETS[facet].members
        else BINARY_FACETS[facet].column
        for alias, facet in aliased.items()
    }
    ids = ", ".join(f"{column} AS {alias}" for alias, column in columns.items())
    value_ids = {alias: _value_id(facet, alias, spread) for alias, facet in aliased.items()}
    named = " ".join(
        f"JOIN {BINARY_FACETS[facet].names} AS {alias} ON {alias}.id = valued.{alias}"
        for alias, facet in aliased.items()
    )
    values = ", ".join(f"'{facet}', {alias}.{BINARY_FACETS[facet].name}" for alias, facet in aliased.items())
    return f"""INSERT INTO {into}
    SELECT tags.name, {values}, valued.n
    FROM (
        SELECT grouped.tag_id, {", ".join(f"{value_id} AS {alias}" for alias, (value_id, _) in value_ids.items())},
        sum(grouped.n) AS n
        FROM (SELECT tag_id, {ids}, sum(n) AS n FROM {counted} GROUP BY {", ".join(["tag_id", *aliased])}) AS grouped
        {" ".join(join for _, join in value_ids.values())}
        GROUP BY {", ".join(["grouped.tag_id", *(value_id for value_id, _ in value_ids.values())])}
    ) AS valued
    JOIN tags ON tags.id = valued.tag_id {named}"""


# What a cell of tag_cells and tag_stack_cells is per tag (and stack): the value of every facet but the tag and
# arrays, so that scalar_counts, the binaries per tag and cell, counts every facet but arrays.
_CELL = tuple(c.column for facet, c in BINARY_FACETS.items() if facet != PER_TAG and c.members is None)


def _cells_counted(per_stack):
    """The recounted tags' binaries and packages per os, target and compiler, and per_stack, per stack they are
    in: (tag_id, [stack_id,] os_id, target_id, compiler_id, n, packages)."""
    members, of_set, member = BINARY_FACETS[_SPREAD].members
    grouped = ", ".join(["tag_id", *([member] if per_stack else []), *_CELL])
    rows = f"listing_counts CROSS JOIN {members} USING ({of_set})" if per_stack else "listing_counts"
    return f"SELECT {grouped}, sum(n) AS n, count(DISTINCT package_id) AS packages FROM {rows} GROUP BY {grouped}"


_COUNT_CELLS = [
    f"CREATE TEMP TABLE scalar_counts AS {_cells_counted(per_stack=False)}",
    """INSERT INTO tag_cells
    SELECT tags.name, oss.name, targets.name, compilers.label, n, packages
    FROM scalar_counts AS cells
    JOIN tags ON tags.id = tag_id JOIN oss ON oss.id = os_id JOIN targets ON targets.id = target_id
    JOIN compilers ON compilers.id = compiler_id""",
    f"CREATE TEMP TABLE stack_counts AS {_cells_counted(per_stack=True)}",
    f"""INSERT INTO tag_stack_cells
    SELECT tag_id, stacks.name, {", ".join(_CELL)}, n, packages FROM stack_counts JOIN stacks ON stacks.id = stack_id""",
]


# The ids of a listing's facet values but its tag (its configuration's, and its stack set), read through
# _LISTING: what a tag's recount groups binaries by (listing_counts), and what listing_binaries keeps.
_LISTING_FACET_IDS = (
    "configurations.os_id",
    "configurations.target_id",
    "configurations.compiler_id",
    "listings.stack_set_id",
)
_LISTING = "listings CROSS JOIN configurations ON configurations.id = listings.configuration_id"

_COUNTED_PER_TAG = [facet for facet in BINARY_FACETS if facet != PER_TAG]


# Pairs of facets counted per tag, each once (the other order is copied): two different facets, or an array
# with itself (the stacks a binary is in, two at a time, each with itself too).
_PAIRS = [
    (facet, other)
    for n, facet in enumerate(_COUNTED_PER_TAG)
    for other in _COUNTED_PER_TAG[n:]
    if other != facet or BINARY_FACETS[facet].members
]
_RECOUNTED = "(SELECT name FROM recounted_tags)"

# A build recounts only the tags whose pages it changed (their ids in temp.recount), and tags gone since.
# The counts of every tag (binaries_facet_counts and binaries_facet_pairs) are kept by taking away what the
# recounted tags had (their rows with the tag, and binaries_tag_facet_pairs) and adding what they have now:
# the cost is that of the recounted tags, not of the history. Binaries are counted per (page, listing) first,
# then per the ids each count needs.
RECOUNT_TAGS = [
    f"""CREATE TEMP TABLE recounted_tags AS
    SELECT name FROM tags WHERE id IN (SELECT id FROM recount)
    UNION SELECT value FROM binaries_facet_counts WHERE facet = '{PER_TAG}' AND value NOT IN (SELECT name FROM tags)""",
    f"""CREATE TEMP TABLE value_changes AS
    SELECT other AS facet, other_value AS value, -binaries AS binaries FROM binaries_facet_pairs
    WHERE facet = '{PER_TAG}' AND value IN {_RECOUNTED}""",
    f"""CREATE TEMP TABLE pair_changes AS
    SELECT facet, value, other, other_value, -binaries AS binaries FROM binaries_tag_facet_pairs
    WHERE tag IN {_RECOUNTED}""",
    *(
        f"DELETE FROM {table} WHERE tag IN {_RECOUNTED}"
        for table in ("binary_stacks_cube", "tag_cells", "binaries_tag_facet_pairs")
    ),
    *(
        f"DELETE FROM {table} WHERE tag_id IN (SELECT id FROM recount)"
        for table in ("tag_version_counts", "tag_stack_cells")
    ),
    f"DELETE FROM binaries_facet_counts WHERE facet = '{PER_TAG}' AND value IN {_RECOUNTED}",
    f"""DELETE FROM binaries_facet_pairs
    WHERE facet = '{PER_TAG}' AND value IN {_RECOUNTED} OR other = '{PER_TAG}' AND other_value IN {_RECOUNTED}""",
    # Per (page, listing), with the ids the counts need: their listing's are the same for all its binaries.
    f"""CREATE TEMP TABLE listing_counts AS
    SELECT counted.tag_id, counted.package_id, configurations.version_id, {", ".join(_LISTING_FACET_IDS)}, n
    FROM (
        SELECT pages.tag_id, pages.package_id, listing_id, count(*) AS n
        FROM pages CROSS JOIN page_specs ON page_specs.page_id = pages.id
        WHERE pages.tag_id IN (SELECT id FROM recount)
        GROUP BY page_id, listing_id
    ) AS counted
    CROSS JOIN {_LISTING} WHERE listings.id = counted.listing_id""",
    *_COUNT_CELLS,
    "INSERT INTO tag_version_counts SELECT version_id, tag_id, sum(n) FROM listing_counts GROUP BY 1, 2",
    f"""INSERT INTO binaries_facet_counts
    SELECT '{PER_TAG}', tags.name, sum(n) FROM scalar_counts JOIN tags ON tags.id = tag_id GROUP BY tag_id""",
    "CREATE TEMP TABLE tag_values (tag TEXT, facet TEXT, value TEXT, binaries INTEGER)",
    *(_per_tag([facet], "tag_values") for facet in _COUNTED_PER_TAG),
    f"INSERT INTO binaries_facet_pairs SELECT '{PER_TAG}', tag, facet, value, binaries FROM tag_values",
    f"INSERT INTO binaries_facet_pairs SELECT facet, value, '{PER_TAG}', tag, binaries FROM tag_values",
    "INSERT INTO value_changes SELECT facet, value, binaries FROM tag_values",
    # binary_stacks has a row per binary and stack: per tag and stack, the binaries of the tag in the stack.
    "INSERT INTO binary_stacks_cube SELECT tag, value, binaries FROM tag_values WHERE facet = 'stacks'",
    *(_per_tag(pair, "binaries_tag_facet_pairs") for pair in _PAIRS),
    f"""INSERT INTO binaries_tag_facet_pairs SELECT tag, other, other_value, facet, value, binaries
    FROM binaries_tag_facet_pairs WHERE tag IN {_RECOUNTED} AND other <> facet""",
    f"""INSERT INTO pair_changes SELECT facet, value, other, other_value, binaries
    FROM binaries_tag_facet_pairs WHERE tag IN {_RECOUNTED}""",
    """INSERT INTO binaries_facet_counts SELECT facet, value, sum(binaries) FROM value_changes WHERE true
    GROUP BY facet, value ON CONFLICT DO UPDATE SET binaries = binaries + excluded.binaries""",
    """INSERT INTO binaries_facet_pairs SELECT facet, value, other, other_value, sum(binaries) FROM pair_changes
    WHERE true GROUP BY facet, value, other, other_value ON CONFLICT DO UPDATE SET binaries = binaries + excluded.binaries""",
    "DELETE FROM binaries_facet_counts WHERE binaries = 0",
    "DELETE FROM binaries_facet_pairs WHERE binaries = 0",
]
# What a recount leaves behind to drop: temp.recount (the tag ids it is given) and the tables it makes.
RECOUNT_TEMPORARIES = ("recount", *re.findall(r"CREATE TEMP TABLE (\w+)", "\n".join(RECOUNT_TAGS)))


# Counts kept as rows are written: edges per dependency version and kind (dependency_edge_counts), and
# binaries per listing (listing_binaries, which counts a search's binaries at the cost of the listings it
# finds). A full build counts every row once at the end (edges grouped by dependency spec along the index of
# edges by dependency before their versions are looked up); an incremental build counts the rows it writes and
# deletes as it does, in each connection that does (temporary triggers, so the file has none): the cost is that
# of the rows that change, not of the history.
class KeptCount(NamedTuple):
    table: str  # the count table: its key columns, then the count
    rows: str  # the table whose rows it counts
    key: tuple  # SQL of each key column's value for a row of rows, in the table's order; its columns as {row}.<column>
    count_every_row: str  # a full build's INSERT of every count
    key_from: str = "WHERE true"  # FROM and WHERE of the tables key reads besides the row, as {row}.<column> too

    @property
    def count_column(self):
        """The count's column: the table's last."""
        return COLUMNS[self.table][-1]


_DEPENDENCY_VERSION = (
    "SELECT configurations.version_id FROM specs JOIN configurations ON configurations.id = specs.configuration_id"
    " WHERE specs.id = {}"
)
KEPT_COUNTS = (
    KeptCount(
        "dependency_edge_counts",
        "spec_dependencies",
        (f"({_DEPENDENCY_VERSION.format('{row}.dependency_id')})", "{row}.kind_id"),
        f"""INSERT INTO dependency_edge_counts
    SELECT ({_DEPENDENCY_VERSION.format("per_spec.dependency_id")}), kind_id, sum(edges)
    FROM (SELECT dependency_id, kind_id, count(*) AS edges FROM spec_dependencies GROUP BY dependency_id, kind_id)
    AS per_spec
    GROUP BY 1, 2""",
    ),
    KeptCount(
        "listing_binaries",
        "page_specs",
        ("{row}.listing_id", *_LISTING_FACET_IDS),
        f"""INSERT INTO listing_binaries
    SELECT counted.listing_id, {", ".join(_LISTING_FACET_IDS)}, counted.binaries
    FROM (SELECT listing_id, count(*) AS binaries FROM page_specs GROUP BY listing_id) AS counted
    CROSS JOIN {_LISTING} WHERE listings.id = counted.listing_id""",
        f"FROM {_LISTING} WHERE listings.id = {{row}}.listing_id",
    ),
)


def count_as_written(kept, event):
    """A temporary trigger that keeps a count as its connection writes (INSERT) or deletes (DELETE, cascades
    too) the rows it counts."""
    row, sign = {"INSERT": ("NEW", "+"), "DELETE": ("OLD", "-")}[event]
    keys, count = COLUMNS[kept.table][:-1], kept.count_column
    return f"""CREATE TEMP TRIGGER IF NOT EXISTS counted_{kept.table}_{event.lower()} AFTER {event} ON main.{kept.rows}
    BEGIN
        INSERT INTO {kept.table} ({", ".join(keys)}, {count})
        SELECT {", ".join(value.format(row=row) for value in kept.key)}, {sign}1
        {kept.key_from.format(row=row)} ON CONFLICT DO UPDATE SET {count} = {count} {sign} 1;
    END"""


def emptied_count_goes(kept):
    """A temporary trigger that deletes a count that deletions take to 0, by its primary key, as they do: only
    when one does (deleting every count of 0 afterwards would read the whole count table, a row per listing;
    deleting by key on each deletion would look the key up again for each of millions of edges)."""
    keys = _DECLARED[kept.table].pks
    match = " AND ".join(f"{key} = NEW.{key}" for key in keys)
    return f"""CREATE TEMP TRIGGER IF NOT EXISTS emptied_{kept.table} AFTER UPDATE OF {kept.count_column}
    ON main.{kept.table} WHEN NEW.{kept.count_column} = 0
    BEGIN
        DELETE FROM {kept.table} WHERE {match};
    END"""


# The views whose row counts Datasette is given: those with a row for each row of a table (counted with it)...
VIEW_ROWS_OF = {
    "version_names": "versions",
    "dependencies": "spec_dependencies",
    "spec_names": "specs",
    "spec_tags": "page_specs",
    "stack_memberships": "stack_set_members",
    "dependency_edge_totals": "dependency_edge_counts",
    "listing_texts": "listings",
    "configuration_specs": "configurations",
}
# ... and those summed from the count tables.
VIEW_COUNTS = {
    "binaries": f"SELECT coalesce(sum(binaries), 0) FROM binaries_facet_counts WHERE facet = '{PER_TAG}'",
    "binary_stacks": "SELECT coalesce(sum(count), 0) FROM binary_stacks_cube",
    "link_edges": "SELECT coalesce(sum(edges), 0) FROM dependency_edge_counts"
    " JOIN dependency_kinds ON dependency_kinds.id = kind_id WHERE is_link",
}


def _declared():
    db = sqlite_utils.Database(memory=True)
    db.executescript(TABLES + _EVERY_INDEX + VIEWS)
    return db


_DECLARED = _declared()
COLUMNS = {name: tuple(column.name for column in _DECLARED[name].columns) for name in _DECLARED.table_names()}


def named_indexes(table):
    """{index: its columns} of a sqlite_utils Table's indexes made by CREATE INDEX (not by UNIQUE or a key)."""
    return {index.name: tuple(index.columns) for index in table.indexes if index.origin == "c"}


NAMED_INDEXES = {table: named_indexes(_DECLARED[table]) for table in COLUMNS}  # INDEXES and INDEXES_AFTER_LOAD
# An order in which every row's parents (foreign keys) are written before it.
LOAD_ORDER = tuple(
    graphlib.TopologicalSorter(
        {name: {key.other_table for key in _DECLARED[name].foreign_keys} - {name} for name in COLUMNS}
    ).static_order()
)


def _row_type(table):
    """A named tuple of the table's columns, made by keywords (calling its __new__ directly costs a quarter of
    calling the class: millions of rows a build). Columns with a DEFAULT (filled in once everything is
    loaded, such as version keys) may be left out: they come last, and take their default."""
    columns = _DECLARED[table].columns
    defaults = []
    for column in reversed(columns):
        if column.default_value is None:
            break
        defaults.insert(0, ast.literal_eval(column.default_value))
    if any(column.default_value is not None for column in columns[: len(columns) - len(defaults)]):
        raise ValueError(f"{table}: expected the columns with a DEFAULT last")
    row = collections.namedtuple(table, COLUMNS[table], defaults=defaults)
    return functools.partial(row.__new__, row)


# Rows travel by name: a named tuple per table, its fields the table's columns in order.
ROWS = {table: _row_type(table) for table in COLUMNS}


def _plain_row_type(table):
    """A function that makes a row of table by keywords as a plain tuple of its columns in order: half the cost
    of a named tuple, and handed to the writer as it is (a named tuple is copied into a tuple first)."""
    columns = ", ".join(COLUMNS[table])
    namespace = {}
    exec(f"def {table}(*, {columns}):\n    return ({columns},)", namespace)  # the names are schema.py's columns
    return namespace[table]


# The rows the loader makes by the million (a binary's two rows, a dependency edge), as plain tuples.
PLAIN_ROWS = {table: _plain_row_type(table) for table in ("specs", "page_specs", "spec_dependencies")}
# Spack's deptypes in its order, each with its flag column on dependency_kinds (is_<deptype>): questions pick
# link or run edges by these integers, never by reading the deptypes JSON of every edge.
DEPTYPE_FLAGS = {
    column.removeprefix("is_"): column for column in COLUMNS["dependency_kinds"] if column.startswith("is_")
}


def _identity(table):
    """The columns that identify a row: its one UNIQUE key, or else its primary key."""
    unique = [index.columns for index in _DECLARED[table].indexes if index.unique and index.origin != "pk"]
    if len(unique) > 1:
        raise ValueError(f"{table}: expected at most one UNIQUE key, its identity")
    return tuple(unique[0]) if unique else tuple(_DECLARED[table].pks)


IDENTITY = {table: _identity(table) for table in COLUMNS}
# A row's identity, as the loader and the writer key rows by it: the value itself for a one-column identity.
IDENTITY_OF = {
    table: operator.itemgetter(*(COLUMNS[table].index(column) for column in columns))
    for table, columns in IDENTITY.items()
}


def ids_by_identity(table, found):
    """{identity: id} of rows of table read as their identity's columns, then id: keyed as IDENTITY_OF keys a
    row (the value itself for a one-column identity, such as a hash; a tuple otherwise)."""
    if len(IDENTITY[table]) == 1:
        return dict(found)
    return {tuple(row[:-1]): row[-1] for row in found}


class Reference(NamedTuple):
    child: str
    column: str
    parent: str
    parent_column: str
    cascade: bool  # ON DELETE CASCADE: the child row belongs to its parent and goes with it
    nullable: bool  # a child may refer to no row (NULL)


def _nullable(table, column):
    return not next(c for c in _DECLARED[table].columns if c.name == column).notnull


REFERENCES = tuple(
    Reference(table, key[3], key[2], key[4], key[6] == "CASCADE", _nullable(table, key[3]))
    for table in COLUMNS
    for key in _DECLARED.execute(f"PRAGMA foreign_key_list({table})").fetchall()
)
# A row of these tables exists while another row refers to it (other than a row that belongs to it): once
# nothing does, it is an orphan. Rows of other tables are deleted by the build itself (pages, sources,
# problems, indexes) or replaced whole (microarchitectures).
KEPT_WHILE_USED = tuple(
    table for table in reversed(LOAD_ORDER) if any(r.parent == table and not r.cascade for r in REFERENCES)
)
# Tables whose rows, once gone, may leave more of their own rows orphans: a child that belongs to a row
# (specs' edges) also keeps other rows (the specs it depends on).
SELF_RELEASING = frozenset(
    r.parent
    for r in REFERENCES
    if r.cascade and any(o.child == r.child and o.parent == r.parent and not o.cascade for o in REFERENCES)
)
# The references by which deleting a row releases the row it refers to: it may be an orphan now.
RELEASING = tuple(r for r in REFERENCES if r.parent in KEPT_WHILE_USED and not r.cascade)


def released(table):
    """The temporary table of the rows of a KEPT_WHILE_USED table released since they were last looked at
    (unqualified: a trigger may not name a table's schema)."""
    return f"released_{table}"


def released_by(tables):
    """The KEPT_WHILE_USED tables, in their order, whose rows may be left orphans when rows of these tables go:
    the tables they refer to, and in turn those that these, or the rows that belong to these, refer to."""
    reached, pending = set(), list(tables)
    while pending:
        deleted = pending.pop()
        for r in REFERENCES:
            if r in RELEASING and r.child == deleted and r.parent not in reached:
                reached.add(r.parent)
                pending.append(r.parent)
            elif r.parent == deleted and r.cascade:  # goes with its parent
                pending.append(r.child)
    return tuple(table for table in KEPT_WHILE_USED if table in reached)


def _release_tracking():
    """A temporary table of candidates for each KEPT_WHILE_USED table, and temporary triggers that put a row
    there when a row referring to it is deleted (cascades too); and the table of the candidates being looked at
    (pruning). Builds delete and insert references, never change one in place."""
    statements = [
        f"CREATE TEMP TABLE IF NOT EXISTS {name} (id INTEGER PRIMARY KEY)"
        for name in ("pruning", *(released(table) for table in KEPT_WHILE_USED))
    ]
    statements.extend(
        f"CREATE TEMP TRIGGER IF NOT EXISTS releases_{r.parent}_deleting_{r.child}_{r.column}"
        f" AFTER DELETE ON main.{r.child}{f' WHEN OLD.{r.column} IS NOT NULL' if r.nullable else ''}"
        f" BEGIN INSERT OR IGNORE INTO {released(r.parent)} VALUES (OLD.{r.column}); END"
        for r in RELEASING
    )
    return tuple(statements)


RELEASE_TRACKING = _release_tracking()


def orphans(table, counted=False):
    """SQL condition for the rows of a KEPT_WHILE_USED table that nothing refers to any more. counted: the
    KEPT_COUNTS are exact (kept as the build writes and deletes): where one counts the referring rows by the
    referring column, it is read instead of them. Every edge refers to a dependency kind, with no index on that
    column: the history built from indexes has millions, read whole (3 s for 22.8M) whenever edges went."""
    return " AND ".join(_not_referred_to(r, _count_of(r) if counted else None) for r in RELEASING if r.parent == table)


def _not_referred_to(reference, kept):
    if kept is None:
        # x NOT IN a list that holds NULL is never true: a nullable column's NULLs are left out.
        referring = f" WHERE {reference.column} IS NOT NULL" if reference.nullable else ""
        return f"{reference.parent_column} NOT IN (SELECT {reference.column} FROM {reference.child}{referring})"
    # The parent's column unqualified (the row may be read through a view, to unindex it): it names no column
    # of the count (_count_of), so it is the parent row's.
    return (
        f"NOT EXISTS (SELECT 1 FROM {kept.table} WHERE {reference.column} = {reference.parent_column}"
        f" AND {kept.count_column} > 0)"
    )


def _count_of(reference):
    """The KEPT_COUNTS count of the rows that make the reference, by its column (a key column of the count whose
    value is the referring row's column), or None."""
    return next(
        (
            kept
            for kept in KEPT_COUNTS
            if kept.rows == reference.child
            and _key_values(kept).get(reference.column) == f"{{row}}.{reference.column}"
            and reference.parent_column not in COLUMNS[kept.table]
        ),
        None,
    )


def _key_values(kept):
    """{key column of the count: the SQL of its value for a row}."""
    return dict(zip(COLUMNS[kept.table][:-1], kept.key, strict=True))


def full_text_columns(index):
    """The columns of a full-text index: those of the table or view it reads, but the id."""
    return tuple(column for column in _columns_of(FULL_TEXT[index][1]) if column != "id")


def _columns_of(name):
    return tuple(row[1] for row in _DECLARED.execute(f"PRAGMA table_info({name})").fetchall())


def _full_text_ddl():
    statements = []
    for index, (_, content, tokenizer) in FULL_TEXT.items():
        # columnsize=0: no table of each row's token counts, which only ranking (bm25) reads; a MATCH finds
        # the same rows without it, and no search here ranks.
        options = [*full_text_columns(index), f'content="{content}"', 'content_rowid="id"', "columnsize=0"]
        if tokenizer:
            options.append(f'tokenize="{tokenizer}"')
        statements.append(f"CREATE VIRTUAL TABLE {index} USING fts5({', '.join(options)});")
    return "\n".join(statements) + "\n"


# Tables whose rows the database numbers, not the loader: there are millions of specs, so a row names a spec by
# its identity (its hash) and the same spec written twice is one row (the writer checks that its facts agree);
# listings, as many as binaries where each binary has its own stacks, so a page_specs row names its listing by
# (configuration id, stack set id), and the loader keeps no map of them that grows with the history.
NUMBERED_BY_DATABASE = ("specs", "listings")
# The columns that name such a row, by table: {table: ((column position, the table it names a row of), ...)}.
# The loader puts the row's identity there; the writer, its id.
NUMBERED_REFERENCES = {
    table: references
    for table in COLUMNS
    if (
        references := tuple(
            (COLUMNS[table].index(r.column), r.parent)
            for r in REFERENCES
            if r.child == table and r.parent in NUMBERED_BY_DATABASE
        )
    )
}


def insert_sql(table):
    """INSERT of a whole row of table, its values in COLUMNS order (a ROWS tuple). A row the database numbers,
    or one identified only by references to such rows (an edge between specs), is written once: written again,
    nothing happens."""
    columns = COLUMNS[table]
    references = {COLUMNS[table][position] for position, _ in NUMBERED_REFERENCES.get(table, ())}
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    if table in NUMBERED_BY_DATABASE or (references and set(IDENTITY[table]) <= references):
        sql += " ON CONFLICT DO NOTHING"
    return sql


# Incremental builds only build onto a database of exactly this shape.
SCHEMA_DIGEST = hashlib.blake2b((TABLES + _EVERY_INDEX + _full_text_ddl() + VIEWS).encode(), digest_size=8).hexdigest()


def of_this_schema(build_info):
    """Whether a database's build_info ({key: value}) says it has exactly this schema: its version, and its digest
    (a view added without a new version changes the digest only)."""
    return (build_info.get("schema_version"), build_info.get("schema_digest")) == (str(SCHEMA_VERSION), SCHEMA_DIGEST)


# Pages of 8 KiB rather than SQLite's 4: the usual history's database takes 0.6 bytes per binary less (of 160), in
# fewer b-tree pages and less room left over at their ends; its questions took as long, side by side (find_binaries
# over 419 combinations of fields, the binaries page and its clicks, stacks_in_tag, stack_packages, package).
PAGE_SIZE = 8192


def create_schema(conn):
    """Create every table, full-text index and view of an empty database, and the indexes its load reads:
    create_indexes_after_load makes the others once the rows are written."""
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    conn.executescript(TABLES + INDEXES + VIEWS + _full_text_ddl())


def create_indexes_after_load(conn):
    """INDEXES_AFTER_LOAD, in a new database whose rows are written."""
    conn.executescript(INDEXES_AFTER_LOAD)
