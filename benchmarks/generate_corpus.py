"""Generate a synthetic history of cache.spack.io pages, and the build-cache indexes behind them, for benchmarks.

Writes OUT/_cache/<tag>/<package>/specs.md and OUT/_data/tags.yaml in the form the real site uses and,
unless --no-indexes, each tag's mirrors with their indexes under OUT/mirrors/<tag>/ and
OUT/cache_spack_io_index.json, as build_cache_indexes.py describes. Every page is a pure function of its
shape, tag and package name, and every index record of its hash, so a tag generated alone with --only-tag
is consistent with a corpus generated earlier in the same shape.

    python benchmarks/generate_corpus.py OUT --size small|full|history [--shape usual|spread] [--tags N]
                                         [--packages M] [--only-tag TAG] [--no-indexes]

Shapes: `usual` builds each configuration in one CI group's environment and lists it in one to three of
that group's stacks; `spread` builds each configuration in one of some 700 os x target x compiler
combinations and lists each binary in a random subset of its tag's stacks, so that a tag's binaries spread
over many distinct (os, target, compiler, stacks) combinations.
"""

import argparse
import base64
import hashlib
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache, lru_cache
from itertools import accumulate
from pathlib import Path
from random import Random

from build_cache_indexes import (
    External,
    Spec,
    compiler_executables,
    parse_compiler,
    target_family,
    write_cache_index,
    write_tag_mirrors,
)

SEED = "spack-cache-db-benchmark-1"

# --tags N takes the first N of TAGS. The first 20, the full corpus, are ordered so that every prefix mixes
# the page formats; the history adds the archive's other releases and weekly snapshots, 100 tags in all.
FULL_TAGS = (
    "develop",
    "v0.23.1",
    "v0.23.0",
    "develop-2025-04-27",
    "develop-2025-04-20",
    "develop-2024-03-17",
    "v0.22.0",
    "v0.21.2",
    "develop-2025-05-11",
    "develop-2025-05-04",
    "develop-2025-04-13",
    "develop-2025-04-06",
    "develop-2025-03-30",
    "develop-2025-03-23",
    "develop-2024-12-15",
    "develop-2024-09-15",
    "develop-2024-06-09",
    "develop-2024-03-10",
    "develop-2024-03-03",
    "develop-2024-02-25",
)
HISTORY_RELEASES = (
    "v2025.07.0", "v0.23.1", "v0.23.0", "v0.22.2", "v0.22.1", "v0.22.0", "v0.21.2", "v0.21.1", "v0.21.0",
    "v0.20.3", "v0.20.2", "v0.20.1", "v0.20.0", "v0.19.2", "v0.19.1", "v0.19.0", "v0.18.1", "v0.18.0",
)  # fmt: skip
LAST_SNAPSHOT = date(2025, 7, 13)  # the archive's last weekly snapshot
HISTORY_SNAPSHOTS = 81
EXTRA_TAG = "develop-2025-07-20"  # newer than every tag of every size: what a benchmark adds to a corpus


def history_tags():
    """The full corpus's tags, then the others of the history: a release after every five snapshots."""
    snapshots = [f"develop-{LAST_SNAPSHOT - timedelta(weeks=week)}" for week in range(HISTORY_SNAPSHOTS)]
    rest_snapshots = [name for name in snapshots if name not in FULL_TAGS]
    rest_releases = [name for name in HISTORY_RELEASES if name not in FULL_TAGS]
    mixed = []
    while rest_snapshots or rest_releases:
        mixed += rest_snapshots[:5] + rest_releases[:1]
        rest_snapshots, rest_releases = rest_snapshots[5:], rest_releases[1:]
    tags = FULL_TAGS + tuple(mixed)
    assert len(set(tags)) == len(tags) == 1 + len(HISTORY_RELEASES) + HISTORY_SNAPSHOTS, "FULL_TAGS outside history"
    return tags


TAGS = history_tags()
SIZES = {"small": (3, 20), "full": (20, 900), "history": (100, 900)}  # (first tags, packages)

DEVELOP_DATE = date(2025, 6, 8)
RELEASE_DATES = {
    "v0.18.0": date(2022, 5, 28),
    "v0.18.1": date(2022, 7, 19),
    "v0.19.0": date(2022, 11, 11),
    "v0.19.1": date(2023, 2, 7),
    "v0.19.2": date(2023, 4, 3),
    "v0.20.0": date(2023, 5, 21),
    "v0.20.1": date(2023, 7, 10),
    "v0.20.2": date(2023, 10, 2),
    "v0.20.3": date(2023, 10, 31),
    "v0.21.0": date(2023, 11, 11),
    "v0.21.1": date(2024, 1, 12),
    "v0.21.2": date(2024, 2, 29),
    "v0.22.0": date(2024, 5, 12),
    "v0.22.1": date(2024, 7, 4),
    "v0.22.2": date(2024, 9, 21),
    "v0.23.0": date(2024, 11, 13),
    "v0.23.1": date(2025, 2, 19),
    "v1.0.0": date(2025, 7, 20),
    "v2025.07.0": date(2025, 7, 20),  # since Spack 1.0, releases carry the package repository's calendar version
}

# When the site's page writer changed, judged from real pages.
SORTED_KEYS_SINCE = date(2025, 1, 1)  # v0.23.1 is the first tag written with sorted keys
NO_TARBALL_SINCE = date(2025, 3, 1)  # develop-2025-03-23 has no tarball; v0.23.1 still has one
SPELLING_2025_SINCE = date(2025, 3, 30)  # gcc@=11.4.0 -> gcc@11.4.0 between the 03-23 and 03-30 snapshots
# How Spack wrote the tag's indexes: DB 8 with the 2025 spellings (DB 7 before), and layout v3 a little later.
V3_LAYOUT_SINCE = date(2025, 4, 13)

MEDIAN_SPECS_PER_PAGE = 28
SPECS_PER_PAGE_SIGMA = 1.2
MAX_SPECS_PER_PAGE = 3000
CORE_PACKAGE_SHARE = 0.01  # dependencies of nearly everything (zlib, cmake, python): pages of thousands of specs
CORE_PACKAGE_FACTOR = 12
RELEASE_HASH_REUSE = 0.74  # share of a point release's builds taken over from the previous one
STABLE_BUILD_SHARE = 0.03  # builds that snapshots of the same quarter do not redo

NEW_COMPILER_NAMES = {"oneapi": "intel-oneapi-compilers"}


@dataclass(frozen=True)
class Env:
    """Where a CI stack builds: one platform, os and compiler, one or more targets."""

    platform: str
    os: str
    targets: tuple
    compiler: str
    compiler_version: str


@dataclass(frozen=True)
class Group:
    """Stacks that build in the same environment and so can share one binary."""

    stacks: tuple  # most used first
    envs: tuple  # (since, Env), oldest first
    weight: float  # how often a package is built by this group


GROUPS = {
    "e4s": Group(
        ("e4s", "e4s-rocm-external", "radiuss", "tutorial", "hep", "developer-tools", "build_systems"),
        ((None, Env("linux", "ubuntu22.04", ("x86_64_v3",), "gcc", "11.4.0")),),
        0.9,
    ),
    "e4s-oneapi": Group(
        ("e4s-oneapi",),
        (
            (None, Env("linux", "ubuntu20.04", ("x86_64_v3",), "oneapi", "2023.2.0")),
            (date(2024, 1, 1), Env("linux", "ubuntu22.04", ("x86_64_v3",), "oneapi", "2024.0.0")),
            (date(2024, 9, 1), Env("linux", "ubuntu22.04", ("x86_64_v3",), "oneapi", "2024.2.1")),
            (date(2025, 4, 1), Env("linux", "ubuntu22.04", ("x86_64_v3",), "oneapi", "2025.1.0")),
        ),
        0.4,
    ),
    "e4s-neoverse_v1": Group(
        ("e4s-neoverse_v1",), ((None, Env("linux", "ubuntu22.04", ("neoverse_v1",), "gcc", "11.4.0")),), 0.35
    ),
    "e4s-neoverse-v2": Group(
        ("e4s-neoverse-v2",), ((None, Env("linux", "ubuntu22.04", ("neoverse_v2",), "gcc", "11.4.0")),), 0.3
    ),
    "e4s-power": Group(("e4s-power",), ((None, Env("linux", "ubuntu20.04", ("ppc64le",), "gcc", "9.4.0")),), 0.3),
    "e4s-cray-rhel": Group(
        ("e4s-cray-rhel",),
        (
            (None, Env("linux", "rhel8", ("zen4",), "cce", "15.0.1")),
            (date(2025, 3, 1), Env("linux", "rhel8", ("x86_64_v3",), "cce", "18.0.0")),
        ),
        0.2,
    ),
    "e4s-cray-sles": Group(
        ("e4s-cray-sles",), ((None, Env("linux", "sle_hpc15", ("x86_64_v4",), "gcc", "10.3.0")),), 0.1
    ),
    "data-vis-sdk": Group(
        ("data-vis-sdk",), ((None, Env("linux", "ubuntu20.04", ("x86_64_v3",), "gcc", "11.1.0")),), 0.15
    ),
    "amzn2-x86_64": Group(
        ("radiuss-aws", "aws-isc"), ((None, Env("linux", "amzn2", ("x86_64_v3",), "gcc", "7.3.1")),), 0.2
    ),
    "amzn2-aarch64": Group(
        ("radiuss-aws-aarch64", "aws-isc-aarch64"),
        ((None, Env("linux", "amzn2", ("aarch64", "neoverse_n1"), "gcc", "7.3.1")),),
        0.2,
    ),
    "ml-x86_64": Group(
        ("ml-linux-x86_64-cpu", "ml-linux-x86_64-cuda", "ml-linux-x86_64-rocm"),
        (
            (None, Env("linux", "ubuntu22.04", ("x86_64_v3",), "gcc", "11.4.0")),
            (date(2024, 10, 1), Env("linux", "ubuntu24.04", ("x86_64_v3",), "gcc", "13.2.0")),
        ),
        0.2,
    ),
    "ml-aarch64": Group(
        ("ml-linux-aarch64-cpu", "ml-linux-aarch64-cuda"),
        ((None, Env("linux", "ubuntu24.04", ("aarch64",), "gcc", "13.2.0")),),
        0.15,
    ),
    "ml-darwin": Group(
        ("ml-darwin-aarch64-mps",),
        (
            (None, Env("darwin", "ventura", ("aarch64",), "apple-clang", "14.0.3")),
            (date(2024, 6, 1), Env("darwin", "sonoma", ("aarch64",), "apple-clang", "15.0.0")),
            (date(2025, 1, 1), Env("darwin", "sequoia", ("aarch64",), "apple-clang", "16.0.0")),
        ),
        0.15,
    ),
    "aws-pcluster-x86_64": Group(
        ("aws-pcluster-x86_64_v4",),
        ((None, Env("linux", "amzn2", ("x86_64_v3", "x86_64_v4"), "oneapi", "2024.1.0")),),
        0.1,
    ),
    "aws-pcluster-neoverse_v1": Group(
        ("aws-pcluster-neoverse_v1",), ((None, Env("linux", "amzn2", ("neoverse_v1",), "gcc", "12.4.0")),), 0.1
    ),
}
ML_GROUPS = ("ml-x86_64", "ml-aarch64", "ml-darwin")

# (first day, day after the last) a stack appears in a tag; stacks not listed are always there.
STACK_WINDOWS = {
    "aws-isc": (None, date(2024, 4, 1)),
    "aws-isc-aarch64": (None, date(2024, 4, 1)),
    "e4s-cray-sles": (None, date(2024, 9, 1)),
    "e4s-power": (None, date(2025, 3, 1)),
    "developer-tools": (date(2023, 12, 1), None),
    "e4s-neoverse-v2": (date(2024, 2, 1), None),
    "hep": (date(2024, 6, 1), None),
    "ml-linux-aarch64-cpu": (date(2024, 10, 1), None),
    "ml-linux-aarch64-cuda": (date(2024, 10, 1), None),
    "aws-pcluster-x86_64_v4": (date(2025, 3, 1), None),
    "aws-pcluster-neoverse_v1": (date(2025, 3, 1), None),
}

BOOL_VARIANTS = (
    "mpi", "shared", "static", "cuda", "rocm", "openmp", "fortran", "cxx", "threads", "pic", "hl", "java",
    "tools", "debug", "python", "examples", "docs", "tests", "lto", "zlib", "bzip2", "szip", "xpmem", "verbs",
    "slurm", "hwloc", "libxml2", "romio", "hydra", "pci", "vci", "level_zero", "argobots", "wrapperrpath", "map",
    "subfiling", "threadsafe", "int64", "complex", "blas", "lapack", "metis", "parmetis", "hdf5", "netcdf",
    "kokkos", "raja", "umpire", "caliper", "adios2", "vtk", "opengl", "ssl", "curl", "nls", "readline", "jit",
)  # fmt: skip
SINGLE_VARIANTS = {
    "api": ("default", "v110", "v112", "v114"),
    "netmod": ("ofi", "ucx", "tcp"),
    "pmi": ("default", "pmi2", "pmix"),
    "device": ("ch4", "ch3"),
    "datatype-engine": ("auto", "dataloop", "yaksa"),
    "cxxstd": ("17", "14", "20", "11"),
    "precision": ("double", "single"),
    "backend": ("cpu", "cuda", "rocm"),
    "default_library": ("shared", "static", "both"),
}
MULTI_VARIANTS = {
    "libs": ("shared", "static"),
    "fabrics": ("ofi", "psm2", "ucx", "verbs"),
    "languages": ("c", "c++", "fortran"),
    "schedulers": ("slurm", "pbs", "lsf"),
    "cuda_arch": ("80", "70", "90"),
    "amdgpu_target": ("gfx90a", "gfx942", "gfx908"),
}
EXACT_VARIANTS = ("amdgpu_target", "patches")  # spelled name:=value since spring 2025
LIST_VARIANTS = frozenset(MULTI_VARIANTS) | {"patches"}  # multi-valued: lists in an index's parameters
CMAKE_VARIANTS = (
    ("build_type", ("build_type=Release", "build_type=RelWithDebInfo", "build_type=Debug")),
    ("generator", ("generator=make", "generator=ninja")),
    ("ipo", ("~ipo", "+ipo")),
)


@dataclass(frozen=True)
class Style:
    """How the site wrote a tag's pages."""

    sorted_keys: bool  # JSON keys, stacks and num_specs_by_stack sorted; else hash first, stacks as they came
    tarball: bool  # each spec has a tarball URL and spec_details follow the build-cache folders, not the hash
    spelling_2025: bool  # gcc@11.4.0, intel-oneapi-compilers, name:=value and compiler "none"


@dataclass(frozen=True)
class Tag:
    name: str
    release: tuple | None  # (major, minor, patch)
    written: date  # decides the page style
    built: date  # decides what is built: a point release keeps its series' packages and environments
    style: Style


@dataclass(frozen=True)
class Variant:
    name: str
    spellings: tuple  # (before 2025, since 2025): each a tuple of values, the default first


@dataclass
class Package:
    name: str
    base_specs: float
    groups: tuple
    pure_python: bool
    versions: tuple
    version_origin: int  # date ordinal of versions[0]
    version_cadence: int  # days between versions
    branch: str | None  # a branch version such as 'develop', built with a commit= variant
    variants: tuple  # sorted by name
    p_default: float
    patches: Variant | None  # patches applied to some of its builds
    configs: list  # Config by index, drawn on first use
    variant_lists: dict  # (config index, spelling_2025, commit) -> variant list


@dataclass(frozen=True)
class Config:
    """One configuration a package is built in, as drawn once for every tag."""

    group_index: int
    stack_pick: float
    extra_stacks: int
    target_pick: float
    version_slot: int
    on_branch: bool
    choices: tuple  # per Variant: index into its values
    patched: bool
    stable: bool


SNAPSHOT = re.compile(r"develop-(\d{4}-\d{2}-\d{2})")
RELEASE = re.compile(r"v(\d+)\.(\d+)\.(\d+)")


@cache
def tag_from_name(name):
    if name == "develop":
        return Tag(name, None, DEVELOP_DATE, DEVELOP_DATE, style_on(DEVELOP_DATE))
    if match := SNAPSHOT.fullmatch(name):
        day = date.fromisoformat(match.group(1))
        return Tag(name, None, day, day, style_on(day))
    match = RELEASE.fullmatch(name)
    if not match:
        raise ValueError(f"{name}: expected develop, develop-YYYY-MM-DD or vX.Y.Z")
    release = tuple(int(part) for part in match.groups())
    series_start = name.rsplit(".", 1)[0] + ".0"  # v2025.07.0 keeps its month's zero
    if name not in RELEASE_DATES or series_start not in RELEASE_DATES:
        raise ValueError(f"{name}: release dates are known for {', '.join(RELEASE_DATES)} only")
    written = RELEASE_DATES[name]
    return Tag(name, release, written, RELEASE_DATES[series_start], style_on(written))


def index_format(tag):
    """(Database version, layout) of the tag's indexes."""
    return (8 if tag.style.spelling_2025 else 7), ("v3" if tag.written >= V3_LAYOUT_SINCE else "v2")


def style_on(day):
    return Style(
        sorted_keys=day >= SORTED_KEYS_SINCE,
        tarball=day < NO_TARBALL_SINCE,
        spelling_2025=day >= SPELLING_2025_SINCE,
    )


def tag_order_key(tag):
    """develop, then releases newest first, then snapshots newest first (the order tags.yaml uses)."""
    if tag.name == "develop":
        return (0, 0)
    if tag.release:
        return (1, tuple(-part for part in tag.release))
    return (2, -tag.written.toordinal())


def stack_available(stack, day):
    first, end = STACK_WINDOWS.get(stack, (None, None))
    return (first is None or day >= first) and (end is None or day < end)


def stacks_of_tag(tag):
    stacks = {s for group in GROUPS.values() for s in group.stacks if stack_available(s, tag.built)}
    return sorted(stacks | {"root"})


def env_on(group, day):
    current = group.envs[0][1]
    for since, env in group.envs:
        if since is None or day >= since:
            current = env
    return current


def spack_hash(seed):
    """32 characters of Spack's base32 alphabet (a-z, 2-7)."""
    digest = hashlib.blake2b(seed.encode(), digest_size=20).digest()
    return base64.b32encode(digest).decode().lower()


def unit_interval(seed):
    """A number in [0, 1) fixed by the seed string, for choices that must not depend on generation order."""
    digest = hashlib.blake2b(seed.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


# --- packages -------------------------------------------------------------------------------------------------

CONSONANTS = "bcdfghjklmnprstvwxz"
VOWELS = "aeiouy"


def package_names(count):
    """The first `count` names of one fixed sequence: a smaller corpus holds a prefix of a larger one's packages."""
    rng = Random(f"{SEED}|names")
    names, seen = [], set()
    while len(names) < count:
        name = invent_package_name(rng)
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def invent_package_name(rng):
    prefix = rng.choices(("", "py-", "r-", "perl-"), weights=(68, 24, 5, 3))[0]
    stem = invent_word(rng)
    if rng.random() < 0.15:
        stem += "-" + invent_word(rng)
    if rng.random() < 0.12:
        stem += str(rng.choice((2, 3, 5, 11, 64)))
    return prefix + stem


def invent_word(rng):
    syllables = rng.choices((1, 2, 3), weights=(3, 5, 2))[0]
    word = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(syllables))
    return word + rng.choice(CONSONANTS) if rng.random() < 0.5 else word


def make_package(name):
    rng = Random(f"{SEED}|package|{name}")
    python = name.startswith("py-")
    base_specs = rng.lognormvariate(math.log(MEDIAN_SPECS_PER_PAGE), SPECS_PER_PAGE_SIGMA)
    if rng.random() < CORE_PACKAGE_SHARE:
        base_specs *= CORE_PACKAGE_FACTOR
    versions = invent_versions(rng)
    version_cadence = rng.randint(30, 400)
    return Package(
        name=name,
        base_specs=base_specs,
        groups=choose_groups(rng, python),
        pure_python=python and rng.random() < 0.5,
        versions=versions,
        # Early enough that every tag has a current version, late enough that develop has not run out of them.
        version_origin=date(2023, 11, 1).toordinal() - rng.randint(0, version_cadence * 10),
        version_cadence=version_cadence,
        branch=rng.choice(("develop", "main", "master")) if rng.random() < 0.05 else None,
        variants=variant_schema(rng, name),
        p_default=rng.uniform(0.6, 0.95),
        patches=invent_patches(rng) if rng.random() < 0.15 else None,
        configs=[],
        variant_lists={},
    )


def choose_groups(rng, python):
    if python and rng.random() < 0.6:
        groups = [g for g in ML_GROUPS if rng.random() < 0.8] + (["e4s"] if rng.random() < 0.4 else [])
        fallback = "ml-x86_64"
    else:
        groups = [name for name, group in GROUPS.items() if rng.random() < group.weight]
        fallback = "e4s"
    if not any(always_built(GROUPS[g]) for g in groups):
        groups.insert(0, fallback)  # every tag must have somewhere to build the package
    return tuple(groups)


def always_built(group):
    return any(stack not in STACK_WINDOWS for stack in group.stacks)


def invent_patches(rng):
    checksums = sorted(f"{rng.getrandbits(28):07x}" for _ in range(rng.randint(1, 2)))
    return multi_valued_variant("patches", [",".join(checksums)])


def invent_versions(rng):
    """40 ascending versions in one scheme per package."""
    scheme = rng.choices(("x.y.z", "x.y", "yyyy.mm"), weights=(7, 2, 1))[0]
    major, minor, patch = rng.randint(0, 5), rng.randint(0, 20), rng.randint(0, 9)
    year, month = 2019, rng.randint(1, 12)
    versions = []
    for _ in range(40):
        step = rng.random()
        if step < 0.05:
            major, minor, patch = major + 1, 0, 0
        elif step < 0.3 or scheme == "x.y":
            minor, patch = minor + 1, 0
        else:
            patch += 1
        month += rng.randint(1, 4)
        year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
        versions.append(
            {"x.y.z": f"{major}.{minor}.{patch}", "x.y": f"{major}.{minor}", "yyyy.mm": f"{year}.{month:02d}"}[scheme]
        )
    return tuple(versions)


def variant_schema(rng, name):
    if name.startswith("py-"):
        build_system, extra = "python_pip", 0 if rng.random() < 0.8 else rng.randint(1, 4)
    elif name.startswith(("r-", "perl-")):
        build_system, extra = ("generic" if name.startswith("r-") else "perl"), rng.randint(0, 2)
    else:
        build_system = rng.choices(("cmake", "autotools", "makefile", "meson", "generic"), weights=(45, 35, 8, 5, 7))[0]
        extra = min(int(rng.expovariate(1 / 6)), 15 if build_system == "cmake" else 18)
    variants = [Variant("build_system", ((f"build_system={build_system}",),) * 2)]
    if build_system == "cmake":
        variants += [Variant(n, (values, values)) for n, values in CMAKE_VARIANTS]
    taken = {v.name for v in variants}
    while len(variants) < 1 + extra + (3 if build_system == "cmake" else 0):
        variant = invent_variant(rng)
        if variant.name not in taken:
            taken.add(variant.name)
            variants.append(variant)
    return tuple(sorted(variants, key=lambda v: v.name))


def invent_variant(rng):
    kind = rng.choices(("bool", "single", "multi"), weights=(75, 17, 8))[0]
    if kind == "bool":
        name = rng.choice(BOOL_VARIANTS)
        values = ("+", "~") if rng.random() < 0.5 else ("~", "+")
        return Variant(name, (tuple(sign + name for sign in values),) * 2)
    if kind == "single":
        name = rng.choice(tuple(SINGLE_VARIANTS))
        values = tuple(f"{name}={value}" for value in SINGLE_VARIANTS[name])
        return Variant(name, (values, values))
    name = rng.choice(tuple(MULTI_VARIANTS))
    options = MULTI_VARIANTS[name]
    value_sets = [options[:1], *(options[i : i + 1] for i in range(1, len(options))), options[:2]]
    return multi_valued_variant(name, [",".join(sorted(values)) for values in value_sets])


def multi_valued_variant(name, values):
    operator_2025 = ":=" if name in EXACT_VARIANTS else "="
    return Variant(name, (tuple(f"{name}={v}" for v in values), tuple(f"{name}{operator_2025}{v}" for v in values)))


# --- configurations and pages -------------------------------------------------------------------------------


def config_of(package, index):
    while len(package.configs) <= index:
        package.configs.append(draw_config(package, len(package.configs)))
    return package.configs[index]


def draw_config(package, index):
    rng = Random(f"{SEED}|config|{package.name}|{index}")
    extra_stacks = rng.choices((0, 1, 2), weights=(62, 34, 4))[0]
    version_slot = rng.choices((0, 1, 2), weights=(75, 20, 5))[0]
    choices = []
    for variant in package.variants:
        count = len(variant.spellings[0])
        if count == 1 or rng.random() < package.p_default:
            choices.append(0)
        else:
            choices.append(rng.randrange(1, count))
    return Config(
        group_index=rng.randrange(len(package.groups)),
        stack_pick=rng.random(),
        extra_stacks=extra_stacks,
        target_pick=rng.random(),
        version_slot=version_slot,
        on_branch=package.branch is not None and rng.random() < 0.1,
        choices=tuple(choices),
        patched=package.patches is not None and rng.random() < 0.3,
        stable=rng.random() < STABLE_BUILD_SHARE,
    )


def variant_list(package, index, config, spelling_2025, commit):
    key = (index, spelling_2025, commit)
    if key not in package.variant_lists:
        spelled = [
            (variant.name, variant.spellings[spelling_2025][choice])
            for variant, choice in zip(package.variants, config.choices, strict=True)
        ]
        if config.patched:
            spelled.append(("patches", package.patches.spellings[spelling_2025][0]))
        if commit:
            spelled.append(("commit", f"commit={commit}"))
        package.variant_lists[key] = [text for _, text in sorted(spelled)]
    return package.variant_lists[key]


@dataclass(frozen=True)
class Build:
    """A group as it builds in one tag: environment, compiler as written, stacks present."""

    env: Env
    compiler: str
    compiler_folder: str
    stacks: tuple


def builds_in_tag(package, tag):
    """Per group index: the build that configurations drawn for that group get in this tag."""
    available = [group_build(GROUPS[name], package, tag) for name in package.groups]
    # A group with no stack in this tag hands its configurations to the next group that has one.
    return [next(b for b in available[i:] + available[:i] if b is not None) for i in range(len(available))]


def group_build(group, package, tag):
    stacks = tuple(s for s in group.stacks if stack_available(s, tag.built))
    if not stacks:
        return None
    env = env_on(group, tag.built)
    compiler = compiler_as_written(env, tag.style, package.pure_python)
    return Build(env, compiler, f"{env.compiler}-{env.compiler_version}", stacks)


def compiler_as_written(env, style, pure_python):
    if not style.spelling_2025:
        return f"{env.compiler}@={env.compiler_version}"
    if pure_python:
        return "none"
    return f"{NEW_COMPILER_NAMES.get(env.compiler, env.compiler)}@{env.compiler_version}"


def current_version_index(package, tag):
    steps = (tag.built.toordinal() - package.version_origin) // package.version_cadence
    return max(0, min(len(package.versions) - 1, steps))


def page_size(package, tag, rng):
    """Specs on the page and distinct configurations among them (develop keeps rebuilds of the same one)."""
    if tag.name == "develop":
        factor, rebuilds = 1.5, rng.uniform(1.5, 3.0)
    elif tag.release:
        factor, rebuilds = 0.8, 1.0
    else:
        factor = 1.1 if tag.built.year >= 2025 else 0.9
        rebuilds = 1.3 if rng.random() < 0.1 else 1.0
    specs = round(package.base_specs * factor * rng.lognormvariate(0, 0.1))
    specs = max(1, min(MAX_SPECS_PER_PAGE, specs))
    return specs, max(1, round(specs / rebuilds))


def build_epoch(package, index, config, rebuild, tag):
    """What makes a build distinct in time: a snapshot rebuilds everything but its stable builds."""
    if tag.release:
        return release_epoch(package.name, index, tag.release)
    if config.stable and rebuild == 0:
        return f"{tag.built.year}Q{(tag.built.month - 1) // 3 + 1}"
    return tag.name


def release_epoch(package_name, index, release):
    """The earliest point release of the series that this build is carried over from."""
    major, minor, patch = release
    while patch > 0 and unit_interval(f"{package_name}|{index}|v{major}.{minor}.{patch}") < RELEASE_HASH_REUSE:
        patch -= 1
    return f"v{major}.{minor}.{patch}"


def page_rng(package, tag):
    return Random(f"{SEED}|page|{tag.name}|{package.name}")


def build_identity(shape, package, index, rebuild, tag, builds, version_index):
    """(build, version, target, variants, hash, epoch) of the package's configuration `index` in tag."""
    config = config_of(package, index)
    build = shape.build(package, index, config, tag, builds)
    if config.on_branch:
        version = package.branch
        commit = hashlib.blake2b(f"{package.name}|{version_index}".encode(), digest_size=20).hexdigest()
    else:
        version = package.versions[max(0, version_index - config.version_slot)]
        commit = None
    target = build.env.targets[int(config.target_pick * len(build.env.targets))]
    variants = variant_list(package, index, config, tag.style.spelling_2025, commit)
    epoch = build_epoch(package, index, config, rebuild, tag)
    spec_hash = spack_hash(
        f"{SEED}|{package.name}|{index}|{version}|{build.compiler}|{build.env.platform}|{build.env.os}|{target}"
        f"|{','.join(variants)}|{epoch}|{rebuild}"
    )
    return build, version, target, variants, spec_hash, epoch


def group_stacks(stacks, config):
    """The stacks of its group a usual-shape configuration is listed in."""
    # Squaring favours the first stack of a group (e4s over tutorial), as in the real pages.
    first = int(config.stack_pick**2 * len(stacks))
    return [stacks[(first + k) % len(stacks)] for k in range(min(1 + config.extra_stacks, len(stacks)))]


def spec_stacks(chosen, style, rng):
    chosen = [*chosen, "root"]
    if style.sorted_keys:
        return sorted(chosen)
    rng.shuffle(chosen)  # the old writer listed a set
    return chosen


def spec_dict(package_name, tag, build, spec, stacks):
    env = build.env
    page_spec = {
        "hash": spec.hash,
        "compiler": spec.compiler,
        "versions": [spec.version],
        "os": spec.os,
        "platform": spec.platform,
        "target": spec.target,
        "variants": list(spec.variants),
        "stacks": stacks,
        "size": "-",
    }
    if tag.style.tarball:
        arch = f"{env.platform}-{env.os}-{spec.target}"
        folder, version = build.compiler_folder, spec.version
        page_spec["tarball"] = (
            f"https://binaries.spack.io/{tag.name}/build_cache/{arch}/{folder}/{package_name}-{version}/"
            f"{arch}-{folder}-{package_name}-{version}-{spec.hash}.spack"
        )
    return page_spec


def order_binaries(binaries, style):
    """(page spec, Spec) pairs in the page's order."""
    if style.tarball:
        # Pages that carry tarballs list specs by build-cache folder; within a folder, in no particular order.
        return sorted(binaries, key=lambda binary: binary[0]["tarball"].rsplit("/", 1)[0])
    return sorted(binaries, key=lambda binary: binary[0]["hash"])


# --- shapes -----------------------------------------------------------------------------------------------------


class UsualShape:
    """A configuration builds in its CI group's environment and is listed in one to three of its stacks."""

    name = "usual"

    def build(self, package, index, config, tag, builds):
        return builds[config.group_index]

    def stacks(self, build, config, rng):
        return group_stacks(build.stacks, config)

    def dependency_stacks(self, build, config):
        """The stacks a build's dependencies are preferably listed in too: its own (None: no preference)."""
        return frozenset(group_stacks(build.stacks, config))


# The spread shape's environments: every os of a platform with every target it runs, every compiler of
# the target's family; each configuration draws one, the first ones most often.
SPREAD_OSS = {"linux": ("ubuntu22.04", "ubuntu24.04", "rhel8", "rocky9", "ubuntu20.04", "amzn2", "sle_hpc15"),
              "darwin": ("sequoia", "sonoma", "ventura")}  # fmt: skip
SPREAD_TARGETS = {
    "linux": ("x86_64_v3", "zen4", "x86_64_v4", "neoverse_v2", "skylake_avx512", "zen3", "icelake",
              "sapphirerapids", "x86_64_v2", "neoverse_v1", "aarch64", "neoverse_n1", "power9le"),
    "darwin": ("m1", "m2", "aarch64"),
}  # fmt: skip
SPREAD_COMPILERS = {
    "x86_64": (("gcc", "13.2.0"), ("gcc", "11.4.0"), ("oneapi", "2025.1.0"), ("gcc", "12.3.0"), ("gcc", "14.2.0"),
               ("oneapi", "2024.2.1"), ("cce", "18.0.0"), ("nvhpc", "24.5"), ("gcc", "9.4.0")),
    "aarch64": (("gcc", "13.2.0"), ("gcc", "11.4.0"), ("gcc", "12.3.0"), ("nvhpc", "24.5"), ("gcc", "14.2.0")),
    "ppc64le": (("gcc", "11.4.0"), ("gcc", "9.4.0"), ("gcc", "13.2.0")),
    "darwin": (("apple-clang", "16.0.0"), ("apple-clang", "15.0.0")),
}  # fmt: skip
SPREAD_ENV_SKEW = 1.2  # the n-th most used environment is drawn 1 / n**SKEW as often as the first
SPREAD_STACK_COUNTS = ((1, 2, 3, 4, 6), (60, 22, 10, 5, 3))  # stacks a binary is listed in (besides root)
SPREAD_STACK_SKEW = 1.2


def spread_environments():
    """Every (platform, os, target, compiler) the spread shape builds in, most used first."""
    envs = []
    for platform, oss in SPREAD_OSS.items():
        for target in SPREAD_TARGETS[platform]:
            compilers = SPREAD_COMPILERS["darwin" if platform == "darwin" else target_family(target)]
            for compiler, version in compilers:
                envs += [Env(platform, os_name, (target,), compiler, version) for os_name in oss]
    # Interleave so that the most used ones mix oss, targets and compilers, not one os's targets first.
    return tuple(sorted(envs, key=lambda env: unit_interval(f"{SEED}|spread|{env}") ** 0.5 * rank_of(env)))


def rank_of(env):
    """How far down its lists an environment is: the first os, target and compiler rank highest."""
    platform_key = "darwin" if env.platform == "darwin" else target_family(env.targets[0])
    compilers = [name for name, _ in SPREAD_COMPILERS[platform_key]]
    return (
        1
        + SPREAD_OSS[env.platform].index(env.os)
        + SPREAD_TARGETS[env.platform].index(env.targets[0])
        + compilers.index(env.compiler)
        + (10 if env.platform == "darwin" else 0)
    )


SPREAD_ENVS = spread_environments()
SPREAD_ENV_WEIGHTS = tuple(accumulate(1 / (n + 1) ** SPREAD_ENV_SKEW for n in range(len(SPREAD_ENVS))))


class SpreadShape:
    """A configuration builds in one of SPREAD_ENVS; each binary is listed in a random subset of its tag's
    stacks, so that every stack has binaries of many os x target x compiler combinations."""

    name = "spread"

    def build(self, package, index, config, tag, builds):
        env = spread_env(package.name, index)
        stacks = tuple(stack for stack in stacks_of_tag(tag) if stack != "root")
        compiler = compiler_as_written(env, tag.style, package.pure_python)
        return Build(env, compiler, f"{env.compiler}-{env.compiler_version}", stacks)

    def stacks(self, build, config, rng):
        count = rng.choices(*SPREAD_STACK_COUNTS)[0]
        weights = [1 / (n + 1) ** SPREAD_STACK_SKEW for n in range(len(build.stacks))]
        chosen = []
        while len(chosen) < min(count, len(build.stacks)):
            stack = rng.choices(build.stacks, weights)[0]
            if stack not in chosen:
                chosen.append(stack)
        return chosen

    def dependency_stacks(self, build, config):
        return None  # a binary's stacks are drawn per page: no stack set to keep dependencies in


@cache
def spread_env(package_name, index):
    rng = Random(f"{SEED}|spread|{package_name}|{index}")
    return rng.choices(SPREAD_ENVS, cum_weights=SPREAD_ENV_WEIGHTS)[0]


SHAPES = {shape.name: shape for shape in (UsualShape(), SpreadShape())}


# --- dependencies ------------------------------------------------------------------------------------------------

# Packages are layered: the first FOUNDATION ones one per level (each may build on any before it), the
# others in levels that double in width. A package depends only on packages of lower levels, so there
# is no cycle and chains run about FOUNDATION + 5 deep. A few of the first packages have roles that
# make them depended on by most binaries, as gcc-runtime, zlib, cmake, an MPI and pkgconf are.
FOUNDATION = 16
LEVEL_WIDTH = 40  # packages of the first level above the foundation
RUNTIME, COMPRESSION, BUILD_TOOL, MPI_PROVIDER, PKG_CONFIG = range(5)  # package orders
COMPRESSION_SHARE = 0.5
MPI_SHARE = 0.1  # builds without +mpi that still depend on an MPI
PKG_CONFIG_SHARE = 0.7  # of autotools and meson builds
PERL = ("perl", "5.38.2")  # an external that autotools and perl builds use to build
FORTRAN_SHARE = 0.4  # builds whose compiler edge also provides fortran
RANDOM_DEPENDENCIES = ((0, 1, 2, 3, 4, 5), tuple(accumulate((10, 20, 25, 20, 15, 10))))
DEPTYPES = (("build", "link"), ("link",), ("build", "link", "run"), ("build",), ("run",), ("build", "run"))
DEPTYPE_CUMULATIVE = tuple(accumulate((45, 15, 15, 12, 8, 5)))
VIRTUALS = (("blas", "lapack"), ("yacc",), ("tbb",), ("uuid",))
VIRTUAL_SHARE = 0.1
CONTEXTS_KEPT = 16  # tags whose per-package facts are kept at once (a tag and the tags it builds on)
BUILDS_KEPT = 200_000
QUARTER = re.compile(r"(\d{4})Q([1-4])")
RELEASE_NAMES = {tag_from_name(name).release: name for name in RELEASE_DATES}


def level(order):
    if order < FOUNDATION:
        return order
    found = FOUNDATION
    while level_start(found + 1) <= order:
        found += 1
    return found


def level_start(number):
    if number <= FOUNDATION:
        return number
    return FOUNDATION + LEVEL_WIDTH * (2 ** (number - FOUNDATION) - 1)


def origin_of(epoch, style):
    """The tag a build of this epoch was made in, whose builds it depends on: its own tag, the release it
    was built for, or for a build kept through a quarter, that quarter's first snapshot in its spelling."""
    if release := RELEASE.fullmatch(epoch):  # release_epoch writes v2025.7.0 for v2025.07.0
        return RELEASE_NAMES[tuple(int(part) for part in release.groups())]
    match = QUARTER.fullmatch(epoch)
    if not match:
        return epoch
    start = date(int(match[1]), 3 * int(match[2]) - 2, 1)
    if style.spelling_2025:
        start = max(start, SPELLING_2025_SINCE)
    return f"develop-{start + timedelta(days=(LAST_SNAPSHOT.weekday() - start.weekday()) % 7)}"


class Corpus:
    """The packages of a corpus in one shape: their pages in any tag, and the dependencies of any build.

    A build's dependencies are a function of its hash (its identity): they are the builds, in the tag it
    was made in (origin_of), of packages of lower levels, in its own environment and stacks where the
    package has such a build. So a hash has the same dependencies in every tag and index that has it; a
    dependency that is not a binary of a mirror is in its index all the same, not in its build cache.
    """

    def __init__(self, package_count, shape):
        self.shape = SHAPES[shape]
        self.packages = [make_package(name) for name in package_names(package_count)]
        self.facts = lru_cache(maxsize=CONTEXTS_KEPT * package_count)(self._facts)
        self.candidates = lru_cache(maxsize=CONTEXTS_KEPT * package_count)(self._candidates)
        self.built = lru_cache(maxsize=BUILDS_KEPT)(self._built)

    def _facts(self, order, tag_name):
        """(distinct configurations, builds, version index) of a package in a tag."""
        package, tag = self.packages[order], tag_from_name(tag_name)
        distinct = page_size(package, tag, page_rng(package, tag))[1]
        return distinct, builds_in_tag(package, tag), current_version_index(package, tag)

    def make(self, order, index, rebuild, tag):
        """(Build, Spec) of a package's configuration `index` in tag."""
        package = self.packages[order]
        _, builds, version_index = self.facts(order, tag.name)
        build, version, target, variants, spec_hash, epoch = build_identity(
            self.shape, package, index, rebuild, tag, builds, version_index
        )
        env = build.env
        origin = (order, index, origin_of(epoch, tag.style))
        spec = Spec(
            package.name, spec_hash, version, env.platform, env.os, target, build.compiler, tuple(variants), origin
        )
        return build, spec

    def page(self, order, tag):
        """[(page spec, Spec)] of a package's page in tag, in the page's order."""
        package = self.packages[order]
        rng = page_rng(package, tag)
        count, distinct = page_size(package, tag, rng)
        binaries = []
        for i in range(count):
            index, rebuild = i % distinct, i // distinct
            build, spec = self.make(order, index, rebuild, tag)
            stacks = spec_stacks(self.shape.stacks(build, config_of(package, index), rng), tag.style, rng)
            binaries.append((spec_dict(package.name, tag, build, spec, stacks), spec))
        return order_binaries(binaries, tag.style)

    def _built(self, order, index, tag_name):
        return self.make(order, index, 0, tag_from_name(tag_name))[1]

    def _candidates(self, order, tag_name):
        """A package's builds in a tag to depend on, as ({environment: [(index, stacks)]}, [(index, stacks)])."""
        package, tag = self.packages[order], tag_from_name(tag_name)
        distinct, builds, _ = self.facts(order, tag_name)
        by_env, every = {}, []
        for index in range(distinct):
            config = config_of(package, index)
            build = self.shape.build(package, index, config, tag, builds)
            target = build.env.targets[int(config.target_pick * len(build.env.targets))]
            key = (build.env.platform, build.env.os, target, build.compiler)
            every.append((index, self.shape.dependency_stacks(build, config)))
            by_env.setdefault(key, []).append(every[-1])
        return by_env, every

    def dependency(self, order, tag_name, spec, stacks, rng):
        """A build of package `order` in the tag for spec to depend on: one in spec's environment if there is
        one (else any), and of those one that shares the most of spec's stacks."""
        by_env, every = self.candidates(order, tag_name)
        candidates = by_env.get((spec.platform, spec.os, spec.target, spec.compiler)) or every
        if stacks is not None:
            most = max(len(its & stacks) for _, its in candidates)
            candidates = [(index, its) for index, its in candidates if len(its & stacks) == most]
        return self.built(order, rng.choice(candidates)[0], tag_name)

    def dependencies(self, spec):
        """[(Spec or External, deptypes, virtuals)] of a build."""
        order, index, tag_name = spec.origin
        package, tag = self.packages[order], tag_from_name(tag_name)
        rng = Random(f"{SEED}|dependencies|{spec.hash}")
        _, builds, _ = self.facts(order, tag_name)
        config = config_of(package, index)
        stacks = self.shape.dependency_stacks(self.shape.build(package, index, config, tag, builds), config)
        chosen = {}

        def depend(on, deptypes, virtuals=()):
            if on < order and on not in chosen:
                chosen[on] = (self.dependency(on, tag_name, spec, stacks, rng), deptypes, virtuals)

        build_system = next((v.split("=", 1)[1] for v in spec.variants if v.startswith("build_system=")), "")
        if not package.pure_python:
            depend(RUNTIME, ("link",))
        if rng.random() < COMPRESSION_SHARE:
            depend(COMPRESSION, ("build", "link"), ("zlib-api",) if rng.random() < 0.5 else ())
        if build_system == "cmake":
            depend(BUILD_TOOL, ("build",))
        if "+mpi" in spec.variants or rng.random() < MPI_SHARE:
            depend(MPI_PROVIDER, ("build", "link"), ("mpi",))
        if build_system in ("autotools", "meson") and rng.random() < PKG_CONFIG_SHARE:
            depend(PKG_CONFIG, ("build",), ("pkgconfig",))
        own_level = level(order)
        for _ in range(rng.choices(RANDOM_DEPENDENCIES[0], cum_weights=RANDOM_DEPENDENCIES[1])[0] if own_level else 0):
            on_level = own_level - 1 if rng.random() < 0.5 else rng.randrange(own_level)
            on = rng.randrange(level_start(on_level), level_start(on_level + 1))
            virtuals = rng.choice(VIRTUALS) if rng.random() < VIRTUAL_SHARE else ()
            depend(on, rng.choices(DEPTYPES, cum_weights=DEPTYPE_CUMULATIVE)[0], virtuals)
        return list(chosen.values()) + self.external_dependencies(spec, package, build_system, tag, rng)

    def external_dependencies(self, spec, package, build_system, tag, rng):
        """perl for autotools and perl builds; in DB 8, the compiler (a build edge providing c, cxx and
        perhaps fortran)."""
        family = target_family(spec.target)
        edges = []
        if build_system in ("autotools", "perl"):
            deptypes = ("build", "run") if build_system == "perl" else ("build",)
            edges.append((External(*PERL, spec.platform, spec.os, family), deptypes, ()))
        compiler = parse_compiler(spec.compiler)
        if index_format(tag)[0] >= 8 and compiler:
            fortran = compiler_executables(compiler[0])[-1] is not None and rng.random() < FORTRAN_SHARE
            virtuals = ("c", "cxx", "fortran") if fortran else ("c", "cxx")
            edges.append((External(*compiler, spec.platform, spec.os, family), ("build",), virtuals))
        return edges


def derive_meta(specs):
    """meta exactly as the site derives it from spec_details."""
    by_stack = {}
    for spec in specs:
        for stack in spec["stacks"]:
            by_stack[stack] = by_stack.get(stack, 0) + 1
    meta = {
        "versions": sorted({v for spec in specs for v in spec["versions"]}),
        "compilers": sorted({spec["compiler"] for spec in specs}),
        "oss": sorted({spec["os"] for spec in specs}),
        "platforms": sorted({spec["platform"] for spec in specs}),
        "targets": sorted({spec["target"] for spec in specs}),
        "stacks": sorted(by_stack),
        "num_specs": len(specs),
        "num_specs_by_stack": by_stack,  # in first-seen order: pages with sorted keys sort it when written
    }
    return meta


def render_page(package_name, tag, specs):
    sort_keys = tag.style.sorted_keys
    meta = json.dumps(derive_meta(specs), sort_keys=sort_keys)
    details = json.dumps(specs, sort_keys=sort_keys)
    return (
        f'---\ntitle: "{package_name}"\nlayout: cache\ncategories: [package, {tag.name}]\n'
        f"meta: {meta}\nspec_details: {details}\n---"
    )


# --- writing ----------------------------------------------------------------------------------------------------


@dataclass
class Written:
    pages: int = 0
    spec_rows: int = 0
    page_bytes: int = 0
    index_bytes: int = 0


def write_corpus(out, tags, package_count, shape="usual", indexes=True):
    """Write every page of `tags` for the first `package_count` packages in a shape, and their indexes unless
    told not to.

    One tag at a time, since a tag's indexes need all its binaries; the packages, whose configurations
    every tag shares, are made once.
    """
    for tag in tags:
        for folder in (out / "_cache" / tag.name, out / "mirrors" / tag.name):
            if folder.exists():
                raise SystemExit(f"{folder} exists: generate into a fresh folder")
    corpus = Corpus(package_count, shape)
    written = Written()
    for tag in tags:
        binaries = []
        for order, package in enumerate(corpus.packages):
            page = corpus.page(order, tag)
            data = render_page(package.name, tag, [page_spec for page_spec, _ in page]).encode()
            folder = out / "_cache" / tag.name / package.name
            folder.mkdir(parents=True)
            (folder / "specs.md").write_bytes(data)
            written.pages, written.spec_rows, written.page_bytes = (
                written.pages + 1, written.spec_rows + len(page), written.page_bytes + len(data)
            )  # fmt: skip
            if indexes:
                binaries += [(spec, page_spec["stacks"]) for page_spec, spec in page]
        if indexes:
            db_version, layout = index_format(tag)
            mirror = out / "mirrors" / tag.name
            written.index_bytes += write_tag_mirrors(
                mirror, tag.name, stacks_of_tag(tag), db_version, layout, binaries, LIST_VARIANTS, corpus.dependencies
            )
    write_tags_yaml(out)
    if indexes:
        write_cache_index(out)
    return written


def write_tags_yaml(out):
    """List every tag present under _cache, so that adding a tag with --only-tag keeps the list whole."""
    tags = sorted((tag_from_name(p.name) for p in (out / "_cache").iterdir() if p.is_dir()), key=tag_order_key)
    lines = []
    for tag in tags:
        lines += [f"- name: {tag.name}", "  stacks:", *(f"  - {stack}" for stack in stacks_of_tag(tag))]
    (out / "_data").mkdir(parents=True, exist_ok=True)
    (out / "_data" / "tags.yaml").write_text("\n".join(lines) + "\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "out", type=Path, help="folder to write _cache/, _data/, mirrors/ and cache_spack_io_index.json into"
    )
    parser.add_argument(
        "--size", choices=SIZES, default="small",
        help="small: CI smoke test (3 tags x 20 packages); full: 20 x 900; history: 100 x 900, the archive's size",
    )  # fmt: skip
    parser.add_argument(
        "--shape", choices=SHAPES, default="usual",
        help="usual: each configuration in its CI group's environment and stacks (the shape of earlier reports); "
        "spread: many os x target x compiler combinations, each binary in a random subset of its tag's stacks",
    )  # fmt: skip
    parser.add_argument("--tags", type=int, help=f"use the first N of the {len(TAGS)} built-in tags")
    parser.add_argument(
        "--packages", type=int, help="use the first M packages (more than the size's make a busier tag)"
    )
    parser.add_argument("--only-tag", help=f"write just this tag (built-in or not), e.g. {EXTRA_TAG}")
    parser.add_argument("--no-indexes", action="store_true", help="write the pages only (faster)")
    args = parser.parse_args(argv)
    if args.only_tag and args.tags:
        parser.error("--only-tag and --tags exclude each other")
    return args


def main(argv=None):
    args = parse_args(argv)
    tag_count, package_count = SIZES[args.size]
    tag_names = [args.only_tag] if args.only_tag else TAGS[: args.tags or tag_count]
    try:
        tags = [tag_from_name(name) for name in tag_names]
    except ValueError as error:
        raise SystemExit(str(error)) from error
    started = time.perf_counter()
    written = write_corpus(args.out, tags, args.packages or package_count, args.shape, indexes=not args.no_indexes)
    elapsed = time.perf_counter() - started
    print(
        f"{args.shape} shape: {len(tags)} tags, {written.pages} pages, {written.spec_rows} spec rows, {written.page_bytes} page bytes, "
        f"{written.index_bytes} index bytes in {elapsed:.1f} s -> {args.out}"
    )


if __name__ == "__main__":
    sys.exit(main())
