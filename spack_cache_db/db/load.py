"""Load pages into cache.db: ids resolved in memory, rows written in batches, unchanged pages kept."""

import json

from spack_cache_db import normalise
from spack_cache_db.db import schema
from spack_cache_db.records import Document, InputError

# The tables the loader writes, parents first, and the statement that writes a row of each (a file read again
# replaces its sources row).
WRITTEN = tuple(
    table
    for table in schema.LOAD_ORDER
    if table not in ("microarchitectures", "runs_on", "row_counts", "build_info")
    and not table.endswith(("_cube", "_cells"))
)
STATEMENTS = {table: schema.insert_sql(table, replace_on_conflict=table == "sources") for table in WRITTEN}

# How each lookup's key is read back from an existing database, for incremental builds.
EXISTING_KEYS = {
    "packages": "SELECT name, id FROM packages",
    "versions": "SELECT package_id, version, id FROM versions",
    "compilers": "SELECT label, id FROM compilers",
    "oss": "SELECT name, id FROM oss",
    "platforms": "SELECT name, id FROM platforms",
    "targets": "SELECT name, id FROM targets",
    "variants": "SELECT raw, id FROM variants",
    "variant_sets": "SELECT variants, id FROM variant_sets",
    "stacks": "SELECT name, id FROM stacks",
    "stack_sets": "SELECT stacks, id FROM stack_sets",
    "configurations": (
        "SELECT version_id, compiler_id, os_id, platform_id, target_id, variant_set_id, id FROM configurations"
    ),
    "listings": "SELECT configuration_id, stack_set_id, id FROM listings",
    "tags": "SELECT name, id FROM tags",
    "dependency_kinds": "SELECT deptypes, virtuals, id FROM dependency_kinds",
}


def _tarball_prefix(tarballs, document, built):
    prefix = tarballs.get(built.number)
    if prefix is None:
        prefix = tarballs[built.number] = normalise.standard_tarball_prefix(
            document.tag, document.package, built.version, built.platform, built.os, built.target, built.compiler
        )
    return prefix


def _key_of(row):
    return row[0] if len(row) == 2 else tuple(row[:-1])


def _hash_key(spec_hash):
    """A hash as the int its 32 characters spell in base 36 (Spack's alphabet, a-z and 2-7, is a subset of its
    digits, so no two hashes share one): 48 bytes in memory where the string takes 81."""
    return int(spec_hash, 36)


class Loader:
    """Turns pages into rows of one open database, remembering every id it has handed out."""

    def __init__(self, conn, writer):
        self.conn = conn
        self.writer = writer
        self.ids = {}
        self.next_id = {}
        self.pending = {table: [] for table in WRITTEN}
        self.origins = []  # see mark()
        for table, sql in EXISTING_KEYS.items():
            self.ids[table] = {_key_of(row): row[-1] for row in conn.execute(sql)}
            self.next_id[table] = max(self.ids[table].values(), default=0) + 1
        for table in ("variant_sets", "stack_sets"):
            self.ids[table] = {tuple(json.loads(key)): value for key, value in self.ids[table].items()}
        self.configuration_by_built = {}  # (package id, Built.number) -> configuration id
        self.built_of = {}  # configuration id -> (package, Built), for those this build added
        self.listing_by_stacks = {}  # (configuration id, stacks) -> id
        # _hash_key(hash) -> spec id | configuration id << 32 for the hashes of this build: two ints per
        # hash keep a history of millions in memory. Hashes already in the database are looked up when seen.
        self.spec_ids, self.spec_sizes = {}, {}
        self.next_id["specs"] = conn.execute("SELECT ifnull(max(id), 0) + 1 FROM specs").fetchone()[0]
        self.database_has_specs = self.next_id["specs"] > 1
        self.with_edges = set()  # ids of specs whose edges are stored or queued
        self.kind_ids = {}  # DependencyKind -> id
        self.next_id["pages"] = conn.execute("SELECT ifnull(max(id), 0) + 1 FROM pages").fetchone()[0]
        self.pages_by_name = {
            (tag, package): path
            for tag, package, path in conn.execute(
                "SELECT tags.name, packages.name, path FROM pages JOIN tags ON tags.id = tag_id"
                " JOIN packages ON packages.id = package_id"
            )
        }
        self.first_ids = dict(self.next_id)

    def _id(self, table, key, row):
        """The id for key, adding a row made by row(id) the first time the key is seen."""
        ids = self.ids[table]
        found = ids.get(key)
        if found is None:
            found = ids[key] = self.next_id[table]
            self.next_id[table] += 1
            row(found)
        return found

    def queue(self, table, row):
        self.pending[table].append(row)

    def tag_id(self, name):
        def add(new_id):
            tag = normalise.classify_tag(name)
            self.queue("tags", (new_id, name, tag.kind, tag.snapshot_date, tag.release_version, 0, tag.mirror_url))

        return self._id("tags", name, add)

    def _named_id(self, table, name):
        return self._id(table, name, lambda new_id: self.queue(table, (new_id, name)))

    def stack_id(self, name):
        return self._named_id("stacks", name)

    def add_document(self, document):
        """Check a document against everything loaded so far, then queue its rows; raises InputError."""
        other = self.pages_by_name.get((document.tag, document.package))
        if other is not None:
            raise InputError(
                document.source,
                "categories",
                f"expected one page per tag and package: {document.tag}/{document.package} is also {other}",
            )
        tag_id = self.tag_id(document.tag)
        package_id = self._named_id("packages", document.package)
        binaries = document.binaries
        if self.database_has_specs:
            self._look_up_in_database([b.hash for b in binaries if _hash_key(b.hash) not in self.spec_ids])
        tarballs = {}  # Built.number -> the usual tarball URL of its binaries in this document, but the hash
        rows = [
            self._spec_row(document, package_id, number, binary, tarballs) for number, binary in enumerate(binaries)
        ]
        page_id = self.next_id["pages"]
        self.next_id["pages"] += 1
        self.pages_by_name[(document.tag, document.package)] = document.source
        key_order = None if document.key_order is None else json.dumps(document.key_order)
        self.queue(
            "pages",
            (
                page_id,
                tag_id,
                package_id,
                document.source,
                document.digest,
                len(binaries),
                document.meta_text,
                int(document.sorted_keys),
                key_order,
                json.dumps(document.extra, sort_keys=True) if document.extra else None,
            ),
        )
        add_spec, add_page_spec = self.pending["specs"].append, self.pending["page_specs"].append
        for new_spec, page_spec in rows:
            if new_spec is not None:
                add_spec(new_spec)
            add_page_spec((page_id, *page_spec))

    def _spec_row(self, document, package_id, position, binary, tarballs):
        """(the specs row, or None for a spec known already; the page_specs row without its page)"""
        spec_hash, built, stacks, size, extra, _ = binary
        configuration_id = self._configuration_of(document.package, package_id, built)
        spec_id, new_spec = self._spec_id(spec_hash, configuration_id, size, document, position)
        listing_id = self.listing_by_stacks.get((configuration_id, stacks))
        if listing_id is None:
            listing_id = self._listing_id(configuration_id, self._stack_set_id(stacks))
            self.listing_by_stacks[(configuration_id, stacks)] = listing_id
        standard_tarball = 0
        if extra:
            if (
                "tarball" in extra
                and extra["tarball"] == _tarball_prefix(tarballs, document, built) + spec_hash + ".spack"
            ):
                extra = {k: v for k, v in extra.items() if k != "tarball"}
                standard_tarball = 1
            extra = json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None
        else:
            extra = None
        return new_spec, (spec_id, position, listing_id, int(built.compiler_exact), standard_tarball, extra)

    def _configuration_of(self, package, package_id, built):
        configuration_id = self.configuration_by_built.get((package_id, built.number))
        if configuration_id is None:
            configuration_id = self._configuration_id(package, package_id, built)
            self.configuration_by_built[(package_id, built.number)] = configuration_id
        return configuration_id

    def _spec_id(self, spec_hash, configuration_id, size, document, position, external=0):
        """(spec id, the specs row to write or None when the hash is known): the same hash must have the same
        facts wherever it appears; document (or a location) and position name where it does not."""
        key = _hash_key(spec_hash)
        known = self.spec_ids.get(key)
        if known is None:
            spec_id = self.next_id["specs"]
            self.next_id["specs"] = spec_id + 1
            self.spec_ids[key] = spec_id | configuration_id << 32
            if size is not None:
                self.spec_sizes[key] = size
            return spec_id, (spec_id, spec_hash, configuration_id, size, external)
        if known >> 32 != configuration_id or self.spec_sizes.get(key) != size:
            location, field = document, f"database.installs.{spec_hash}"
            if isinstance(document, Document):
                location, field = document.source, document.binary_field.format(position=position, hash=spec_hash)
            raise InputError(
                location,
                field,
                f"expected the same facts wherever hash {spec_hash} appears, but {self._first_path(known & 0xFFFFFFFF)} "
                f"lists it as {self._describe(known >> 32, self.spec_sizes.get(key))} and this input as "
                f"{self._describe(configuration_id, size)}",
            )
        return known & 0xFFFFFFFF, None

    def _read_back(self, sql, parameters):
        self.writer.sync()
        return self.conn.execute(sql, parameters)

    def add_nodes(self, nodes, location):
        """Specs that binaries depend on but that are not binaries themselves (externals, build-only
        compilers): rows in specs, not in any page."""
        if self.database_has_specs:
            self._look_up_in_database([n.hash for n in nodes if _hash_key(n.hash) not in self.spec_ids])
        for node in nodes:
            package_id = self._named_id("packages", node.package)
            configuration_id = self._configuration_of(node.package, package_id, node.built)
            spec_id, new_spec = self._spec_id(node.hash, configuration_id, None, location, None, int(node.external))
            if new_spec is not None:
                self.queue("specs", new_spec)

    def add_dependencies(self, specs):
        """The edges of these Binaries or Nodes (all of whose hashes are known to this loader), for each spec
        that has none stored yet: a spec's dependencies are part of its hash, so the same everywhere."""
        ids = {spec.hash: self.spec_ids[_hash_key(spec.hash)] & 0xFFFFFFFF for spec in specs}
        earlier = [spec_id for spec_id in ids.values() if spec_id < self.first_ids["specs"]]
        if earlier:
            self.with_edges.update(
                row[0]
                for row in self.conn.execute(
                    "SELECT DISTINCT spec_id FROM spec_dependencies WHERE spec_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(earlier),),
                )
            )
        for spec in specs:
            spec_id = ids[spec.hash]
            if spec_id in self.with_edges or not spec.dependencies:
                continue
            self.with_edges.add(spec_id)
            for dependency_hash, kind in spec.dependencies:
                dependency_id = self.spec_ids[_hash_key(dependency_hash)] & 0xFFFFFFFF
                self.queue("spec_dependencies", (spec_id, dependency_id, self._kind_id(kind)))

    def _kind_id(self, kind):
        kind_id = self.kind_ids.get(kind)
        if kind_id is None:
            row = (json.dumps(kind.deptypes), json.dumps(kind.virtuals))
            kind_id = self.kind_ids[kind] = self._id(
                "dependency_kinds", row, lambda new_id: self.queue("dependency_kinds", (new_id, *row))
            )
        return kind_id

    def add_index(self, row):
        self.queue("indexes", row)

    def _look_up_in_database(self, hashes):
        """Remember the specs of an earlier build among these hashes: one query per page. No need to wait for
        the writer: the specs this build queued are remembered already, and these hashes are not among them."""
        rows = self.conn.execute(
            "SELECT hash, id, configuration_id, size FROM specs WHERE hash IN (SELECT value FROM json_each(?))",
            (json.dumps(hashes),),
        )
        for spec_hash, spec_id, configuration_id, size in rows:
            key = _hash_key(spec_hash)
            self.spec_ids[key] = spec_id | configuration_id << 32
            if size is not None:
                self.spec_sizes[key] = size

    def _first_path(self, spec_id):
        """The page that listed a spec first: still queued, or already written."""
        page_id = next((row[0] for row in self.pending["page_specs"] if row[1] == spec_id), None)
        if page_id is not None:
            return next(row[3] for row in self.pending["pages"] if row[0] == page_id)
        row = self._read_back(
            "SELECT pages.path FROM page_specs JOIN pages ON pages.id = page_specs.page_id"
            " WHERE page_specs.spec_id = ? ORDER BY pages.id LIMIT 1",
            (spec_id,),
        ).fetchone()
        return row[0] if row else "an earlier page"

    def _describe(self, configuration_id, size):
        if configuration_id in self.built_of:
            package, built = self.built_of[configuration_id]
            spec = normalise.spec_string(
                package, built.version, built.variants, built.platform, built.os, built.target, built.compiler
            )
        else:
            spec = self._read_back(
                "SELECT spec FROM configuration_specs WHERE configuration_id = ?", (configuration_id,)
            ).fetchone()[0]
        return spec if size is None else f"{spec} (size {size})"

    def _configuration_id(self, package, package_id, built):
        version_id = self._id(
            "versions",
            (package_id, built.version),
            lambda new_id: self.queue("versions", (new_id, package_id, built.version, 0)),
        )
        compiler = built.compiler
        compiler_id = self._id(
            "compilers",
            str(compiler),
            lambda new_id: self.queue("compilers", (new_id, str(compiler), compiler.name, compiler.version)),
        )
        key = (
            version_id,
            compiler_id,
            self._named_id("oss", built.os),
            self._named_id("platforms", built.platform),
            self._named_id("targets", built.target),
            self._variant_set_id(built.variants),
        )

        def add(new_id):
            self.queue("configurations", (new_id, *key))
            self.built_of[new_id] = (package, built)

        return self._id("configurations", key, add)

    def _variant_id(self, variant):
        def add(new_id):
            self.queue("variants", (new_id, variant.raw, variant.name, variant.operator, variant.value))
            if not variant.is_boolean:
                for position, value in enumerate(variant.values):
                    self.queue("variant_values", (new_id, position, value))

        return self._id("variants", variant.raw, add)

    def _variant_set_id(self, variants):
        key = tuple(v.raw for v in variants)

        def add(new_id):
            self.queue("variant_sets", (new_id, json.dumps(key, ensure_ascii=False), normalise.spec_variants(variants)))
            for position, variant in enumerate(variants):
                self.queue("variant_set_members", (new_id, position, self._variant_id(variant)))

        return self._id("variant_sets", key, add)

    def _stack_set_id(self, stacks):
        def add(new_id):
            self.queue("stack_sets", (new_id, json.dumps(stacks)))
            for stack in stacks:
                self.queue("stack_set_members", (new_id, self.stack_id(stack)))

        return self._id("stack_sets", stacks, add)

    def _listing_id(self, configuration_id, stack_set_id):
        return self._id(
            "listings",
            (configuration_id, stack_set_id),
            lambda new_id: self.queue("listings", (new_id, configuration_id, stack_set_id)),
        )

    def checkpoint(self):
        return dict(self.next_id), {table: len(rows) for table, rows in self.pending.items()}

    def rollback(self, checkpoint):
        """Forget what a rejected page added since the checkpoint."""
        next_id, pending = checkpoint
        self.with_edges.difference_update(
            row[0] for row in self.pending["spec_dependencies"][pending["spec_dependencies"] :]
        )
        for table, length in pending.items():
            del self.pending[table][length:]
        for table, ids in self.ids.items():
            for key in [k for k, v in ids.items() if v >= next_id[table]]:
                del ids[key]
        for memo, table in ((self.configuration_by_built, "configurations"), (self.listing_by_stacks, "listings")):
            for key in [k for k, v in memo.items() if v >= next_id[table]]:
                del memo[key]
        self.kind_ids = {kind: i for kind, i in self.kind_ids.items() if i < next_id["dependency_kinds"]}
        for configuration_id in [c for c in self.built_of if c >= next_id["configurations"]]:
            del self.built_of[configuration_id]
        for key in [k for k, v in self.spec_ids.items() if v & 0xFFFFFFFF >= next_id["specs"]]:
            del self.spec_ids[key]
            self.spec_sizes.pop(key, None)
        self.next_id = next_id

    def mark(self, source):
        """The rows queued from here on come from source (a file), until the next mark."""
        self.origins.append((source, {table: len(rows) for table, rows in self.pending.items()}))

    def flush(self):
        batches = [(table, STATEMENTS[table], rows) for table, rows in self.pending.items() if rows]
        if batches:
            self.writer.write(batches, self.origins)
            self.pending = {table: [] for table in WRITTEN}
        self.origins = []


def load_tags_yaml(loader, tags):
    """Tags and their stacks as _data/tags.yaml declares them (tag_stacks has been emptied)."""
    rows = set()
    for name, stacks in tags:
        tag_id = loader.tag_id(name)
        rows.update((tag_id, loader.stack_id(stack)) for stack in stacks)
    for row in sorted(rows):
        loader.queue("tag_stacks", row)


def rank_versions_and_tags(conn):
    """version_rank in Spack's order within each package, and the version keys SQL compares versions and
    compilers' versions by; sort_order of tags as people expect, and their mirrors."""
    by_package = {}
    for version_id, package_id, version in conn.execute("SELECT id, package_id, version FROM versions"):
        by_package.setdefault(package_id, []).append((normalise.version_key(version), version, version_id))
    ranks = []
    for versions in by_package.values():
        versions.sort()
        ranks.extend(
            (rank, normalise.sortable_version(key), version_id)
            for rank, (key, _, version_id) in enumerate(versions, start=1)
        )
    conn.executemany("UPDATE versions SET version_rank = ?, version_key = ? WHERE id = ?", ranks)
    compilers = conn.execute("SELECT id, version FROM compilers WHERE version IS NOT NULL").fetchall()
    conn.executemany(
        "UPDATE compilers SET version_key = ? WHERE id = ?",
        [(normalise.version_sort_key(version), compiler_id) for compiler_id, version in compilers],
    )
    tags = [normalise.classify_tag(name) for (name,) in conn.execute("SELECT name FROM tags")]
    tags.sort(key=normalise.tag_sort_key)
    conn.executemany("UPDATE tags SET sort_order = ? WHERE name = ?", [(n, t.name) for n, t in enumerate(tags, 1)])
    # A tag read from its indexes is installed from its root mirror; others from binaries.spack.io.
    conn.execute(
        "UPDATE tags SET mirror_url = coalesce((SELECT mirror_url FROM indexes JOIN stacks ON stacks.id = stack_id"
        " WHERE indexes.tag_id = tags.id AND stacks.name = 'root'), ? || '/' || name)",
        (normalise.MIRROR_ROOT,),
    )


def delete_tags(conn, names):
    """Remove every page of these tags, the indexes they were read from and the problems of those indexes;
    returns the ids of the tags."""
    tag_ids = [
        row[0]
        for row in conn.execute(
            "SELECT id FROM tags WHERE name IN (SELECT value FROM json_each(?))", (json.dumps(names),)
        )
    ]
    selected = "(SELECT value FROM json_each(?))"
    ids = (json.dumps(tag_ids),)
    conn.execute(f"DELETE FROM page_specs WHERE page_id IN (SELECT id FROM pages WHERE tag_id IN {selected})", ids)
    conn.execute(f"DELETE FROM pages WHERE tag_id IN {selected}", ids)
    conn.execute(f"DELETE FROM indexes WHERE tag_id IN {selected}", ids)
    conn.execute(
        "DELETE FROM problems WHERE tag IN (SELECT value FROM json_each(?)) AND path NOT IN (SELECT path FROM sources)",
        (json.dumps(names),),
    )
    return tag_ids


def delete_pages(conn, paths):
    """Remove pages (and, through prune_orphans, whatever only they used); returns the ids of their tags."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS gone (path TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM gone")
    conn.executemany("INSERT INTO gone (path) VALUES (?)", [(p,) for p in paths])
    tag_ids = [
        row[0] for row in conn.execute("SELECT DISTINCT tag_id FROM pages WHERE path IN (SELECT path FROM gone)")
    ]
    conn.execute("DELETE FROM page_specs WHERE page_id IN (SELECT id FROM pages WHERE path IN (SELECT path FROM gone))")
    conn.execute("DELETE FROM pages WHERE path IN (SELECT path FROM gone)")
    conn.execute("DELETE FROM problems WHERE path IN (SELECT path FROM gone)")
    conn.execute("DELETE FROM sources WHERE path IN (SELECT path FROM gone)")
    return tag_ids


FTS_COLUMNS = {  # full-text index: (the table of its rows, what it reads their text from, the columns)
    "listings_fts": ("listings", "listing_texts", "package, version, compiler, os, platform, target, variants, stacks"),
    "packages_fts": ("packages", "packages", "name"),
}

_UNUSED_SPECS = (
    "SELECT id FROM specs WHERE id NOT IN (SELECT spec_id FROM page_specs)"
    " AND id NOT IN (SELECT dependency_id FROM spec_dependencies)"
)
ORPHANS = [
    ("dependency_kinds", "id NOT IN (SELECT kind_id FROM spec_dependencies)"),
    ("listings", "id NOT IN (SELECT listing_id FROM page_specs)"),
    (
        "configurations",
        "id NOT IN (SELECT configuration_id FROM specs) AND id NOT IN (SELECT configuration_id FROM listings)",
    ),
    ("variant_set_members", "variant_set_id NOT IN (SELECT variant_set_id FROM configurations)"),
    ("variant_sets", "id NOT IN (SELECT variant_set_id FROM configurations)"),
    ("variant_values", "variant_id NOT IN (SELECT variant_id FROM variant_set_members)"),
    ("variants", "id NOT IN (SELECT variant_id FROM variant_set_members)"),
    ("stack_set_members", "stack_set_id NOT IN (SELECT stack_set_id FROM listings)"),
    ("stack_sets", "id NOT IN (SELECT stack_set_id FROM listings)"),
    ("versions", "id NOT IN (SELECT version_id FROM configurations)"),
    ("packages", "id NOT IN (SELECT package_id FROM pages) AND id NOT IN (SELECT package_id FROM versions)"),
    ("compilers", "id NOT IN (SELECT compiler_id FROM configurations)"),
    ("oss", "id NOT IN (SELECT os_id FROM configurations)"),
    ("platforms", "id NOT IN (SELECT platform_id FROM configurations)"),
    ("targets", "id NOT IN (SELECT target_id FROM configurations)"),
    ("stacks", "id NOT IN (SELECT stack_id FROM stack_set_members) AND id NOT IN (SELECT stack_id FROM tag_stacks)"),
    (
        "tags",
        "id NOT IN (SELECT tag_id FROM pages) AND id NOT IN (SELECT tag_id FROM tag_stacks)"
        " AND id NOT IN (SELECT tag_id FROM indexes)",
    ),
]


def prune_orphans(conn, full_text, added_from=None):
    """Delete rows that no page uses any more; with full_text, keep the full-text indexes in step for the
    rows they have: not those this build added (ids from added_from, {table: first id}), indexed later."""
    _prune_specs(conn)
    for table, condition in ORPHANS:
        for fts, (rows, content, columns) in FTS_COLUMNS.items():
            if full_text and rows == table:
                indexed = f" AND id < {int(added_from[rows])}" if added_from else ""
                conn.execute(
                    f"INSERT INTO {fts} ({fts}, rowid, {columns}) SELECT 'delete', id, {columns} FROM {content}"
                    f" WHERE {condition}{indexed}"
                )
        conn.execute(f"DELETE FROM {table} WHERE {condition}")


def _prune_specs(conn):
    """Specs that no page lists and no spec depends on, and their edges; again while that leaves more such
    specs (dependencies that only they had)."""
    while True:
        conn.execute(f"CREATE TEMP TABLE unused AS {_UNUSED_SPECS}")
        edges = conn.execute("DELETE FROM spec_dependencies WHERE spec_id IN (SELECT id FROM unused)").rowcount
        conn.execute("DELETE FROM specs WHERE id IN (SELECT id FROM unused)")
        conn.execute("DROP TABLE temp.unused")
        if not edges:
            return


def index_new_rows(conn, first_ids):
    """Add rows created in this build to the full-text indexes."""
    for fts, (rows, content, columns) in FTS_COLUMNS.items():
        conn.execute(
            f"INSERT INTO {fts} (rowid, {columns}) SELECT id, {columns} FROM {content} WHERE id >= ?",
            (first_ids[rows],),
        )


def foreign_key_problems(conn):
    return conn.execute("PRAGMA foreign_key_check").fetchall()
