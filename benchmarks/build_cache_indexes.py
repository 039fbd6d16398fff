"""Write the build-cache indexes behind a synthetic tag's pages, as Spack and binaries.spack.io lay them out.

generate_corpus.py calls write_tag_mirrors once per tag and write_cache_index once at the end. A tag gets
its root mirror OUT/mirrors/<tag>/ and one mirror per stack OUT/mirrors/<tag>/<stack>/, each with the index
of its binaries in Spack's Database JSON, written compactly as Spack writes it. The records follow the
rules the builder's index reader implements, so that a tag built from its indexes gives the same binaries
as a build of its pages:

- DB 7 for tags whose pages use the older spellings (`gcc@=11.4.0`, `libs=shared,static`): nodes carry
  `compiler {name, version}`. DB 8 for the 2025 spellings: the compiler is an external record that is
  not a binary (`in_buildcache: false`), reached by a `build` edge with virtuals `c`, `cxx` (and
  `fortran` for some); a binary with compiler `none` has no such edge.
- `parameters` gives the page's variants back, in the page's order: `+x`/`~x` as booleans, `name:=v1,v2`
  as a sorted list (DB 8), multi-valued `name=v1,v2` as a list in page order (DB 7) or as one string
  (DB 8), patches as full 64-character sha256 values whose first 7 characters are the page's; then the
  six compiler-flag lists, empty.
- Dependencies are the generator's (generate_corpus.py: one DAG per hash). An index holds the records of
  its binaries and of everything they depend on, transitively: a dependency that is not a binary of that
  mirror (a build of another stack or tag, an external) is there with `in_buildcache: false`. A hash's
  record is the same in every index and every tag that has it.

Layouts: v2 (`build_cache/index.json` and `index.json.hash`) or v3 (`v3/layout.json`, the index manifest
`v3/manifests/index/index.manifest.json` and the blob `blobs/sha256/<xx>/<checksum>`). In v3 mirrors about
half the stack indexes are gzip-compressed, so that a reader meets both compressions; roots never are.

OUT/cache_spack_io_index.json lists every tag under OUT/mirrors/ in the live file's shape (tag ->
[{label, url}], `root` first, then the stacks by name), with URLs relative to that file: a v2 mirror's
`build_cache/index.json`; a v3 mirror's uncompressed index blob, as the live file points at blobs; and
for a gzip-compressed v3 index the mirror folder itself, since the live file's readers assume that a
blob it names is uncompressed JSON.
"""

import base64
import gzip
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cache

import archspec.cpu
import orjson

SEED = "spack-cache-db-benchmark-1|indexes"

FLAG_PARAMETERS = ("cflags", "cppflags", "cxxflags", "fflags", "ldflags", "ldlibs")
COMPILER_EXECUTABLES = {
    "apple-clang": ("clang", "clang++", None),
    "cce": ("craycc", "crayCC", "crayftn"),
    "intel-oneapi-compilers": ("icx", "icpx", "ifx"),
    "nvhpc": ("nvc", "nvc++", "nvfortran"),
}
GZIP_SHARE = 0.5  # of the stack indexes of a v3 tag
LAYOUT_FILE = {"signing": "gpg"}


@dataclass(frozen=True)
class Spec:
    """A build as an index records it: a binary of a page, or a build that binaries depend on."""

    package: str
    hash: str
    version: str
    platform: str
    os: str
    target: str
    compiler: str  # as the page writes it: gcc@=11.4.0, gcc@13.2.0 or none
    variants: tuple  # as the page writes them
    origin: tuple = field(compare=False)  # what the generator needs to find its dependencies


@dataclass(frozen=True)
class External:
    """A package installed outside Spack (a system compiler, perl): a dependency, never a binary."""

    name: str
    version: str
    platform: str
    os: str
    target: str  # a family: x86_64, aarch64, ppc64le

    @property
    def hash(self):
        return dag_hash(f"external|{self.name}@{self.version}|{self.platform}|{self.os}|{self.target}")


# --- records -----------------------------------------------------------------------------------------------------


def parse_compiler(text):
    """(name, version) of a page's compiler (`gcc@=11.4.0`, `gcc@13.2.0`), None for `none`."""
    if text == "none":
        return None
    name, version = text.split("@", 1)
    return name, version.removeprefix("=")


@cache
def target_node(name):
    """The target as Spack writes a known microarchitecture into a node."""
    target = archspec.cpu.TARGETS[name]
    return {
        "name": target.name,
        "vendor": target.vendor,
        "features": sorted(target.features),
        "generation": target.generation,
        "parents": [parent.name for parent in target.parents],
        "cpupart": target.cpu_part,
    }


def target_family(name):
    return archspec.cpu.TARGETS[name].family.name


def dag_hash(seed):
    """32 characters of Spack's base32 alphabet (a-z, 2-7), as generate_corpus.py makes the binaries' hashes."""
    return base64.b32encode(hashlib.blake2b(f"{SEED}|{seed}".encode(), digest_size=20).digest()).decode().lower()


@cache
def package_hash(package, version):
    """A package_hash as Spack writes it: the base32 of 32 bytes, 52 characters and `====`."""
    return base64.b32encode(hashlib.sha256(f"{SEED}|package|{package}|{version}".encode()).digest()).decode().lower()


def full_patch(prefix):
    """A 64-character sha256 whose first 7 characters are the page's."""
    return prefix + hashlib.sha256(f"{SEED}|patch|{prefix}".encode()).hexdigest()[:57]


def parameters(variants, db_version, list_variants):
    """The node's parameters: the page's variants in its order, then the six compiler-flag lists."""
    values = {}
    for text in variants:
        name, value = parameter(text, db_version, list_variants)
        values[name] = value
    return values | {flag: [] for flag in FLAG_PARAMETERS}


def parameter(text, db_version, list_variants):
    if text[0] in "+~":
        return text[1:], text[0] == "+"
    name, value = text.split("=", 1)
    if name.endswith(":"):  # name:=v1,v2, "exactly these": a list, which DB 8 renders with :=
        if db_version < 8:
            raise ValueError(f"{text}: a DB {db_version} index cannot spell ':='")
        return name[:-1], sorted(set(list_values(name[:-1], value)))
    if db_version < 8 and name in list_variants:
        return name, list_values(name, value)
    return name, value


def list_values(name, value):
    values = value.split(",")
    return [full_patch(v) for v in values] if name == "patches" else values


def edge(dependency, deptypes, virtuals):
    name = dependency.name if isinstance(dependency, External) else dependency.package
    return {
        "name": name,
        "hash": dependency.hash,
        "parameters": {"deptypes": list(deptypes), "virtuals": list(virtuals)},
    }


def spec_node(spec, db_version, list_variants, edges):
    node = {
        "name": spec.package,
        "version": spec.version,
        "arch": {"platform": spec.platform, "platform_os": spec.os, "target": target_node(spec.target)},
    }
    compiler = parse_compiler(spec.compiler)
    if db_version < 8 and compiler:
        node["compiler"] = {"name": compiler[0], "version": compiler[1]}
    node["namespace"] = "builtin"
    node["parameters"] = parameters(spec.variants, db_version, list_variants)
    node["package_hash"] = package_hash(spec.package, spec.version)
    if edges:
        node["dependencies"] = sorted((edge(*e) for e in edges), key=lambda e: (e["name"], e["hash"]))
    if db_version >= 8:
        node["annotations"] = {"original_specfile_version": 5}
    node["hash"] = spec.hash
    return node


def external_node(external):
    """An external as Spack records it; a compiler's also names its executables."""
    node = {
        "name": external.name,
        "version": external.version,
        "arch": {"platform": external.platform, "platform_os": external.os, "target": external.target},
        "namespace": "builtin",
        "parameters": {"build_system": "generic"} | {flag: [] for flag in FLAG_PARAMETERS},
        "external": {"path": "/usr", "module": None, "extra_attributes": {}},
        "package_hash": package_hash(external.name, external.version),
        "annotations": {"original_specfile_version": 5},
        "hash": external.hash,
    }
    executables = compiler_executables(external.name)
    if executables:
        compilers = dict(zip(("c", "cxx", "fortran"), (f"/usr/bin/{e}" for e in executables if e), strict=False))
        node["parameters"]["languages"] = ["c", "c++", "fortran"][: len(compilers)]
        node["external"]["extra_attributes"]["compilers"] = compilers
    return node


def compiler_executables(name):
    """(c, c++, fortran) executables of a compiler package (None where it has none); () for a non-compiler."""
    if name in COMPILER_EXECUTABLES:
        return COMPILER_EXECUTABLES[name]
    if name == "gcc":
        return ("gcc", "g++", "gfortran")
    return ()


# --- indexes and mirrors -----------------------------------------------------------------------------------------


@dataclass
class Record:
    node: bytes  # the spec node as JSON
    dependencies: tuple  # hashes it depends on
    external: bool


def tag_records(binaries, db_version, list_variants, dependencies_of):
    """{hash: Record} of the tag's binaries and of everything they depend on, transitively.

    dependencies_of(spec) gives a Spec's edges, (Spec or External, deptypes, virtuals).
    """
    records, pending = {}, [spec for spec, _ in binaries]
    while pending:
        spec = pending.pop()
        if spec.hash in records:
            continue
        if isinstance(spec, External):
            records[spec.hash] = Record(orjson.dumps(external_node(spec)), (), True)
            continue
        edges = dependencies_of(spec)
        node = spec_node(spec, db_version, list_variants, edges)
        records[spec.hash] = Record(orjson.dumps(node), tuple(d.hash for d, _, _ in edges), False)
        pending.extend(d for d, _, _ in edges if d.hash not in records)
    return records


def index_document(db_version, binary_hashes, records):
    """The index of a mirror holding these binaries: their records and those of all they depend on, the
    others with in_buildcache false."""
    binaries = set(binary_hashes)
    listed, pending = dict.fromkeys(binary_hashes), list(binary_hashes)
    while pending:
        for dependency in records[pending.pop()].dependencies:
            if dependency not in listed:
                listed[dependency] = None
                pending.append(dependency)
    references = Counter(dependency for spec_hash in listed for dependency in records[spec_hash].dependencies)
    externals = sorted(h for h in listed if records[h].external)
    entries = [
        b'"%s":{"spec":%s,"ref_count":%d,"in_buildcache":%s}'
        % (h.encode(), records[h].node, references[h], b"true" if h in binaries else b"false")
        for h in externals + [h for h in listed if not records[h].external]
    ]
    return b'{"database":{"version":"%d","installs":{' % db_version + b",".join(entries) + b"}}}"


def write_tag_mirrors(mirror, tag, stacks, db_version, layout, binaries, list_variants, dependencies_of):
    """Write the root mirror (at `mirror`) and one per stack of `stacks` under it; returns the bytes written.

    binaries: [(Spec, its stacks in this tag)].
    """
    records = tag_records(binaries, db_version, list_variants, dependencies_of)
    members = {label: [] for label in stacks}
    for spec, spec_stacks in binaries:
        for label in spec_stacks:
            members[label].append(spec.hash)
    written = 0
    for label in stacks:
        document = index_document(db_version, members[label], records)
        folder = mirror if label == "root" else mirror / label
        if layout == "v2":
            written += write_v2_index(folder, document)
        else:
            gzipped = label != "root" and unit_interval(f"gzip|{tag}|{label}") < GZIP_SHARE
            written += write_v3_index(folder, document, db_version, gzipped)
    return written


def unit_interval(seed):
    digest = hashlib.blake2b(f"{SEED}|{seed}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def write_v2_index(mirror, document):
    folder = mirror / "build_cache"
    folder.mkdir(parents=True)
    (folder / "index.json").write_bytes(document)
    (folder / "index.json.hash").write_text(hashlib.sha256(document).hexdigest())
    return len(document)


def write_v3_index(mirror, document, db_version, gzipped):
    """The blob, its manifest (checksum and length of the stored bytes) and layout.json."""
    stored = gzip.compress(document, compresslevel=6, mtime=0) if gzipped else document
    checksum = hashlib.sha256(stored).hexdigest()
    blob = mirror / "blobs" / "sha256" / checksum[:2] / checksum
    blob.parent.mkdir(parents=True)
    blob.write_bytes(stored)
    entry = {
        "contentLength": len(stored),
        "mediaType": f"application/vnd.spack.db.v{db_version}+json",
        "compression": "gzip" if gzipped else "none",
        "checksumAlgorithm": "sha256",
        "checksum": checksum,
    }
    manifests = mirror / "v3" / "manifests" / "index"
    manifests.mkdir(parents=True)
    (manifests / "index.manifest.json").write_text(
        json.dumps({"version": 3, "data": [entry]}, indent=0, separators=(",", ":"))
    )
    (mirror / "v3" / "layout.json").write_text(json.dumps(LAYOUT_FILE))
    return len(stored)


# --- cache_spack_io_index.json -------------------------------------------------------------------------------------


def write_cache_index(out):
    """OUT/cache_spack_io_index.json for every tag under OUT/mirrors/, so that adding a tag keeps it whole."""
    index = {}
    for tag_mirror in sorted(p for p in (out / "mirrors").iterdir() if p.is_dir()):
        stacks = sorted(p for p in tag_mirror.iterdir() if is_mirror(p))
        index[tag_mirror.name] = [{"label": "root", "url": index_url(out, tag_mirror)}] + [
            {"label": stack.name, "url": index_url(out, stack)} for stack in stacks
        ]
    (out / "cache_spack_io_index.json").write_text(json.dumps(index))


def is_mirror(folder):
    return (folder / "v3" / "layout.json").is_file() or (folder / "build_cache" / "index.json").is_file()


def index_url(out, mirror):
    """Where the live file would point for this mirror, relative to OUT."""
    if (mirror / "build_cache" / "index.json").is_file():
        return (mirror / "build_cache" / "index.json").relative_to(out).as_posix()
    manifest = json.loads((mirror / "v3" / "manifests" / "index" / "index.manifest.json").read_text())
    entry = next(e for e in manifest["data"] if e["mediaType"].startswith("application/vnd.spack.db"))
    if entry["compression"] != "none":
        return mirror.relative_to(out).as_posix()
    checksum = entry["checksum"]
    return (mirror / "blobs" / entry["checksumAlgorithm"] / checksum[:2] / checksum).relative_to(out).as_posix()
