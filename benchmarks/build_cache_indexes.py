"""Write the build-cache indexes behind a synthetic tag's pages, as Spack and binaries.spack.io lay them out.

generate_corpus.py calls write_tag_mirrors once per tag and write_cache_index once at the end. A tag gets
its root mirror OUT/mirrors/<tag>/ and one mirror per stack OUT/mirrors/<tag>/<stack>/, each with the index
of its binaries in Spack's Database JSON, written compactly as Spack writes it. The records follow the
rules the builder's index reader implements, so that a tag built from its indexes gives the same binaries
as a build of its pages:

- DB 7 for tags whose pages use the older spellings (`gcc@=11.4.0`, `libs=shared,static`): nodes carry
  `compiler {name, version}`. DB 8 for the 2025 spellings: the compiler is an external record that is
  not a binary (`in_buildcache: false`), reached by a `build` edge with virtuals `c` and `cxx`; a binary
  with compiler `none` has no such edge.
- `parameters` gives the page's variants back, in the page's order: `+x`/`~x` as booleans, `name:=v1,v2`
  as a sorted list (DB 8), multi-valued `name=v1,v2` as a list in page order (DB 7) or as one string
  (DB 8), patches as full 64-character sha256 values whose first 7 characters are the page's; then the
  six compiler-flag lists, empty.
- Every binary depends on a handful of binaries of earlier packages (link, run and build edges), only
  on binaries of the same tag whose stacks include all of its own, so a stack's index lists every
  dependency of its binaries as a binary of that stack too. A hash's record is the same in every index
  and every tag that lists it (see choose_dependencies).

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
from bisect import bisect_left
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import cache
from itertools import accumulate
from random import Random

import archspec.cpu
import orjson

SEED = "spack-cache-db-benchmark-1|indexes"

FLAG_PARAMETERS = ("cflags", "cppflags", "cxxflags", "fflags", "ldflags", "ldlibs")
DEPENDENCY_COUNTS = (0, 1, 2, 3, 4, 5, 6, 8)
DEPENDENCY_COUNT_CUMULATIVE = tuple(accumulate((10, 12, 15, 16, 15, 13, 10, 9)))
DEPTYPES = (("build", "link"), ("build", "link", "run"), ("link",), ("build",), ("run",), ("build", "run"))
DEPTYPE_CUMULATIVE = tuple(accumulate((50, 18, 10, 12, 8, 2)))
VIRTUALS = (("mpi",), ("blas", "lapack"), ("pkgconfig",), ("zlib-api",), ("yacc",), ("tbb",))
VIRTUAL_SHARE = 0.15  # edges through which a dependency provides a virtual package
COMPILER_VIRTUALS = ["c", "cxx"]
COMPILER_EXECUTABLES = {
    "apple-clang": ("clang", "clang++", None),
    "cce": ("craycc", "crayCC", "crayftn"),
    "intel-oneapi-compilers": ("icx", "icpx", "ifx"),
}
GZIP_SHARE = 0.5  # of the stack indexes of a v3 tag
LAYOUT_FILE = {"signing": "gpg"}


@dataclass
class Binary:
    """One spec of a page, with what its index record needs beyond the page."""

    package: str
    package_order: int  # the package's place in the generator's sequence: dependencies point to earlier ones
    spec: dict  # as the page lists it
    # The tags that list this same hash, when they can be named (just this tag for most binaries); None
    # for builds shared with snapshots that cannot be enumerated, which therefore depend on no binary.
    presence: frozenset | None


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


def binary_node(binary, db_version, list_variants, edges):
    spec = binary.spec
    version = spec["versions"][0]
    node = {
        "name": binary.package,
        "version": version,
        "arch": {"platform": spec["platform"], "platform_os": spec["os"], "target": target_node(spec["target"])},
    }
    compiler = parse_compiler(spec["compiler"])
    if db_version < 8 and compiler:
        node["compiler"] = {"name": compiler[0], "version": compiler[1]}
    node["namespace"] = "builtin"
    node["parameters"] = parameters(spec["variants"], db_version, list_variants)
    node["package_hash"] = package_hash(binary.package, version)
    if edges:
        node["dependencies"] = sorted(edges, key=lambda edge: (edge["name"], edge["hash"]))
    if db_version >= 8:
        node["annotations"] = {"original_specfile_version": 5}
    node["hash"] = spec["hash"]
    return node


@cache
def compiler_record(name, version, platform, os_name, target):
    """(name, hash, JSON) of an external compiler as DB 8 records it: a dependency target, not a binary."""
    node = compiler_node(name, version, platform, os_name, target)
    return node["name"], node["hash"], orjson.dumps(node)


def compiler_node(name, version, platform, os_name, target):
    family = archspec.cpu.TARGETS[target].family.name
    c, cxx, fortran = COMPILER_EXECUTABLES.get(name, (name, "g++" if name == "gcc" else f"{name}++", "gfortran"))
    compilers = {"c": f"/usr/bin/{c}", "cxx": f"/usr/bin/{cxx}"}
    if fortran:
        compilers["fortran"] = f"/usr/bin/{fortran}"
    return {
        "name": name,
        "version": version,
        "arch": {"platform": platform, "platform_os": os_name, "target": family},
        "namespace": "builtin",
        "parameters": {"build_system": "generic", "languages": ["c", "c++", "fortran"][: len(compilers)]}
        | {flag: [] for flag in FLAG_PARAMETERS},
        "external": {"path": "/usr", "module": None, "extra_attributes": {"compilers": compilers}},
        "package_hash": package_hash(name, version),
        "annotations": {"original_specfile_version": 5},
        "hash": dag_hash(f"compiler|{name}@{version}|{platform}|{os_name}|{family}"),
    }


# --- dependencies ------------------------------------------------------------------------------------------------


def choose_dependencies(binaries):
    """{hash: [(dependency, deptypes, virtuals)]} for the binaries of one tag.

    A binary depends only on binaries of earlier packages (so there is no cycle) whose stacks include
    all of its own. A hash that other tags list too (a release build taken over by the next point
    release) must have the same dependencies there: it picks them, with a generator seeded by its hash,
    only among binaries that every one of those tags lists with the same stacks. Grouped by (stacks,
    presence), those candidates come in the same order in each such tag, so the picks agree.
    """
    groups = defaultdict(list)
    for binary in binaries:
        groups[(frozenset(binary.spec["stacks"]), binary.presence)].append(binary)
    keys = sorted(groups, key=lambda key: (sorted(key[0]), sorted(key[1] or ())))
    for key in keys:
        groups[key].sort(key=lambda b: (b.package_order, b.spec["hash"]))
    orders = {key: [b.package_order for b in groups[key]] for key in keys}
    eligible_groups = {}
    chosen = {}
    for binary in binaries:
        if binary.presence is None:
            chosen[binary.spec["hash"]] = []
            continue
        shared = binary.presence if len(binary.presence) > 1 else None
        wanted = (frozenset(binary.spec["stacks"]), shared)
        if wanted not in eligible_groups:
            eligible_groups[wanted] = [
                key
                for key in keys
                if key[0] >= wanted[0] and (shared is None or (key[1] is not None and key[1] >= shared))
            ]
        chosen[binary.spec["hash"]] = pick_dependencies(binary, eligible_groups[wanted], groups, orders)
    return chosen


def pick_dependencies(binary, eligible, groups, orders):
    rng = Random(f"{SEED}|dependencies|{binary.spec['hash']}")
    wanted = rng.choices(DEPENDENCY_COUNTS, cum_weights=DEPENDENCY_COUNT_CUMULATIVE)[0]
    sizes = [bisect_left(orders[key], binary.package_order) for key in eligible]
    total = sum(sizes)
    edges, packages = [], set()
    for _ in range(3 * wanted if total else 0):
        if len(edges) == wanted:
            break
        position = rng.randrange(total)
        for key, size in zip(eligible, sizes, strict=True):
            if position < size:
                dependency = groups[key][position]
                break
            position -= size
        deptypes = rng.choices(DEPTYPES, cum_weights=DEPTYPE_CUMULATIVE)[0]
        virtuals = rng.choice(VIRTUALS) if rng.random() < VIRTUAL_SHARE else ()
        if dependency.package not in packages:
            packages.add(dependency.package)
            edges.append((dependency, deptypes, virtuals))
    return edges


# --- indexes and mirrors -----------------------------------------------------------------------------------------


@dataclass
class Record:
    node: bytes  # the spec node as JSON
    dependencies: tuple  # hashes it depends on
    in_buildcache: bool


def tag_records(binaries, db_version, list_variants):
    """{hash: Record} of every binary of the tag, and of every compiler its binaries name (DB 8)."""
    dependencies = choose_dependencies(binaries)
    records = {}
    for binary in binaries:
        edges = [
            {
                "name": dependency.package,
                "hash": dependency.spec["hash"],
                "parameters": {"deptypes": list(deptypes), "virtuals": list(virtuals)},
            }
            for dependency, deptypes, virtuals in dependencies[binary.spec["hash"]]
        ]
        compiler = parse_compiler(binary.spec["compiler"])
        if db_version >= 8 and compiler:
            spec = binary.spec
            name, compiler_hash, node = compiler_record(*compiler, spec["platform"], spec["os"], spec["target"])
            records.setdefault(compiler_hash, Record(node, (), False))
            edges.append(
                {
                    "name": name,
                    "hash": compiler_hash,
                    "parameters": {"deptypes": ["build"], "virtuals": COMPILER_VIRTUALS},
                }
            )
        node = binary_node(binary, db_version, list_variants, edges)
        records[binary.spec["hash"]] = Record(orjson.dumps(node), tuple(edge["hash"] for edge in edges), True)
    return records


def index_document(db_version, binary_hashes, records):
    """The index of a mirror holding these binaries: their records and those of what they depend on."""
    listed = dict.fromkeys(binary_hashes)
    for spec_hash in binary_hashes:
        listed.update(dict.fromkeys(records[spec_hash].dependencies))
    references = Counter(dependency for spec_hash in listed for dependency in records[spec_hash].dependencies)
    externals = sorted(h for h in listed if not records[h].in_buildcache)
    entries = [
        b'"%s":{"spec":%s,"ref_count":%d,"in_buildcache":%s}'
        % (h.encode(), records[h].node, references[h], b"true" if records[h].in_buildcache else b"false")
        for h in externals + [h for h in listed if records[h].in_buildcache]
    ]
    return b'{"database":{"version":"%d","installs":{' % db_version + b",".join(entries) + b"}}}"


def write_tag_mirrors(mirror, tag, stacks, db_version, layout, binaries, list_variants):
    """Write the root mirror (at `mirror`) and one per stack of `stacks` under it; returns the bytes written."""
    records = tag_records(binaries, db_version, list_variants)
    members = {label: [] for label in stacks}
    for binary in binaries:
        for label in binary.spec["stacks"]:
            members[label].append(binary.spec["hash"])
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
