"""Load records into cache.db: ids resolved in memory, rows (schema.ROWS, by name) handed to the writer in batches.

Every row the loader makes is one of schema.ROWS; a table's rows are looked up by its identity (schema.IDENTITY),
read from the database before the writer starts, so an incremental build continues its ids. Specs and listings
are the exception (schema.NUMBERED_BY_DATABASE): millions of them, so rows name a spec by its hash and a listing
by its configuration and stack set, and the writer numbers them, each once (a spec's facts checked wherever it
appears). The loader remembers the listings it queued, up to LISTINGS_REMEMBERED of them, not those of the history.
"""

import json

from spack_cache_db import normalise
from spack_cache_db.db import schema
from spack_cache_db.db.writer import LISTINGS_REMEMBERED, Origin
from spack_cache_db.records import Built, InputError

ROWS = schema.ROWS
_SPEC_ROW, _PAGE_SPEC_ROW, _EDGE_ROW = (schema.PLAIN_ROWS[t] for t in ("specs", "page_specs", "spec_dependencies"))
STATEMENTS = {table: schema.insert_sql(table) for table in schema.COLUMNS}
# The tables whose rows the loader numbers and looks up by their identity (a UNIQUE key): not pages, numbered
# without a lookup, nor the tables the database numbers.
LOOKED_UP = tuple(
    table
    for table, identity in schema.IDENTITY.items()
    if "id" in schema.COLUMNS[table]
    and identity != ("id",)
    and table != "pages"
    and table not in schema.NUMBERED_BY_DATABASE
)
# What a build that reads no page nor index looks up: the tables the rows of _data/tags.yaml name.
LOOKED_UP_FOR_TAGS_YAML = tuple(
    table for table in LOOKED_UP if any(r.child == "tag_stacks" and r.parent == table for r in schema.REFERENCES)
)
# Built's fields a configuration stores as they are (its other parts are rows of their own, named by id).
BUILT_COLUMNS = tuple(field for field in schema.COLUMNS["configurations"] if field in Built._fields)


def _tarball_prefix(tarballs, document, built):
    prefix = tarballs.get(built.number)
    if prefix is None:
        prefix = tarballs[built.number] = normalise.standard_tarball_prefix(
            document.tag, document.package, built.version, built.platform, built.os, built.target, built.compiler
        )
    return prefix


class Loader:
    """Turns records into rows of one open database, remembering every id it has handed out."""

    def __init__(self, conn, writer, tags=(), looked_up=LOOKED_UP):
        """tags: those the build is about to read pages of (their pages kept are read now); looked_up: the
        tables of LOOKED_UP it may look rows up in (their ids are read now: those of configurations take 0.25 s
        in the usual 100-tag history)."""
        self.conn = conn
        self.writer = writer
        self.ids = {}  # table -> {identity: id}, those of the database first
        self.next_id = {}
        self.pending = {table: [] for table in schema.LOAD_ORDER}
        self.origins = []  # see mark()
        self.configuration_by_built = {}  # (package id, Built.number) -> configuration id
        # (configuration id, stack set id) of the listings queued, in this batch and earlier ones: each queued once
        self.queued_listings = set()
        self.variant_set_by_raw = {}  # Built.raw_variants -> variant set id: no JSON text made per configuration
        self.stack_set_by_stacks = {}  # Binary.stacks -> stack set id: no JSON text made per listing
        self.kind_ids = {}  # DependencyKind -> id
        self.tags_written = set()  # ids of the tags given pages since the last count_written_tags()
        self.handed = 0  # binaries and edges handed to the writer
        # Pages are numbered without a lookup of every existing row.
        self.next_id["pages"] = conn.execute("SELECT ifnull(max(id), 0) + 1 FROM pages").fetchone()[0]
        self.pages_by_name = {}  # tag -> {package: path}: the pages kept, read for a tag when it first comes
        self.tags_with_pages = {
            row[0] for row in conn.execute("SELECT name FROM tags WHERE id IN (SELECT tag_id FROM pages)")
        }
        self.first_ids = {table: None for table in schema.COLUMNS}  # filled as tables are looked up
        self.first_ids.update(self.next_id)
        for table in schema.NUMBERED_BY_DATABASE:  # the writer's rows take the ids after the last
            self.first_ids[table] = conn.execute(f"SELECT ifnull(max(id), 0) + 1 FROM {table}").fetchone()[0]
        # Read now, before the writer holds the file: a table first looked up later would wait for its batch.
        self.looked_up = frozenset(looked_up)
        for table in looked_up:
            self._lookup(table)
        for tag in tags:
            self._pages_of(tag)

    def _pages_of(self, tag):
        """{package: path} of the tag's pages, those the database kept first: only the tags this build reads
        are looked at, not the whole history (a tag not named to __init__, while the writer holds the file,
        waits for its batch). The tag's pages this build writes come later, and are noted here."""
        pages = self.pages_by_name.get(tag)
        if pages is None and tag not in self.tags_with_pages:
            pages = self.pages_by_name[tag] = {}
        elif pages is None:
            pages = self.pages_by_name[tag] = dict(
                self.conn.execute(
                    "SELECT packages.name, path FROM tags JOIN pages ON pages.tag_id = tags.id"
                    " JOIN packages ON packages.id = package_id WHERE tags.name = ?",
                    (tag,),
                )
            )
        return pages

    def _lookup(self, table):
        """{identity: id} of the rows of table, those of the database first."""
        ids = self.ids.get(table)
        if ids is None:
            if table not in self.looked_up:
                raise AssertionError(f"{table}: looked up by a loader that was not given it (looked_up)")
            identity = schema.IDENTITY[table]
            found = self.conn.execute(f"SELECT {', '.join(identity)}, id FROM {table}")
            ids = self.ids[table] = schema.ids_by_identity(table, found)
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
            if schema.IDENTITY_OF[table](row) != key:
                raise AssertionError(
                    f"{table}: a row made for {key!r} has the identity {schema.IDENTITY_OF[table](row)!r}"
                )
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
        pages = self._pages_of(document.tag)
        other = pages.get(document.package)
        if other is not None:
            raise InputError(
                document.source,
                "categories",
                f"expected one page per tag and package: {document.tag}/{document.package} is also {other}",
            )
        tag_id = self.tag_id(document.tag)
        self.tags_written.add(tag_id)
        package_id = self._named_id("packages", document.package)
        binaries = document.binaries
        if self.origins:
            self.origins[-1].binary_field = document.binary_field
        page_id = self.next_id["pages"]  # a rejected document gives its id back (rollback)
        self.next_id["pages"] += 1
        rows = self._spec_rows(document, page_id, package_id)
        pages[document.package] = document.source
        self.queue(
            ROWS["pages"](
                id=page_id,
                tag_id=tag_id,
                package_id=package_id,
                path=document.source,
                num_specs=len(binaries),
                meta=document.meta_text,
                sorted_keys=int(document.sorted_keys),
                key_order_id=None if document.key_order is None else self._key_order_id(document.key_order),
                extra=json.dumps(document.extra, sort_keys=True) if document.extra else None,
            )
        )
        for stack, count in document.binaries_per_stack.items():
            self.queue(ROWS["page_stacks"](page_id=page_id, stack_id=self.stack_id(stack), binaries=count))
        add_spec, add_page_spec = self.pending["specs"].append, self.pending["page_specs"].append
        for spec, page_spec in rows:
            add_spec(spec)
            add_page_spec(page_spec)

    def _spec_rows(self, document, page_id, package_id):
        """[(the specs row, the page_specs row)] of the document's binaries: both name the spec by its hash. A loop
        over millions of binaries: what a binary shares with others (its configuration's id, its listing) is found
        by a lookup, and made the first time only."""
        configuration_by_built, stack_set_by_stacks = self.configuration_by_built, self.stack_set_by_stacks
        queued_listings = self.queued_listings
        tarballs = {}  # Built.number -> the usual tarball URL of its binaries in this document, but the hash
        rows = []
        for position, binary in enumerate(document.binaries):
            built = binary.built
            configuration_id = configuration_by_built.get((package_id, built.number)) or self._configuration_of(
                package_id, built
            )
            listing = (
                configuration_id,
                stack_set_by_stacks.get(binary.stacks) or self._stack_set_id(binary.stacks),
            )
            if listing not in queued_listings:
                queued_listings.add(listing)
                self.queue(ROWS["listings"](id=None, configuration_id=configuration_id, stack_set_id=listing[1]))
            extra, standard_tarball = binary.extra, 0
            if extra:
                if (
                    "tarball" in extra
                    and extra["tarball"] == _tarball_prefix(tarballs, document, built) + binary.hash + ".spack"
                ):
                    extra = {k: v for k, v in extra.items() if k != "tarball"} if len(extra) > 1 else None
                    standard_tarball = 1
                extra = json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None
            else:
                extra = None
            rows.append(
                (
                    _SPEC_ROW(
                        id=None, hash=binary.hash, configuration_id=configuration_id, size=binary.size, external=0
                    ),
                    _PAGE_SPEC_ROW(
                        page_id=page_id,
                        spec_id=binary.hash,
                        position=position,
                        listing_id=listing,
                        compiler_exact=int(built.compiler_exact),
                        standard_tarball=standard_tarball,
                        extra=extra,
                    ),
                )
            )
        return rows

    def _key_order_id(self, keys):
        text = json.dumps(keys)
        return self._id("key_orders", text, lambda new_id: ROWS["key_orders"](id=new_id, keys=text))

    def _configuration_of(self, package_id, built):
        configuration_id = self.configuration_by_built.get((package_id, built.number))
        if configuration_id is None:
            configuration_id = self._configuration_id(package_id, built)
            self.configuration_by_built[(package_id, built.number)] = configuration_id
        return configuration_id

    def add_nodes(self, tag_id, nodes):
        """Specs that binaries of the tag depend on but that are not binaries there (externals, build-only
        compilers): rows in specs, and in dependency_only_specs for the tag, not in any of its pages."""
        for node in nodes:
            configuration_id = self._configuration_of(self._named_id("packages", node.package), node.built)
            self.queue(
                ROWS["specs"](
                    id=None, hash=node.hash, configuration_id=configuration_id, size=None, external=int(node.external)
                )
            )
            self.queue(
                ROWS["dependency_only_specs"](configuration_id=configuration_id, tag_id=tag_id, spec_id=node.hash)
            )

    def add_dependencies(self, specs):
        """The edges of these Binaries or Nodes, by hash: a spec's dependencies are part of its hash, so the
        same everywhere, and the writer stores them once."""
        add_edge = self.pending["spec_dependencies"].append
        for spec in specs:
            for dependency_hash, kind in spec.dependencies or ():
                add_edge(_EDGE_ROW(spec_id=spec.hash, dependency_id=dependency_hash, kind_id=self._kind_id(kind)))

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

    def _configuration_id(self, package_id, built):
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
            variant_set_id=self._variant_set_of(built),
            **{field: getattr(built, field) for field in BUILT_COLUMNS},
        )

        return self._id(
            "configurations", schema.IDENTITY_OF["configurations"](columns), lambda new_id: columns._replace(id=new_id)
        )

    def _variant_id(self, variant):
        def row(new_id):
            if not variant.is_boolean:
                for position, value in enumerate(variant.values):
                    self.queue(ROWS["variant_values"](variant_id=new_id, position=position, value=value))
            return ROWS["variants"](
                id=new_id, raw=variant.raw, name=variant.name, operator=variant.operator, value=variant.value
            )

        return self._id("variants", variant.raw, row)

    def _variant_set_of(self, built):
        found = self.variant_set_by_raw.get(built.raw_variants)
        if found is None:
            found = self.variant_set_by_raw[built.raw_variants] = self._variant_set_id(built.variants)
        return found

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
        found = self.stack_set_by_stacks.get(stacks)
        if found is None:
            found = self.stack_set_by_stacks[stacks] = self._new_stack_set_id(stacks)
        return found

    def _new_stack_set_id(self, stacks):
        text = json.dumps(stacks)

        def row(new_id):
            for stack in stacks:
                self.queue(ROWS["stack_set_members"](stack_set_id=new_id, stack_id=self.stack_id(stack)))
            return ROWS["stack_sets"](id=new_id, stacks=text)

        return self._id("stack_sets", text, row)

    def checkpoint(self):
        return dict(self.next_id), {table: len(rows) for table, rows in self.pending.items()}

    def rollback(self, checkpoint):
        """Forget what a rejected input added since the checkpoint."""
        next_id, pending = checkpoint

        def first_new(table):  # a table first used since the checkpoint: every id of this build
            return next_id.get(table) or self.first_ids[table] or 1

        self.queued_listings.difference_update(
            map(schema.IDENTITY_OF["listings"], self.pending["listings"][pending["listings"] :])
        )
        for table, length in pending.items():
            del self.pending[table][length:]
        for table in self.next_id:
            self.next_id[table] = first_new(table)
        for table, ids in self.ids.items():
            for key in [k for k, v in ids.items() if v >= self.next_id[table]]:
                del ids[key]
        for memo, table in (
            (self.configuration_by_built, "configurations"),
            (self.variant_set_by_raw, "variant_sets"),
            (self.stack_set_by_stacks, "stack_sets"),
        ):
            for key in [k for k, v in memo.items() if v >= first_new(table)]:
                del memo[key]
        self.kind_ids = {kind: i for kind, i in self.kind_ids.items() if i < first_new("dependency_kinds")}

    def mark(self, source):
        """The rows queued from here on come from source (a file or an index), until the next mark."""
        self.origins.append(Origin(source, {table: len(rows) for table, rows in self.pending.items()}))

    def count_written_tags(self):
        """Have the writer count the tags given pages since the last call, once their rows are written; returns
        their ids. A tag's counts are kept up to date only if none of its pages comes after this."""
        self.flush()
        counted, self.tags_written = self.tags_written, set()
        if counted:
            self.writer.count_tags(sorted(counted))
        return counted

    def queued(self):
        """The binaries and edges queued for the next batch."""
        return len(self.pending["page_specs"]) + len(self.pending["spec_dependencies"])

    def flush(self):
        """Hand the queued rows to the writer, as plain tuples in their table's column order."""
        batches = [(table, STATEMENTS[table], list(map(tuple, rows))) for table, rows in self.pending.items() if rows]
        if batches:
            self.handed += self.queued()
            self.writer.write(batches, self.origins)
            self.pending = {table: [] for table in schema.LOAD_ORDER}
            if len(self.queued_listings) > LISTINGS_REMEMBERED:  # queued again, a listing is written once
                self.queued_listings = set()
        # The input being read goes on queueing rows: they come from it, from the first of the next batch.
        self.origins = [
            Origin(last.source, dict.fromkeys(self.pending, 0), last.binary_field) for last in self.origins[-1:]
        ]


def load_tags_yaml(loader, tags):
    """Tags and their stacks as _data/tags.yaml declares them (tag_stacks has been emptied)."""
    rows = set()
    for name, stacks in tags:
        tag_id = loader.tag_id(name)
        rows.update(ROWS["tag_stacks"](tag_id=tag_id, stack_id=loader.stack_id(stack)) for stack in stacks)
    for row in sorted(rows):
        loader.queue(row)
