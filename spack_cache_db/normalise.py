"""Spack's own rules for the values on a page: versions, tags, compilers, variants, spec strings."""

import functools
import json
import re
import string
from collections import Counter
from dataclasses import dataclass

MIRROR_ROOT = "https://binaries.spack.io"

# Spack's "infinity" versions, lowest first: all of them sort above any number.
INFINITY_WORDS = ("stable", "trunk", "head", "master", "main", "develop")
PRERELEASES = ("alpha", "beta", "rc")
_FINAL_RELEASE = (len(PRERELEASES),)
_COMPONENT = re.compile(r"[A-Za-z]+|[0-9]+")


def _number(digits):
    """A key that orders digit strings as the numbers they spell, of any length (int() refuses more than
    4,300 digits)."""
    digits = digits.lstrip("0")
    return (len(digits), digits)


_COMPLEMENT = str.maketrans("0123456789", "9876543210")


def _number_descending(digits):
    digits = digits.lstrip("0")
    return (-len(digits), digits.translate(_COMPLEMENT))


def _component_key(component):
    if component.isdigit():
        return (2, _number(component), "")
    word = component.lower()
    if word in INFINITY_WORDS:
        return (3, INFINITY_WORDS.index(word), "")
    return (1, 0, word)


def version_key(version):
    """A sort key that orders versions the way Spack does.

    Components split at '.', '-', '_' and letter/digit boundaries compare one by one
    (numbers as numbers, develop > main > master > head > trunk > stable > numbers >
    other words), a shorter prefix sorts first, and a last component alpha, beta or rc (with or
    without a number after it) marks a pre-release: 1.2alpha < 1.2alpha1 < 1.2beta1 < 1.2rc1 < 1.2.
    """
    components = _COMPONENT.findall(version)
    prerelease = _FINAL_RELEASE
    if len(components) >= 3 and components[-2] in PRERELEASES and components[-1].isdigit():
        prerelease = (PRERELEASES.index(components[-2]), _number(components[-1]))
        components = components[:-2]
    elif len(components) >= 2 and components[-1] in PRERELEASES:
        prerelease = (PRERELEASES.index(components[-1]),)
        components = components[:-1]
    return (tuple(_component_key(c) for c in components), prerelease)


@dataclass(frozen=True)
class Tag:
    name: str
    kind: str  # develop | snapshot | release | other
    snapshot_date: str | None
    release_version: str | None

    @property
    def mirror_url(self):
        return f"{MIRROR_ROOT}/{self.name}"


_SNAPSHOT = re.compile(r"develop-([0-9]{4}-[0-9]{2}-[0-9]{2})")
_RELEASE = re.compile(r"v([0-9]+(?:\.[0-9]+)*)")


def classify_tag(name):
    if name == "develop":
        return Tag(name, "develop", None, None)
    if match := _SNAPSHOT.fullmatch(name):
        return Tag(name, "snapshot", match.group(1), None)
    if match := _RELEASE.fullmatch(name):
        return Tag(name, "release", None, match.group(1))
    return Tag(name, "other", None, None)


def tag_sort_key(tag):
    """develop first, then releases newest first, then snapshots newest first, then others by name."""
    if tag.kind == "develop":
        return (0,)
    if tag.kind == "release":
        return (1, tuple(map(_number_descending, tag.release_version.split("."))))
    if tag.kind == "snapshot":
        return (2, tuple(map(_number_descending, tag.snapshot_date.split("-"))))
    return (3, tag.name)


@dataclass(frozen=True)
class Compiler:
    name: str
    version: str | None

    def __str__(self):
        return self.name if self.version is None else f"{self.name}@{self.version}"


_COMPILER = re.compile(r"([A-Za-z0-9_.+-]+?)(?:@(=?)([A-Za-z0-9_.+-]+))?")


@functools.lru_cache(maxsize=4096)
def parse_compiler(text):
    """'gcc@=11.4.0' and 'gcc@11.4.0' are the same compiler; returns it and whether '@=' was written.

    Returns None for text that is not a compiler spelling.
    """
    match = _COMPILER.fullmatch(text)
    if not match:
        return None
    name, exact, version = match.groups()
    if name == NO_COMPILER and version is None:
        return Compiler(NO_COMPILER, None), False
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


# Characters no name or value may hold: C0 and C1 controls (newlines, tabs, escapes, NUL) and the Unicode
# line and paragraph separators.
CONTROL_CHARACTERS = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
PLAIN_TEXT = re.compile(f"[^{CONTROL_CHARACTERS}\\ud800-\\udfff]+")  # and no lone surrogates: text SQLite takes
# Tag, stack and package names become folders on export: no separators, no leading dot.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # use fullmatch
# ... and no longer than a file name may be: export writes _cache/<tag>/<package>/specs.md, and file systems
# (ext4, XFS, APFS, NTFS) refuse a name past 255 bytes. Stacks are parts of mirror URLs and kept as short.
MAX_NAME_BYTES = 255


def name_problem(name, what="a name"):
    """None, or why name cannot be a tag, stack or package name (what: 'a tag name', ...)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return f"expected {what} (letters, digits, '.', '_', '+', '-'), found {name!r:.80}"
    return name_length_problem(name, what)


def name_length_problem(name, what="a name"):
    """None, or why name is too long to be a file name on export."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        return (
            f"expected {what} of at most {MAX_NAME_BYTES} bytes (the longest file name: tags and packages are"
            f" folders on export), found {size:,} bytes"
        )
    return None


def text_problem(value):
    """None, or why a name or value cannot be stored and written back as it is."""
    if PLAIN_TEXT.fullmatch(value):
        return None
    if not is_storable_text(value):
        return f"expected Unicode text, found {value!r:.80} (a lone surrogate)"
    return f"expected text without control characters or line breaks, found {value!r:.80}"


def is_storable_text(text):
    """Whether text can be stored in SQLite as text (no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_VARIANT = re.compile(rf"([+~])([A-Za-z0-9_.-]+)|([A-Za-z0-9_.-]+)(:?=)([^{CONTROL_CHARACTERS}]*)")


@functools.lru_cache(maxsize=65536)
def parse_variant(raw):
    """Returns the Variant, or None where the text is not a Spack variant."""
    match = _VARIANT.fullmatch(raw)
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
    return standard_tarball_prefix(tag, package, version, platform, os, target, compiler) + f"{spec_hash}.spack"


def standard_tarball_prefix(tag, package, version, platform, os, target, compiler):
    """What every binary's usual tarball URL of one configuration starts with, before its hash."""
    arch = f"{platform}-{os}-{target}"
    built_with = f"{compiler.name}-{compiler.version}"
    return f"{MIRROR_ROOT}/{tag}/build_cache/{arch}/{built_with}/{package}-{version}/{arch}-{built_with}-{package}-{version}-"


def spec_variants(variants):
    """Variants as a spec string writes them: booleans glued in name order, then key=value pairs."""
    booleans = sorted((v for v in variants if v.is_boolean), key=lambda v: v.name)
    pairs = sorted((v for v in variants if not v.is_boolean), key=lambda v: v.name)
    return "".join(v.raw for v in booleans) + "".join(
        f" {v.name}{v.operator}{_quoted_if_needed(v.value)}" for v in pairs
    )


# Spack's spec syntax: name@version, the variants, arch, the compiler last; no compiler part for NO_COMPILER.
SPEC_TEMPLATE = "{package}@{version}{variants} arch={platform}-{os}-{target}"
COMPILER_TEMPLATE = " %{compiler}"
NO_COMPILER = "none"

# Spack 1.0 made compilers packages: %clang is %llvm, %oneapi is %intel-oneapi-compilers (spack/aliases.py).
COMPILER_ALIASES = {
    "clang": "llvm",
    "oneapi": "intel-oneapi-compilers",
    "rocmcc": "llvm-amdgpu",
    "intel": "intel-oneapi-compiler-classic",
    "arm": "acfl",
}
OTHER_COMPILER_NAMES = {**COMPILER_ALIASES, **{new: old for old, new in COMPILER_ALIASES.items()}}


def other_compiler_name(name):
    """The name a compiler has in the other of Spack 0.x and 1.x (oneapi, intel-oneapi-compilers), or None."""
    return OTHER_COMPILER_NAMES.get(name)


def compiler_field_names(given):
    """What a compiler field (a name, or name@version) names under either of the compiler's names, as
    find_binaries' field_compiler_names reads it from the view compiler_aliases."""
    name, at, version = given.partition("@")
    other = other_compiler_name(name)
    return [given] if other is None else [given, other + at + version]


def sql_literal(text):
    """Text as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def template_sql(template, expressions):
    """A template's text as an SQL concatenation, each {field} replaced by the SQL expression given for it."""
    parts = []
    for literal, field, _, _ in string.Formatter().parse(template):
        if literal:
            parts.append(sql_literal(literal))
        if field is not None:
            parts.append(expressions[field])
    return " || ".join(parts)


# Spack's DAG hash: HASH_LENGTH characters of its base32 alphabet (use fullmatch)
HASH_LENGTH = 32
HASH = re.compile(rf"[a-z2-7]{{{HASH_LENGTH}}}")


def derived_meta(specs):
    """The meta a page's binaries imply, as cache.spack.io's generator writes it (meta_text): num_specs_by_stack
    in the order the stacks first appear."""
    built = {spec.built.number: spec.built for spec in specs}.values()
    return meta_of(
        compilers=[compiler_text(b) for b in built],
        versions=[b.version for b in built],
        oss=[b.os for b in built],
        platforms=[b.platform for b in built],
        targets=[b.target for b in built],
        by_stack=binaries_per_stack(spec.stacks for spec in specs),
        binaries=len(specs),
    )


def meta_of(*, compilers, versions, oss, platforms, targets, by_stack, binaries):
    """The meta of a page of so many binaries, which have these values (repeated or not) and these binaries per
    stack."""
    return {
        "compilers": sorted(set(compilers)),
        "num_specs": binaries,
        "num_specs_by_stack": by_stack,
        "oss": sorted(set(oss)),
        "platforms": sorted(set(platforms)),
        "stacks": sorted(by_stack),
        "targets": sorted(set(targets)),
        "versions": sorted(set(versions)),
    }


def binaries_per_stack(stack_lists):
    """{stack: binaries} of binaries given by their lists of stacks, each stack where it first appears."""
    by_stack = {}
    for stacks, count in Counter(stack_lists).items():  # a page's binaries share a few lists, first seen first
        for stack in stacks:
            by_stack[stack] = by_stack.get(stack, 0) + count
    return by_stack


# The keys of a meta in the order cache.spack.io's generator wrote them before it sorted them.
OLDER_META_ORDER = ("versions", "compilers", "oss", "platforms", "targets", "stacks", "num_specs", "num_specs_by_stack")


def meta_text(meta, sorted_keys):
    """A meta (derived_meta) as the generator writes it: keys sorted, or in its older order."""
    if sorted_keys:
        return json.dumps(meta, sort_keys=True)
    return json.dumps({key: meta[key] for key in OLDER_META_ORDER})


def compiler_text(built):
    """The compiler as the page wrote it."""
    if built.compiler.version is None:
        return built.compiler.name
    return f"{built.compiler.name}@{'=' if built.compiler_exact else ''}{built.compiler.version}"


# Versions as text whose byte order is version_key's order, so that SQL can compare them (versions.version_key):
# each component is a kind byte (word 1, number 2, infinity word 3) and its value, and 00 ends the components,
# so that a prefix sorts right below its extensions (1.14 < 1.14.0 < 1.14.6 < 1.15); then the pre-release kind
# (alpha 0, beta 1, rc 2, final 3) and its number. Numbers are their length (4 bytes) and their digits.
def _encoded_number(number):
    length, digits = number
    return length.to_bytes(4, "big") + digits.encode()


def _encoded_component(component):
    kind, value, word = component
    if kind == 1:
        return b"\x01" + word.encode() + b"\x00"
    if kind == 2:
        return b"\x02" + _encoded_number(value)
    return b"\x03" + bytes((value,))


def sortable_version(key):
    """A version_key as lower-case hex text that sorts as the key does."""
    components, prerelease = key
    encoded = b"".join(map(_encoded_component, components)) + b"\x00" + bytes(prerelease[:1])
    if len(prerelease) > 1:
        encoded += _encoded_number(prerelease[1])
    return encoded.hex()


def version_sort_key(version):
    return sortable_version(version_key(version))


def _next_digits(digits):
    """The number one above a digit string, as a digit string."""
    stripped = digits.lstrip("0") or "0"
    head = stripped.rstrip("9")
    if not head:
        return "1" + "0" * len(stripped)
    return head[:-1] + str(int(head[-1]) + 1) + "0" * (len(stripped) - len(head))


def _next_word(word):
    """The word right after another one, as Spack steps past it (skipping the infinity words)."""
    while True:
        word = word + "a" if word.endswith("z") or not word else word[:-1] + chr(ord(word[-1]) + 1)
        if word not in INFINITY_WORDS:
            return word


def next_version_key(key):
    """The key of the version right after a version and all that it is a prefix of, as Spack's _next_version
    makes it: where a range lo:hi ends (it holds lo <= v < next(hi), so 1.14 holds 1.14.6 and 1.15rc1)."""
    components, prerelease = key
    if prerelease != _FINAL_RELEASE:
        number = _number(_next_digits(prerelease[1][1])) if len(prerelease) > 1 else _number("0")
        return components, (prerelease[0], number)
    if not components:
        return ((1, 0, "a"),), prerelease
    kind, value, word = components[-1]
    if kind == 1:
        last = (1, 0, _next_word(word))
    elif kind == 2:
        last = (2, _number(_next_digits(value[1])), "")
    else:
        last = (3, value + 1, "")
    return components[:-1] + (last,), prerelease
