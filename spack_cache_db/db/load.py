"""Load records into cache.db: ids resolved in memory, rows (schema.ROWS, by name) handed to the writer in batches.

Every row the loader makes is one of schema.ROWS; a table's rows are looked up by its identity (schema.IDENTITY),
read from the database the first time the table is used, so an incremental build continues its ids.
"""

import json
import operator

from spack_cache_db import normalise
from spack_cache_db.db import schema
from spack_cache_db.records import Built, Document, InputError

ROWS = schema.ROWS
STATEMENTS = {table: schema.insert_sql(table) for table in schema.COLUMNS}
# A row's identity, as the key the loader remembers it by: the value itself for a one-column identity.
_IDENTITY_OF = {
    table: operator.itemgetter(*(schema.COLUMNS[table].index(column) for column in columns))
    for table, columns in schema.IDENTITY.items()
}
# Built's fields a configuration stores as they are (its other parts are rows of their own, named by id).
BUILT_COLUMNS = tuple(field for field in schema.COLUMNS["configurations"] if field in Built._fields)


def _tarball_prefix(tarballs, document, built):
    prefix = tarballs.get(built.number)
    if prefix is None:
        prefix = tarballs[built.number] = normalise.standard_tarball_prefix(
            document.tag, document.package, built.version, built.platform, built.os, built.target, built.compiler
        )
    return prefix


def _hash_key(spec_hash):
    """A hash as the int its 32 characters spell in base 36 (Spack's alphabet, a-z and 2-7, is a subset of its
    digits, so no two hashes share one): 48 bytes in memory where the string takes 81."""
    return int(spec_hash, 36)


class Loader:
    """Turns records into rows of one open database, remembering every id it has handed out."""

    def __init__(self, conn, writer):
        self.conn = conn
        self.writer = writer
        self.ids = {}  # table -> {identity: id}, read from the database when the table is first used
        self.next_id = {}
        self.pending = {table: [] for table in schema.LOAD_ORDER}
        self.origins = []  # see mark()
        self.configuration_by_built = {}  # (package id, Built.number) -> configuration id
        self.built_of = {}  # configuration id -> (package, Built), for those this build added
        self.listing_by_stacks = {}  # (configuration id, stacks) -> id
        # _hash_key(hash) -> spec id | configuration id << 32 for the hashes of this build: two ints per
        # hash keep a history of millions in memory. Hashes already in the database are looked up when seen.
        self.spec_ids, self.spec_sizes = {}, {}
        self.with_edges = set()  # ids of specs whose edges are stored or queued
        self.kind_ids = {}  # DependencyKind -> id
        for table in ("specs", "pages"):  # ids handed out without a lookup of every existing row
            self.next_id[table] = conn.execute(f"SELECT ifnull(max(id), 0) + 1 FROM {table}").fetchone()[0]
        self.database_has_specs = self.next_id["specs"] > 1
        self.pages_by_name = {
            (tag, package): path
            for tag, package, path in conn.execute(
                "SELECT tags.name, packages.name, path FROM pages JOIN tags ON tags.id = tag_id"
                " JOIN packages ON packages.id = package_id"
            )
        }
        self.first_ids = {table: None for table in schema.COLUMNS}  # filled as tables are first used
        self.first_ids.update(self.next_id)

    def _lookup(self, table):
        """{identity: id} of the rows of table, those of the database first."""
        ids = self.ids.get(table)
        if ids is None:
            identity = schema.IDENTITY[table]
            found = self.conn.execute(f"SELECT {', '.join(identity)}, id FROM {table}")
            ids = self.ids[table] = (
                {row[0]: row[1] for row in found} if len(identity) == 1 else {row[:-1]: row[-1] for row in found}
            )
            self.next_id[table] = self.first_ids[table] = max(ids.values(), default=0) + 1
        return ids

    def _id(self, table, key, make_row):
        """The id of the row whose identity is key, queueing the row make_row(id) the first time key is seen."""
        ids = self._lookup(table)
        found = ids.get(key)
        if found is None:
            found = ids[key] = self.next_id[table]
            self.next_id[table] += 1
            row = make_row(found)
            if _IDENTITY_OF[table](row) != key:
                raise AssertionError(f"{table}: a row made for {key!r} has the identity {_IDENTITY_OF[table](row)!r}")
            self.queue(row)
        return found

    def queue(self, row):
        self.pending[type(row).__name__].append(row)

    def tag_id(self, name):
        def row(new_id):
            tag = normalise.classify_tag(name)
            return ROWS["tags"](
                id=new_id,
                name=name,
                kind=tag.kind,
                snapshot_date=tag.snapshot_date,
                release_version=tag.release_version,
                sort_order=0,  # rank_versions_and_tags orders the tags once all are known
                mirror_url=tag.mirror_url,
            )

        return self._id("tags", name, row)

    def _named_id(self, table, name):
        return self._id(table, name, lambda new_id: ROWS[table](id=new_id, name=name))

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
            self._spec_rows(document, package_id, number, binary, tarballs) for number, binary in enumerate(binaries)
        ]
        page_id = self.next_id["pages"]
        self.next_id["pages"] += 1
        self.pages_by_name[(document.tag, document.package)] = document.source
        self.queue(
            ROWS["pages"](
                id=page_id,
                tag_id=tag_id,
                package_id=package_id,
                path=document.source,
                digest=document.digest,
                num_specs=len(binaries),
                meta=document.meta_text,
                sorted_keys=int(document.sorted_keys),
                key_order=None if document.key_order is None else json.dumps(document.key_order),
                extra=json.dumps(document.extra, sort_keys=True) if document.extra else None,
            )
        )
        add_spec, add_page_spec = self.pending["specs"].append, self.pending["page_specs"].append
        for new_spec, page_spec in rows:
            if new_spec is not None:
                add_spec(new_spec)
            add_page_spec(page_spec._replace(page_id=page_id))

    def _spec_rows(self, document, package_id, position, binary, tarballs):
        """(the specs row, or None for a spec known already; the page_specs row, its page to be filled in)"""
        built = binary.built
        configuration_id = self._configuration_of(document.package, package_id, built)
        spec_id, new_spec = self._spec_id(binary.hash, configuration_id, binary.size, document, position)
        listing_id = self.listing_by_stacks.get((configuration_id, binary.stacks))
        if listing_id is None:
            listing_id = self._listing_id(configuration_id, self._stack_set_id(binary.stacks))
            self.listing_by_stacks[(configuration_id, binary.stacks)] = listing_id
        extra, standard_tarball = binary.extra, 0
        if extra:
            if (
                "tarball" in extra
                and extra["tarball"] == _tarball_prefix(tarballs, document, built) + binary.hash + ".spack"
            ):
                extra = {k: v for k, v in extra.items() if k != "tarball"}
                standard_tarball = 1
            extra = json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None
        else:
            extra = None
        page_spec = ROWS["page_specs"](
            page_id=None,
            spec_id=spec_id,
            position=position,
            listing_id=listing_id,
            compiler_exact=int(built.compiler_exact),
            standard_tarball=standard_tarball,
            extra=extra,
        )
        return new_spec, page_spec

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
            row = ROWS["specs"](
                id=spec_id, hash=spec_hash, configuration_id=configuration_id, size=size, external=external
            )
            return spec_id, row
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
            _, new_spec = self._spec_id(node.hash, configuration_id, None, location, None, int(node.external))
            if new_spec is not None:
                self.queue(new_spec)

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
        add_edge = self.pending["spec_dependencies"].append
        for spec in specs:
            spec_id = ids[spec.hash]
            if spec_id in self.with_edges or not spec.dependencies:
                continue
            self.with_edges.add(spec_id)
            for dependency_hash, kind in spec.dependencies:
                dependency_id = self.spec_ids[_hash_key(dependency_hash)] & 0xFFFFFFFF
                add_edge(
                    ROWS["spec_dependencies"](spec_id=spec_id, dependency_id=dependency_id, kind_id=self._kind_id(kind))
                )

    def _kind_id(self, kind):
        kind_id = self.kind_ids.get(kind)
        if kind_id is None:
            deptypes, virtuals = json.dumps(kind.deptypes), json.dumps(kind.virtuals)
            kind_id = self.kind_ids[kind] = self._id(
                "dependency_kinds",
                (deptypes, virtuals),
                lambda new_id: ROWS["dependency_kinds"](
                    id=new_id,
                    deptypes=deptypes,
                    virtuals=virtuals,
                    **{flag: int(deptype in kind.deptypes) for deptype, flag in schema.DEPTYPE_FLAGS.items()},
                ),
            )
        return kind_id

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
        page_id = next((row.page_id for row in self.pending["page_specs"] if row.spec_id == spec_id), None)
        if page_id is not None:
            return next(row.path for row in self.pending["pages"] if row.id == page_id)
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
        """The configuration of a package's Built: its parts by id, and Built's other fields that are columns."""
        version_id = self._id(
            "versions",
            (package_id, built.version),
            lambda new_id: ROWS["versions"](id=new_id, package_id=package_id, version=built.version, version_rank=0),
        )
        compiler = built.compiler
        compiler_id = self._id(
            "compilers",
            str(compiler),
            lambda new_id: ROWS["compilers"](
                id=new_id, label=str(compiler), name=compiler.name, version=compiler.version
            ),
        )
        columns = ROWS["configurations"](
            id=None,
            version_id=version_id,
            compiler_id=compiler_id,
            os_id=self._named_id("oss", built.os),
            platform_id=self._named_id("platforms", built.platform),
            target_id=self._named_id("targets", built.target),
            variant_set_id=self._variant_set_id(built.variants),
            **{field: getattr(built, field) for field in BUILT_COLUMNS},
        )

        def row(new_id):
            self.built_of[new_id] = (package, built)
            return columns._replace(id=new_id)

        return self._id("configurations", _IDENTITY_OF["configurations"](columns), row)

    def _variant_id(self, variant):
        def row(new_id):
            if not variant.is_boolean:
                for position, value in enumerate(variant.values):
                    self.queue(ROWS["variant_values"](variant_id=new_id, position=position, value=value))
            return ROWS["variants"](
                id=new_id, raw=variant.raw, name=variant.name, operator=variant.operator, value=variant.value
            )

        return self._id("variants", variant.raw, row)

    def _variant_set_id(self, variants):
        text = json.dumps([v.raw for v in variants], ensure_ascii=False)

        def row(new_id):
            for position, variant in enumerate(variants):
                self.queue(
                    ROWS["variant_set_members"](
                        variant_set_id=new_id, position=position, variant_id=self._variant_id(variant)
                    )
                )
            return ROWS["variant_sets"](id=new_id, variants=text, spec_variants=normalise.spec_variants(variants))

        return self._id("variant_sets", text, row)

    def _stack_set_id(self, stacks):
        text = json.dumps(stacks)

        def row(new_id):
            for stack in stacks:
                self.queue(ROWS["stack_set_members"](stack_set_id=new_id, stack_id=self.stack_id(stack)))
            return ROWS["stack_sets"](id=new_id, stacks=text)

        return self._id("stack_sets", text, row)

    def _listing_id(self, configuration_id, stack_set_id):
        return self._id(
            "listings",
            (configuration_id, stack_set_id),
            lambda new_id: ROWS["listings"](id=new_id, configuration_id=configuration_id, stack_set_id=stack_set_id),
        )

    def checkpoint(self):
        return dict(self.next_id), {table: len(rows) for table, rows in self.pending.items()}

    def rollback(self, checkpoint):
        """Forget what a rejected input added since the checkpoint."""
        next_id, pending = checkpoint

        def first_new(table):  # a table first used since the checkpoint: every id of this build
            return next_id.get(table) or self.first_ids[table] or 1

        self.with_edges.difference_update(
            row.spec_id for row in self.pending["spec_dependencies"][pending["spec_dependencies"] :]
        )
        for table, length in pending.items():
            del self.pending[table][length:]
        for table in self.next_id:
            self.next_id[table] = first_new(table)
        for table, ids in self.ids.items():
            for key in [k for k, v in ids.items() if v >= self.next_id[table]]:
                del ids[key]
        for memo, table in ((self.configuration_by_built, "configurations"), (self.listing_by_stacks, "listings")):
            for key in [k for k, v in memo.items() if v >= first_new(table)]:
                del memo[key]
        self.kind_ids = {kind: i for kind, i in self.kind_ids.items() if i < first_new("dependency_kinds")}
        for configuration_id in [c for c in self.built_of if c >= first_new("configurations")]:
            del self.built_of[configuration_id]
        for key in [k for k, v in self.spec_ids.items() if v & 0xFFFFFFFF >= self.next_id["specs"]]:
            del self.spec_ids[key]
            self.spec_sizes.pop(key, None)

    def mark(self, source):
        """The rows queued from here on come from source (a file), until the next mark."""
        self.origins.append((source, {table: len(rows) for table, rows in self.pending.items()}))

    def flush(self):
        """Hand the queued rows to the writer, as plain tuples in their table's column order."""
        batches = [(table, STATEMENTS[table], list(map(tuple, rows))) for table, rows in self.pending.items() if rows]
        if batches:
            self.writer.write(batches, self.origins)
            self.pending = {table: [] for table in schema.LOAD_ORDER}
        self.origins = []


def load_tags_yaml(loader, tags):
    """Tags and their stacks as _data/tags.yaml declares them (tag_stacks has been emptied)."""
    rows = set()
    for name, stacks in tags:
        tag_id = loader.tag_id(name)
        rows.update(ROWS["tag_stacks"](tag_id=tag_id, stack_id=loader.stack_id(stack)) for stack in stacks)
    for row in sorted(rows):
        loader.queue(row)
