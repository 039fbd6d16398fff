"""The build-cache index reader: find a tag's indexes (cache_spack_io_index.json, a mirror of either layout,
or an index URL), learn their content addresses cheaply, download and verify them, and turn their records
into Documents (a tag's binaries of one package), Nodes (specs held only as dependencies) and edges.

Which records are binaries, their stacks, compilers and variants follow the rules cache.spack.io's
generator used to write its pages from these indexes (see the README's "Build-cache indexes")."""

import collections
import json
import re
import urllib.parse
from dataclasses import dataclass

import msgspec

from spack_cache_db.normalise import (
    HASH,
    NAME,
    NO_COMPILER,
    binaries_per_stack,
    name_problem,
    parse_compiler,
    parse_variant,
    text_problem,
)
from spack_cache_db.read import fetch
from spack_cache_db.read.locations import Location
from spack_cache_db.records import Binary, Built, DependencyKind, Document, InputError, Node, one_line

LISTING_NAME = "cache_spack_io_index.json"
ROOT = "root"  # the label of a tag's own mirror, the union of its stacks
DATABASE_VERSIONS = ("5", "6", "7", "8", "9")
COMPILER_FLAGS = frozenset(("cflags", "cppflags", "cxxflags", "fflags", "ldflags", "ldlibs"))
COMPILER_LANGUAGES = ("c", "cxx", "fortran")  # the virtual whose provider is a node's compiler, in this order
_BLOB = re.compile(
    r"^(?P<mirror>.*)/blobs/(?P<algorithm>[a-z0-9]+)/(?P<prefix>[0-9a-f]{2})/(?P<checksum>[0-9a-f]{64})$"
)
_V2_INDEX = "build_cache/index.json"
_V3_MANIFEST = "v3/manifests/index/index.manifest.json"
_TEXT = re.compile(r"[^\s\x00-\x1f\x7f]{1,200}")  # a name, version or arch part: printable, no spaces


# --- Where a tag's indexes are --------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexSource:
    tag: str
    label: str  # ROOT, or the stack
    location: Location  # a mirror, a v2 index.json or an index blob


def is_listing(location):
    return urllib.parse.urlsplit(str(location)).path.rstrip("/").endswith("/" + LISTING_NAME) or str(location).endswith(
        LISTING_NAME
    )


def listing_sources(location, data):
    """The IndexSources a cache_spack_io_index.json at location lists: {tag: [{label, url}, ...]}, URLs resolved
    against location as the policy allows (locations.py)."""
    try:
        listing = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise InputError(location, "file", f"expected JSON, {fetch.found_instead(data, 'JSON')}") from error
    if not isinstance(listing, dict):
        raise InputError(location, "file", "expected a JSON object of tags, each a list of {label, url}")
    sources = []
    for tag, entries in listing.items():
        _check_tag(location, "tag", tag)
        if not isinstance(entries, list):
            raise InputError(location, tag, "expected a list of {label, url}")
        for number, entry in enumerate(entries):
            where = f"{tag}[{number}]"
            if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("label", "url")):
                raise InputError(location, where, "expected {label, url} with text values")
            _check_tag(location, f"{where}.label", entry["label"])
            sources.append(IndexSource(tag, entry["label"], location.join(entry["url"], f"{where}.url")))
    return sources


def mirror_source(argument):
    """The IndexSource of TAG=LOCATION (a mirror or an index, listed under TAG), or of a bare LOCATION, whose
    tag is the last part of its mirror's path."""
    tag, _, named = argument.partition("=") if names_a_tag(argument) else ("", "", argument)
    location = Location.named(named)
    if not tag:
        tag = mirror_url(location).rstrip("/").rsplit("/", 1)[-1]
        if not NAME.fullmatch(tag):
            raise InputError(argument, "tag", "expected TAG=LOCATION: no tag can be taken from this location")
    _check_tag(argument, "tag", tag)
    return IndexSource(tag, ROOT, location)


def names_a_tag(argument):
    """TAG=LOCATION (a tag cannot hold '/' or ':', so a URL with '=' in its query is not one)."""
    before, equals, _ = argument.partition("=")
    return bool(equals) and bool(NAME.fullmatch(before))


def is_blob(location):
    return bool(_BLOB.match(str(location).rstrip("/")))


def _check_tag(location, field, name):
    problem = name_problem(name)
    if problem:
        raise InputError(location, field, problem)


def mirror_url(location):
    """The mirror an index belongs to: what `spack mirror add` takes."""
    location = str(location).rstrip("/")
    blob = _BLOB.match(location)
    if blob:
        return blob["mirror"]
    for suffix in ("/" + _V2_INDEX, "/" + _V3_MANIFEST):
        if location.endswith(suffix):
            return location[: -len(suffix)]
    if location.endswith(".json"):  # an index file on its own: the folder it is in is the best guess
        return location.rsplit("/", 1)[0]
    return location


# --- Its layout and content address ---------------------------------------------------------------------------


@dataclass
class Resolved:
    """An index located: where its bytes are and what they must hash to, found without downloading it."""

    source: IndexSource
    index_url: Location
    mirror_url: str
    layout: str  # v2, v3, or file (an index JSON with no companion hash)
    checksum: str | None  # sha256 of the bytes as stored; None: known only once downloaded
    compression: str = "none"
    content_length: int | None = None
    fetched: fetch.Fetched | None = None  # once downloaded (or asked whether it changed)


def resolve(source):
    """Where source's index is and its sha256, reading at most a manifest or a hash file."""
    location = source.location
    text = location.text.rstrip("/")
    blob = _BLOB.match(text)
    if blob:
        if blob["algorithm"] != "sha256":
            raise InputError(location, "checksum", f"expected a sha256 blob, found {blob['algorithm']}")
        return Resolved(source, location, blob["mirror"], "v3", blob["checksum"])
    if text.endswith("/" + _V2_INDEX) or text == _V2_INDEX:
        return _resolve_v2(source, location.up(_V2_INDEX))
    if text.endswith(".json"):
        return Resolved(source, location, mirror_url(text), "file", None)
    if fetch.exists(location.below("v3/layout.json")):
        return _resolve_v3(source, location)
    if fetch.exists(location.below(_V2_INDEX)):
        return _resolve_v2(source, location)
    raise InputError(
        location, "layout", "expected a build-cache mirror (v3/layout.json or build_cache/index.json) or an index file"
    )


def _resolve_v2(source, mirror):
    index, hash_file = mirror.below(_V2_INDEX), mirror.below(_V2_INDEX + ".hash")
    checksum = None
    if fetch.exists(hash_file):
        data = fetch.fetch(hash_file, max_bytes=1024).data
        checksum = bytes(data).decode("ascii", "replace").strip()
        if not re.fullmatch(r"[0-9a-f]{64}", checksum):
            raise InputError(
                hash_file,
                "hash",
                f"expected the sha256 of index.json in hex, {fetch.found_instead(data, 'a sha256 in hex')}",
            )
    return Resolved(source, index, mirror_url(mirror), "v2", checksum)


class _Blob(msgspec.Struct, gc=False):
    contentLength: int  # noqa: N815 (the manifest's own names)
    mediaType: str  # noqa: N815
    compression: str
    checksumAlgorithm: str  # noqa: N815
    checksum: str


class _Manifest(msgspec.Struct, gc=False):
    version: int
    data: list[_Blob]


def _resolve_v3(source, mirror):
    manifest_url = mirror.below(_V3_MANIFEST)
    manifest = _decode(manifest_url, fetch.fetch(manifest_url, max_bytes=1024**2).data, _Manifest)
    if manifest.version != 3:
        raise InputError(manifest_url, "version", f"expected 3, found {manifest.version}")
    blob = _newest_database_blob(manifest_url, manifest)
    if blob.checksumAlgorithm != "sha256":
        raise InputError(
            manifest_url, "data.checksumAlgorithm", f"expected sha256, found {blob.checksumAlgorithm!r:.80}"
        )
    if not re.fullmatch(r"[0-9a-f]{64}", blob.checksum):
        raise InputError(manifest_url, "data.checksum", "expected a sha256 checksum in hex")
    if blob.compression not in ("none", "gzip"):
        raise InputError(manifest_url, "data.compression", f"expected none or gzip, found {blob.compression!r}")
    url = mirror.below(f"blobs/sha256/{blob.checksum[:2]}/{blob.checksum}")
    return Resolved(source, url, mirror_url(mirror), "v3", blob.checksum, blob.compression, blob.contentLength)


def _newest_database_blob(manifest_url, manifest):
    """The manifest's index in the newest Database version we read (a manifest may list several)."""
    found = {}
    for blob in manifest.data:
        match = re.fullmatch(r"application/vnd\.spack\.db\.v(\d+)\+json", blob.mediaType)
        if match and match[1] in DATABASE_VERSIONS:
            found[int(match[1])] = blob
    if not found:
        raise InputError(
            manifest_url, "data.mediaType", f"expected an index of Database version {', '.join(DATABASE_VERSIONS)}"
        )
    return found[max(found)]


# --- Downloading and decoding -----------------------------------------------------------------------------------


def download(resolved, *, validators=None, progress=None):
    """The index's JSON bytes, verified against its checksum and decompressed as they arrive; Fetched.data is
    None when the validators say it has not changed."""
    gzip = resolved.compression == "gzip"
    fetched = fetch.fetch(resolved.index_url, validators=validators, progress=progress, gzip=gzip)
    if fetched.data is None:
        return fetched
    if resolved.content_length is not None and fetched.size != resolved.content_length:
        raise InputError(
            resolved.index_url, "contentLength", f"expected {resolved.content_length:,} bytes, found {fetched.size:,}"
        )
    if resolved.checksum is not None and fetched.sha256 != resolved.checksum:
        raise InputError(resolved.index_url, "checksum", f"expected sha256 {resolved.checksum}, found {fetched.sha256}")
    if fetched.problem:
        raise fetched.problem
    resolved.checksum = fetched.sha256
    return fetched


# Only the fields we use are decoded, and the parts many records share (arch, parameters, an edge's types)
# are kept as their raw JSON at first: records with the same bytes are read once. A busy tag's root index
# is about 150 MB of JSON.
class _Target(msgspec.Struct, gc=False):
    name: str


class _Arch(msgspec.Struct, gc=False):
    platform: str
    platform_os: str
    target: str | _Target


class _Compiler(msgspec.Struct, gc=False):
    name: str
    version: str


class _Annotations(msgspec.Struct, gc=False):
    original_specfile_version: int = 5
    compiler: str | None = None


class _EdgeParameters(msgspec.Struct, gc=False):
    deptypes: list[str] = []
    virtuals: list[str] = []


class _Dependency(msgspec.Struct, gc=False):
    hash: str
    parameters: msgspec.Raw = msgspec.Raw(b"")  # DB 7+: {"deptypes": [...], "virtuals": [...]}
    type: msgspec.Raw = msgspec.Raw(b"")  # DB 6: [...]


class _OldDependency(msgspec.Struct, gc=False):  # spec format 1: {name: {hash, type}}
    hash: str
    type: msgspec.Raw = msgspec.Raw(b"")
    parameters: msgspec.Raw = msgspec.Raw(b"")


class _External(msgspec.Struct, gc=False):
    """Only whether a node has it: an external, installed outside Spack."""


# A node's fields that a configuration (Built) takes as they are, by the same names.
_NODE_TEXTS = ("version",)


def _texts_of(node):
    return tuple(getattr(node, field) for field in _NODE_TEXTS)


class _Node(msgspec.Struct, gc=False):
    name: str
    version: str
    arch: msgspec.Raw
    parameters: msgspec.Raw = msgspec.Raw(b"{}")
    dependencies: list[_Dependency] | dict[str, _OldDependency] = []
    compiler: _Compiler | None = None
    annotations: _Annotations | None = None
    external: _External | None = None


class _Record(msgspec.Struct, gc=False):
    spec: _Node
    in_buildcache: bool = False


class _Database(msgspec.Struct, gc=False):
    version: str
    installs: dict[str, _Record]


class _Index(msgspec.Struct, gc=False):
    database: _Database


# Database version 5 (Spack 0.13 to 0.16, spec format 1): a record's spec is {name: node}, its node has no
# name, and its compiler and dependencies ({name: {hash, type}}) as the older nodes above have them.
class _Node5(msgspec.Struct, gc=False):
    version: str
    arch: msgspec.Raw
    parameters: msgspec.Raw = msgspec.Raw(b"{}")
    dependencies: dict[str, _OldDependency] = {}
    compiler: _Compiler | None = None
    external: _External | None = None


class _Record5(msgspec.Struct, gc=False):
    spec: dict[str, _Node5]
    in_buildcache: bool = False


class _Database5(msgspec.Struct, gc=False):
    version: str
    installs: dict[str, _Record5]


class _Index5(msgspec.Struct, gc=False):
    database: _Database5


class _Version(msgspec.Struct, gc=False):
    version: str


class _VersionOfIndex(msgspec.Struct, gc=False):
    database: _Version


@dataclass
class ParsedIndex:
    label: str
    location: str
    checksum: str  # sha256 of the index as stored
    version: str
    records: dict  # hash -> _Record: every record, or (listed_binaries) only its binaries
    size: int  # records in the index


def parse_index(location, label, checksum, data):
    """An index's records, checked: Database version 5 to 9, hashes, and an edge's hash has a record."""
    database = _decoded_database(location, data)
    _check_version_and_hashes(location, database)
    for spec_hash, record in database.installs.items():
        where = f"database.installs.{spec_hash}"
        for number, dependency in enumerate(_dependencies(record.spec)):
            if dependency.hash not in database.installs:
                raise InputError(
                    location, f"{where}.spec.dependencies[{number}].hash", "expected a record for it in the index"
                )
    return ParsedIndex(label, location, checksum, database.version, database.installs, len(database.installs))


def _decoded_database(location, data):
    """The index's database; one whose records are not of the shape its version has is refused for its
    version, when it is one we do not read, wherever the version is in the document."""
    try:
        return _decode(location, data, _Index).database
    except InputError as error:
        try:
            version = _decode(location, data, _VersionOfIndex).database.version
        except InputError:  # worse further on: what the first reading said stands
            raise error from None
        if version not in DATABASE_VERSIONS:
            raise _version_error(location, version) from None
        if version != "5":
            raise
    database = _decode(location, data, _Index5).database
    return _Database(
        database.version, {key: _record_of(location, key, record) for key, record in database.installs.items()}
    )


def _record_of(location, spec_hash, record):
    """A version 5 record as the newer ones are: the package's name in its node."""
    if len(record.spec) != 1:
        raise InputError(location, f"database.installs.{spec_hash}.spec", "expected one package name and its node")
    ((name, node),) = record.spec.items()
    spec = _Node(name, node.version, node.arch, node.parameters, node.dependencies, node.compiler, None, node.external)
    return _Record(spec, record.in_buildcache)


class _Listed(msgspec.Struct, gc=False):
    in_buildcache: bool = False


class _ListedDatabase(msgspec.Struct, gc=False):
    version: str
    installs: dict[str, _Listed]


class _ListedIndex(msgspec.Struct, gc=False):
    database: _ListedDatabase


def listed_binaries(location, data):
    """(Database version, the hashes an index has binaries of, its number of records): what a stack's index
    adds to a tag whose root index has the facts already, decoded at a fraction of the memory."""
    database = _decode(location, data, _ListedIndex).database
    _check_version_and_hashes(location, database)
    binaries = {spec_hash for spec_hash, record in database.installs.items() if record.in_buildcache}
    return database.version, binaries, len(database.installs)


def _check_version_and_hashes(location, database):
    if database.version not in DATABASE_VERSIONS:
        raise _version_error(location, database.version)
    for spec_hash in database.installs:
        if not HASH.fullmatch(spec_hash):
            where = f"database.installs.{spec_hash[:80]}"
            raise InputError(location, where, "expected a key of 32 characters of Spack's base32 alphabet (a-z, 2-7)")


def _version_error(location, version):
    readable = f"{DATABASE_VERSIONS[0]}–{DATABASE_VERSIONS[-1]}"
    return InputError(location, "database.version", f"Database version {version:.40} is not read ({readable} are)")


class _RawDatabase(msgspec.Struct, gc=False):
    installs: dict[str, msgspec.Raw]


class _RawIndex(msgspec.Struct, gc=False):
    database: _RawDatabase


class _InstallsText(msgspec.Struct, gc=False):
    installs: msgspec.Raw


class _IndexOfInstallsText(msgspec.Struct, gc=False):
    database: _InstallsText


def _decode(location, data, shape):
    try:
        return msgspec.json.decode(data, type=shape)
    except msgspec.ValidationError as error:
        if shape in _RECORD_OF and "installs[...]" in str(error):
            _name_the_record(location, data, _RECORD_OF[shape])
        raise _validation_error(location, error, "") from error
    except msgspec.DecodeError as error:
        raise InputError(location, "file", f"expected JSON, {fetch.found_instead(data, 'JSON', error)}") from error
    except RecursionError as error:
        raise InputError(location, "file", "expected JSON nested less deep than this") from error


_RECORD_OF = {_Index: _Record, _Index5: _Record5}


def _name_the_record(location, data, record_shape):
    """msgspec does not say which key of installs failed: decode the records one by one to name it. The
    document may hold worse further on (a record nested past what can be read, bytes that are not JSON):
    then the record goes unnamed."""
    try:
        installs = msgspec.json.decode(data, type=_RawIndex).database.installs
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return
    for spec_hash, raw in installs.items():
        try:
            msgspec.json.decode(raw, type=record_shape)
        except msgspec.ValidationError as error:
            raise _validation_error(location, error, f"database.installs.{spec_hash}") from error
    _name_a_repeated_hash(location, data)  # each record is fine alone: a later one of its hash replaced the wrong one


def _name_a_repeated_hash(location, data):
    """A hash given twice in installs keeps only its last record when decoded: the one that failed was earlier."""
    try:
        installs = msgspec.json.decode(data, type=_IndexOfInstallsText).database.installs
        keys = [key for key, _ in json.loads(bytes(installs), object_pairs_hook=list)]  # each object as its pairs
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError):
        return
    repeated = next((key for key, count in collections.Counter(keys).items() if count > 1), None)
    if repeated is not None:
        raise InputError(location, f"database.installs.{repeated}", "expected each hash once, found it again")


def _validation_error(location, error, prefix):
    message, _, path = str(error).partition(" - at `$")
    field = path.rstrip("`").lstrip(".").replace("['", ".").replace("']", "")
    field = ".".join(part for part in (prefix, field) if part) or "file"
    return InputError(location, field, _expected(message))


def _expected(message):
    """msgspec's 'Expected `str`, got `int`' in our words."""
    words = {"str": "text", "int": "a whole number", "bool": "true or false", "array": "a list", "object": "an object"}
    match = re.fullmatch(r"Expected `(.+?)`, got `(.+?)`", message)
    if match:
        wanted = " or ".join(words.get(kind, kind) for kind in match[1].split(" | "))
        return f"expected {wanted}, found {words.get(match[2], match[2])}"
    if message == "Number out of range":
        return "expected a value, found a number too large to read"
    return one_line(message).replace("Object missing required field", "expected the field")


# --- Records as Documents, Nodes and edges -------------------------------------------------------------------


@dataclass
class TagRecords:
    tag: str
    documents: list  # Document per package, binaries sorted by hash, packages by name
    nodes: list  # Node: specs the tag's binaries depend on that are not binaries of the tag


def tag_records(tag, indexes, configurations):
    """What a tag's indexes (ParsedIndex, root first) list: binaries are records in_buildcache somewhere,
    their stacks the labels of the indexes where they are."""
    records, stacks, where = {}, {}, {}
    for index in indexes:
        for spec_hash, record in index.records.items():
            if spec_hash not in records:
                records[spec_hash], where[spec_hash] = (record, index.version), index.location
            if record.in_buildcache:
                stacks.setdefault(spec_hash, set()).add(index.label)
    reader = _RecordReader(records, where, configurations)
    by_package = {}
    for spec_hash in sorted(stacks):
        built, edges = reader.read(spec_hash)
        binary = Binary(spec_hash, built, tuple(sorted(stacks[spec_hash])), None, {}, edges)
        by_package.setdefault(records[spec_hash][0].spec.name, []).append(binary)
    nodes = []
    for spec_hash in _dependencies_only(stacks, records):
        spec = records[spec_hash][0].spec
        built, edges = reader.read(spec_hash)
        nodes.append(Node(spec_hash, spec.name, built, spec.external is not None, edges))
    documents = [
        Document(
            source=indexes[0].location,
            tag=tag,
            package=package,
            binaries=binaries,
            binaries_per_stack=binaries_per_stack(binary.stacks for binary in binaries),
            meta_text=None,  # the one its binaries imply
            sorted_keys=True,
            key_order=None,
            binary_field="database.installs.{hash}",
        )
        for package, binaries in sorted(by_package.items())
    ]
    return TagRecords(tag, documents, nodes)


def as_binary(record):
    """The record as an index that has its binary lists it."""
    return _Record(record.spec, True)


def _dependencies_only(binaries, records):
    """Hashes the binaries reach through their edges that are not binaries themselves, in a stable order."""
    found, pending = set(), [d.hash for spec_hash in binaries for d in _dependencies(records[spec_hash][0].spec)]
    while pending:
        spec_hash = pending.pop()
        if spec_hash in binaries or spec_hash in found:
            continue
        found.add(spec_hash)
        pending.extend(d.hash for d in _dependencies(records[spec_hash][0].spec))
    return sorted(found)


def _dependencies(node):
    if isinstance(node.dependencies, dict):
        return list(node.dependencies.values())
    return node.dependencies


class _RecordReader:
    """Records as (Built, Edges), by the rules cache.spack.io used. What many records share is read once:
    configurations by the raw JSON of their arch and parameters, edge types by theirs."""

    def __init__(self, records, where, configurations):
        self.records, self.where, self.configurations = records, where, configurations
        self.built_by_raw, self.kinds, self.read_already, self.names = {}, {}, {}, set()

    def read(self, spec_hash):
        found = self.read_already.get(spec_hash)
        if found is None:
            self._check_name(spec_hash)
            edges = self._edges(spec_hash)
            found = self.read_already[spec_hash] = (self._built(spec_hash, edges), edges)
        return found

    def _check_name(self, spec_hash):
        """The package name, once per name: it becomes a folder on export."""
        name = self.records[spec_hash][0].spec.name
        if name not in self.names:
            problem = name_problem(name, "a package name")
            if problem:
                raise InputError(self.where[spec_hash], f"database.installs.{spec_hash}.spec.name", problem)
            self.names.add(name)

    def _built(self, spec_hash, edges):
        record, version = self.records[spec_hash]
        node = record.spec
        compiler = self._compiler_text(node, edges)
        text = (version, compiler, bytes(node.arch), bytes(node.parameters), *_texts_of(node))
        built = self.built_by_raw.get(text)
        if built is None:
            built = self.built_by_raw[text] = self._new_built(spec_hash, node, version, compiler)
        return built

    def _new_built(self, spec_hash, node, database_version, compiler):
        location, where = self.where[spec_hash], f"database.installs.{spec_hash}.spec"
        arch = _decode_part(location, f"{where}.arch", node.arch, _Arch)
        target = arch.target if isinstance(arch.target, str) else arch.target.name
        parameters = _decode_part(location, f"{where}.parameters", node.parameters, dict[str, bool | str | list[str]])
        for field, value in (
            ("arch.platform", arch.platform),
            ("arch.platform_os", arch.platform_os),
            ("arch.target", target),
            *zip(_NODE_TEXTS, _texts_of(node), strict=True),
        ):
            if value is not None and not _TEXT.fullmatch(value):
                raise InputError(location, f"{where}.{field}", f"expected text without spaces, found {value!r:.80}")
        parts = {
            "compiler": compiler,
            "os": arch.platform_os,
            "platform": arch.platform,
            "target": target,
            "raw_variants": tuple(_variants(parameters, database_version)),
            **dict(zip(_NODE_TEXTS, _texts_of(node), strict=True)),
        }
        text = ("index", *parts.items())
        return self.configurations.add(text, lambda: _make_built(location, where, parts))

    def _compiler_text(self, node, edges):
        if node.compiler is not None:
            return f"{node.compiler.name}@={node.compiler.version}"
        annotations = node.annotations
        if annotations is not None and annotations.original_specfile_version < 5 and annotations.compiler:
            return annotations.compiler
        for language in COMPILER_LANGUAGES:
            for dependency_hash, kind in edges:
                if language in kind.virtuals:
                    provider = self.records[dependency_hash][0].spec
                    return f"{provider.name}@{provider.version}"
        return NO_COMPILER

    def _edges(self, spec_hash):
        """The node's dependencies as (hash, DependencyKind), sorted by hash; the same hash twice is one edge
        with both edges' types."""
        edges = sorted((d.hash, self._kind(spec_hash, d)) for d in _dependencies(self.records[spec_hash][0].spec))
        if len({dependency_hash for dependency_hash, _ in edges}) == len(edges):
            return tuple(edges)
        merged = {}
        for dependency_hash, kind in edges:
            before = merged.get(dependency_hash, DependencyKind((), ()))
            merged[dependency_hash] = DependencyKind(
                tuple(sorted({*before.deptypes, *kind.deptypes})), tuple(sorted({*before.virtuals, *kind.virtuals}))
            )
        return tuple(merged.items())

    def _kind(self, spec_hash, dependency):
        """An edge's DependencyKind, read once per distinct raw JSON."""
        raw = bytes(dependency.parameters) or bytes(dependency.type)
        kind = self.kinds.get(raw)
        if kind is None:
            location, where = self.where[spec_hash], f"database.installs.{spec_hash}.spec.dependencies"
            if dependency.parameters:
                parameters = _decode_part(location, where, dependency.parameters, _EdgeParameters)
                deptypes, virtuals = parameters.deptypes, parameters.virtuals
            else:
                deptypes, virtuals = _decode_part(location, where, dependency.type, list[str]) if raw else [], []
            kind = self.kinds[raw] = DependencyKind(tuple(sorted(set(deptypes))), tuple(sorted(set(virtuals))))
        return kind


def _decode_part(location, where, raw, shape):
    try:
        return msgspec.json.decode(raw, type=shape)
    except msgspec.ValidationError as error:
        raise _validation_error(location, error, where) from error
    except RecursionError as error:
        raise InputError(location, where, "expected JSON nested less deep than this") from error


def _make_built(location, where, parts):
    """The Built of a node's parts (compiler text, os, platform, target, raw variants and its _NODE_TEXTS)."""
    parts = dict(parts)
    compiler_text = parts.pop("compiler")
    parsed = parse_compiler(compiler_text) if text_problem(compiler_text) is None else None
    if parsed is None:
        raise InputError(location, f"{where}.compiler", f"expected name@version, found {compiler_text!r:.80}")
    compiler, compiler_exact = parsed
    variants = []
    for raw in parts["raw_variants"]:
        problem = text_problem(raw)
        if problem:
            raise InputError(location, f"{where}.parameters", problem)
        variant = parse_variant(raw)
        if variant is None:
            raise InputError(location, f"{where}.parameters", f"expected a variant Spack can print, found {raw!r:.80}")
        variants.append(variant)
    return Built(number=None, compiler=compiler, compiler_exact=compiler_exact, variants=tuple(variants), **parts)


def _variants(parameters, database_version):
    """A node's parameters as Spack prints its variants, in the parameters' order."""
    for name, value in parameters.items():
        if name in COMPILER_FLAGS:
            continue
        if isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true", "false")):
            yield ("+" if value is True or str(value).lower() == "true" else "~") + name
        elif isinstance(value, str):
            yield f"{name}={value}"
        elif int(database_version) >= 8:
            values = sorted(set(value))
            yield f"{name}:={','.join(_shown(name, values)) or '*'}"
        else:
            yield f"{name}={','.join(_shown(name, value))}"


def _shown(name, values):
    """Patches are sha256 sums: Spack prints their first 7 characters."""
    return [value[:7] for value in values] if name == "patches" else values
