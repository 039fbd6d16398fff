"""Spack's own rules for the values on a page: versions, tags, compilers, variants, spec strings."""

import functools
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

MIRROR_ROOT = "https://binaries.spack.io"

# Spack's "infinity" versions, lowest first: all of them sort above any number.
INFINITY_WORDS = ("stable", "trunk", "head", "master", "main", "develop")
PRERELEASES = ("alpha", "beta", "rc")
_FINAL_RELEASE = (len(PRERELEASES),)
_COMPONENT = re.compile(r"[A-Za-z]+|[0-9]+")
_PRERELEASE_SUFFIX = re.compile(r"^(.*?)[._-]?(alpha|beta|rc)[._-]?([0-9]+)$")


def _component_key(component):
    if component.isdigit():
        return (2, int(component), "")
    word = component.lower()
    if word in INFINITY_WORDS:
        return (3, INFINITY_WORDS.index(word), "")
    return (1, 0, word)


def version_key(version):
    """A sort key that orders versions the way Spack does.

    Components split at '.', '-', '_' and letter/digit boundaries compare one by one
    (numbers as numbers, develop > main > master > head > trunk > stable > numbers >
    other words), a shorter prefix sorts first, and alphaN < betaN < rcN < the release.
    """
    release, prerelease = version, _FINAL_RELEASE
    match = _PRERELEASE_SUFFIX.match(version)
    if match and match.group(1):
        release = match.group(1)
        prerelease = (PRERELEASES.index(match.group(2)), int(match.group(3)))
    components = tuple(_component_key(c) for c in _COMPONENT.findall(release))
    return (components, prerelease)


@dataclass(frozen=True)
class Tag:
    name: str
    kind: str  # develop | snapshot | release | other
    snapshot_date: str | None
    release_version: str | None

    @property
    def mirror_url(self):
        return f"{MIRROR_ROOT}/{self.name}"


_SNAPSHOT = re.compile(r"^develop-(\d{4}-\d{2}-\d{2})$")
_RELEASE = re.compile(r"^v(\d+(?:\.\d+)*)$")


def classify_tag(name):
    if name == "develop":
        return Tag(name, "develop", None, None)
    if match := _SNAPSHOT.match(name):
        return Tag(name, "snapshot", match.group(1), None)
    if match := _RELEASE.match(name):
        return Tag(name, "release", None, match.group(1))
    return Tag(name, "other", None, None)


def tag_sort_key(tag):
    """develop first, then releases newest first, then snapshots newest first, then others by name."""
    if tag.kind == "develop":
        return (0,)
    if tag.kind == "release":
        return (1, tuple(-int(part) for part in tag.release_version.split(".")))
    if tag.kind == "snapshot":
        return (2, tuple(-int(part) for part in tag.snapshot_date.split("-")))
    return (3, tag.name)


@dataclass(frozen=True)
class Compiler:
    name: str
    version: str | None

    def __str__(self):
        return self.name if self.version is None else f"{self.name}@{self.version}"


_COMPILER = re.compile(r"^([A-Za-z0-9_.+-]+?)(?:@(=?)([A-Za-z0-9_.+-]+))?$")


@functools.lru_cache(maxsize=4096)
def parse_compiler(text):
    """'gcc@=11.4.0' and 'gcc@11.4.0' are the same compiler; returns it and whether '@=' was written.

    Returns None for text that is not a compiler spelling.
    """
    match = _COMPILER.match(text)
    if not match:
        return None
    name, exact, version = match.groups()
    if name == "none" and version is None:
        return Compiler("none", None), False
    return Compiler(name, version), exact == "="


@dataclass(frozen=True)
class Variant:
    raw: str
    name: str
    operator: str  # '+', '~', '=' or ':='
    value: str

    @property
    def is_boolean(self):
        return self.operator in ("+", "~")

    @property
    def values(self):
        """Multi-valued variants ('cuda_arch=70,80') split into their values."""
        return self.value.split(",")


_VARIANT = re.compile(r"^(?:([+~])([A-Za-z0-9_.-]+)|([A-Za-z0-9_.-]+)(:?=)(.*))$", re.DOTALL)


@functools.lru_cache(maxsize=65536)
def parse_variant(raw):
    """Returns the Variant, or None where the text is not a Spack variant."""
    match = _VARIANT.match(raw)
    if not match:
        return None
    sign, bool_name, name, operator, value = match.groups()
    if sign:
        return Variant(raw, bool_name, sign, "true" if sign == "+" else "false")
    return Variant(raw, name, operator, value)


_WHITESPACE = re.compile(r"\s")


def _quoted_if_needed(value):
    return f'"{value}"' if _WHITESPACE.search(value) else value


def standard_tarball_url(tag, package, version, platform, os, target, compiler, spec_hash):
    """Where the older pages' 'tarball' field points, when it follows the build cache's usual layout."""
    arch = f"{platform}-{os}-{target}"
    built_with = f"{compiler.name}-{compiler.version}"
    return (
        f"{MIRROR_ROOT}/{tag}/build_cache/{arch}/{built_with}/{package}-{version}/"
        f"{arch}-{built_with}-{package}-{version}-{spec_hash}.spack"
    )


def spec_variants(variants):
    """Variants as a spec string writes them: booleans glued in name order, then key=value pairs."""
    booleans = sorted((v for v in variants if v.is_boolean), key=lambda v: v.name)
    pairs = sorted((v for v in variants if not v.is_boolean), key=lambda v: v.name)
    return "".join(v.raw for v in booleans) + "".join(
        f" {v.name}{v.operator}{_quoted_if_needed(v.value)}" for v in pairs
    )


def spec_string(package, version, variants, platform, os, target, compiler):
    """Spack's spec syntax: name@version, the variants, arch, compiler last (schema.SPEC_SQL writes the same)."""
    text = f"{package}@{version}{spec_variants(variants)} arch={platform}-{os}-{target}"
    if compiler.name != "none":
        text += f" %{compiler}"
    return text


_HASH = re.compile(r"^[a-z2-7]{32}$")
SPEC_FIELDS = ("compiler", "hash", "os", "platform", "size", "stacks", "target", "variants", "versions")
META_LISTS = {"compilers": "compiler", "oss": "os", "platforms": "platform", "targets": "target"}


class SpecError(Exception):
    def __init__(self, field_name, expected):
        super().__init__(f"{field_name}: {expected}")
        self.field = field_name
        self.expected = expected


class Built(NamedTuple):
    """What a spec entry says was built; many binaries share one (the same configuration, rebuilt)."""

    number: int  # distinct per configuration seen in a build, a cheap key for it
    version: str
    compiler: Compiler
    compiler_exact: bool  # written 'name@=version'
    os: str
    platform: str
    target: str
    variants: tuple  # of Variant, in document order
    raw_variants: tuple  # the same, as written


class Spec(NamedTuple):
    """One entry of spec_details, checked and in Spack's terms."""

    hash: str
    built: Built
    stacks: tuple  # sorted
    size: int | None
    extra: dict  # fields the format does not document (e.g. tarball), kept


def _text(entry, key, where):
    value = entry[key]
    if type(value) is not str or not value:
        raise SpecError(f"{where}.{key}", "expected non-empty text")
    return value


def _text_list(entry, key, where):
    values = entry[key]
    if type(values) is not list:
        raise SpecError(f"{where}.{key}", "expected a list of non-empty strings")
    for value in values:
        if type(value) is not str or not value:
            raise SpecError(f"{where}.{key}", "expected a list of non-empty strings")
    return values


_SPEC_FIELD_SET = frozenset(SPEC_FIELDS)


@dataclass
class SpecCache:
    """What binaries share, by the text of its fields: checked once rather than once per binary."""

    built: dict = field(default_factory=dict)
    stacks: dict = field(default_factory=dict)


def parse_spec(entry, where, cache):
    """Check one spec_details entry; cache is a SpecCache kept for a whole build."""
    if type(entry) is not dict:
        raise SpecError(where, "expected a JSON object")
    if not _SPEC_FIELD_SET <= entry.keys():
        missing = next(key for key in SPEC_FIELDS if key not in entry)
        raise SpecError(f"{where}.{missing}", "expected this field")
    variants, versions, key, built = entry["variants"], entry["versions"], None, None
    if type(variants) is list and type(versions) is list:
        try:
            key = (entry["compiler"], entry["os"], entry["platform"], entry["target"], tuple(variants), tuple(versions))
            built = cache.built.get(key)
        except TypeError:  # unhashable values, named by _check_built
            key = None
    if built is None:
        built = _check_built(entry, where, len(cache.built))
        if key is not None:
            cache.built[_interned(key)] = built
    spec_hash = entry["hash"]
    if type(spec_hash) is not str or not _HASH.match(spec_hash):
        _text(entry, "hash", where)
        raise SpecError(
            f"{where}.hash", f"expected 32 characters of Spack's base32 alphabet (a-z, 2-7), found {spec_hash[:60]!r}"
        )
    stacks, sorted_stacks = entry["stacks"], None
    if type(stacks) is list:
        try:
            sorted_stacks = cache.stacks.get(tuple(stacks))  # only lists already checked are in the cache
        except TypeError:  # unhashable values, named by _text_list
            pass
    if sorted_stacks is None:
        stacks = _text_list(entry, "stacks", where)
        sorted_stacks = cache.stacks[tuple(stacks)] = tuple(sorted(set(stacks)))
    size = entry["size"]
    return Spec(
        spec_hash,
        built,
        sorted_stacks,
        None if size == "-" else _size(size, where),
        {k: entry[k] for k in entry.keys() - _SPEC_FIELD_SET} if len(entry) > len(SPEC_FIELDS) else {},
    )


def _check_built(entry, where, number):
    versions = _text_list(entry, "versions", where)
    if len(versions) != 1:
        raise SpecError(f"{where}.versions", f"expected exactly one version, found {len(versions)}")
    compiler = parse_compiler(_text(entry, "compiler", where))
    if compiler is None:
        raise SpecError(f"{where}.compiler", "expected 'none' or name@version")
    raw_variants = _text_list(entry, "variants", where)
    variants = []
    for position, raw in enumerate(raw_variants):
        variant = parse_variant(raw)
        if variant is None:
            raise SpecError(
                f"{where}.variants[{position}]", f"expected +name, ~name, name=value or name:=value, found {raw[:60]!r}"
            )
        variants.append(variant)
    return Built(
        number,
        sys.intern(versions[0]),
        *compiler,
        sys.intern(_text(entry, "os", where)),
        sys.intern(_text(entry, "platform", where)),
        sys.intern(_text(entry, "target", where)),
        tuple(variants),
        _interned(raw_variants),
    )


def _interned(texts):
    """A cached key or Built keeps one copy of each text, not the copies of the page it was first read from: a
    whole history's configurations share a few thousand distinct texts."""
    return tuple(sys.intern(text) if type(text) is str else _interned(text) for text in texts)


def _size(value, where):
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise SpecError(f"{where}.size", "expected '-' (unknown) or a whole number of bytes")


def derived_meta(specs):
    """The meta a page's spec_details imply, as cache.spack.io's generator writes it."""
    by_stack = {}
    for stacks, count in Counter(spec.stacks for spec in specs).items():  # a page's specs share a few sets
        for stack in stacks:
            by_stack[stack] = by_stack.get(stack, 0) + count
    built = {spec.built.number: spec.built for spec in specs}.values()
    return {
        "compilers": sorted({compiler_text(b) for b in built}),
        "num_specs": len(specs),
        "num_specs_by_stack": dict(sorted(by_stack.items())),
        "oss": sorted({b.os for b in built}),
        "platforms": sorted({b.platform for b in built}),
        "stacks": sorted(by_stack),
        "targets": sorted({b.target for b in built}),
        "versions": sorted({b.version for b in built}),
    }


def compiler_text(built):
    """The compiler as the page wrote it."""
    if built.compiler.version is None:
        return built.compiler.name
    return f"{built.compiler.name}@{'=' if built.compiler_exact else ''}{built.compiler.version}"


def meta_disagreements(declared, specs):
    """[(field, message)] where the page's meta says something its spec_details do not."""
    derived = derived_meta(specs)
    found = []
    for key, expected in derived.items():
        if key not in declared:
            found.append((f"meta.{key}", "missing from meta"))
            continue
        value = declared[key]
        if isinstance(expected, list):
            same = isinstance(value, list) and sorted(map(str, value)) == expected
        elif isinstance(expected, dict):
            same = isinstance(value, dict) and {k: str(v) for k, v in value.items()} == {
                k: str(v) for k, v in expected.items()
            }
        else:
            same = str(value) == str(expected)
        if not same:
            found.append((f"meta.{key}", f"meta says {_short(value)} but spec_details give {_short(expected)}"))
    return found


def _short(value, limit=300):
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."
