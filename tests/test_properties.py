"""Property-based: random valid pages survive build → export → parse; random damage is named, never lost."""

import json
import tempfile
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pagemaker import meta_for, page_facts

from spack_cache_db.build import BuildError, build
from spack_cache_db.db.export import export
from spack_cache_db.normalise import is_storable_text
from spack_cache_db.read.pages import NotACachePage, OldLayoutPage, PageError, SourceFile, page_document, read_page
from spack_cache_db.records import Configurations, Document

NAME = st.from_regex(r"[a-z][a-z0-9]{0,6}(-[a-z0-9]{1,5})?", fullmatch=True)
WORD = st.from_regex(r"[a-z][a-z0-9_.]{0,8}", fullmatch=True)
VALUE = st.from_regex(r"[A-Za-z0-9_.][A-Za-z0-9_.,-]{0,10}", fullmatch=True)
VERSION = st.one_of(
    st.sampled_from(["1.10", "2025.10", "0.9rc1", "develop", "1.2.3-beta2", "3"]),
    st.from_regex(r"[0-9]{1,4}(\.[0-9]{1,3}){0,3}", fullmatch=True),
)
HASH = st.text(alphabet="abcdefghijklmnopqrstuvwxyz234567", min_size=32, max_size=32)
TAG = st.one_of(
    st.sampled_from(["develop", "v0.23.1", "develop-2025-04-20", "2025.10"]),
    st.from_regex(r"develop-20[0-9]{2}-[01][0-9]-[0-3][0-9]", fullmatch=True),
)
VARIANT = st.one_of(
    st.builds(lambda s, n: f"{s}{n}", st.sampled_from("+~"), WORD),
    st.builds(lambda n, op, v: f"{n}{op}{v}", WORD, st.sampled_from(["=", ":="]), VALUE),
)
COMPILER = st.one_of(
    st.just("none"),
    st.builds(
        lambda n, eq, v: f"{n}@{eq}{v}",
        st.sampled_from(["gcc", "clang", "intel-oneapi-compilers"]),
        st.sampled_from(["", "="]),
        VERSION,
    ),
)


@st.composite
def specs(draw):
    hashes = draw(st.lists(HASH, min_size=1, max_size=6, unique=True))
    return [
        {
            "compiler": draw(COMPILER),
            "hash": h,
            "os": draw(st.sampled_from(["ubuntu24.04", "rhel8", "sequoia", "ubuntu22.04"])),
            "platform": draw(st.sampled_from(["linux", "darwin"])),
            "size": draw(st.one_of(st.just("-"), st.integers(0, 10**12))),
            "stacks": sorted({"root", *draw(st.lists(NAME, max_size=3))}),
            "target": draw(st.sampled_from(["x86_64_v3", "aarch64", "neoverse_v2", "zen4"])),
            "variants": draw(st.lists(VARIANT, max_size=6)),
            "versions": [draw(VERSION)],
        }
        for h in hashes
    ]


HASH_FIRST = ["hash", "compiler", "versions", "os", "platform", "target", "variants", "stacks", "size"]


@st.composite
def pages(draw):
    entries = draw(specs())
    hash_first = draw(st.booleans())
    order = HASH_FIRST if hash_first else sorted(HASH_FIRST)
    entries = [{key: entry[key] for key in order} for entry in sorted(entries, key=lambda e: e["hash"])]
    if hash_first:
        for entry in entries:
            entry["stacks"] = draw(st.permutations(entry["stacks"]))
    meta = meta_for(entries)
    title, tag = draw(NAME), draw(TAG)
    return (
        f'---\ntitle: "{title}"\nlayout: cache\ncategories: [package, {tag}]\n'
        f"meta: {json.dumps(meta)}\nspec_details: {json.dumps(entries)}\n---"
    )


def build_and_export(text):
    """Build one page and export it again: (the page's facts, the exported page's facts)."""
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.md"
        page.write_text(text)
        summary = build([str(page)], Path(tmp) / "cache.db")
        assert summary.counts["binaries"] == len(read_page(SourceFile(str(page), True), page.read_bytes()).specs)
        export(Path(tmp) / "cache.db", Path(tmp) / "out")
        [exported] = (Path(tmp) / "out").rglob("specs.md")
        return page_facts(page), page_facts(exported)


SETTINGS = settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(pages())
def test_valid_pages_come_back_with_the_same_facts(text):
    original, exported = build_and_export(text)
    assert exported == original


def damage(text, kind, position, payload):
    where = position % max(len(text), 1)
    if kind == "delete":
        return text[:where] + text[where + len(payload) + 1 :]
    if kind == "insert":
        return text[:where] + payload + text[where:]
    if kind == "truncate":
        return text[:where]
    return text.replace(payload[:1] or '"', "", 1)


@SETTINGS
@given(
    pages(),
    st.sampled_from(["delete", "insert", "truncate", "drop-char"]),
    st.integers(0, 10**6),
    st.text(alphabet='{}[]",:@=+~-\n 0123456789abcxyz\\', max_size=4),
)
def test_damaged_pages_are_named_or_built_whole(text, kind, position, payload):
    damaged = damage(text, kind, position, payload)
    try:
        original, exported = build_and_export(damaged)
    except PageError as error:
        assert error.path.endswith("page.md")
        assert error.field and error.expected
        assert str(error).startswith(f"{error.path}: {error.field}: ")
        return
    except BuildError as error:
        assert "--strict" not in str(error)
        raise
    assert exported == original


# Issue 13: whatever bytes a file holds, reading it as a page gives a page (a Document) or a PageError, never
# another exception, in bounded time and memory.

HOSTILE_CHARACTERS = st.sampled_from(
    ["\ud800", "\udfff", "\n", "\x00", "\x1b", "\u2028", "\t", "a", "7", ".", "@", "="]
)
ANY_TEXT = st.text(HOSTILE_CHARACTERS | st.characters(blacklist_categories=()), max_size=12)  # lone surrogates too
HOSTILE_SCALAR = st.one_of(
    st.sampled_from([2**63, 10**19, -1, 10**4000, True, "1" * 20, "²", "-"]),
    st.builds(lambda h, tail: h + tail, HASH, st.sampled_from(["\n", "\x00", "\ud800", " "])),
    ANY_TEXT,
)
JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), HOSTILE_SCALAR)
ANY_JSON = st.recursive(
    JSON_SCALAR, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4), max_leaves=20
)
SPEC_FIELDS = ["compiler", "hash", "os", "platform", "size", "stacks", "target", "variants", "versions"]


@st.composite
def damaged_specs(draw):
    """Valid specs with some fields replaced by, or added as, any JSON value."""
    entries = draw(specs())
    for entry in entries:
        for key in draw(st.lists(st.sampled_from(SPEC_FIELDS + ["tarball", "extra"]), max_size=3)):
            entry[key] = draw(st.one_of(HOSTILE_SCALAR, st.lists(HOSTILE_SCALAR, max_size=3), ANY_JSON))
    return entries


def deep(depth):
    return "[" * depth + "]" * depth


@st.composite
def pages_with_any_json(draw):
    depths = st.sampled_from([1, 3, 40, 1500, 5000]).map(deep)
    meta = draw(st.one_of(ANY_JSON, st.builds(meta_for, specs()), depths))
    spec_details = draw(st.one_of(ANY_JSON, damaged_specs(), depths))
    meta_text = meta if isinstance(meta, str) and meta.startswith("[") else json.dumps(meta)
    details_text = spec_details if isinstance(spec_details, str) else json.dumps(spec_details)
    title = draw(st.one_of(NAME, ANY_TEXT))
    tag = draw(st.one_of(TAG, ANY_TEXT))
    return (
        f"---\ntitle: {json.dumps(title)}\nlayout: cache\ncategories: [package, {tag}]\n"
        f"meta: {meta_text}\nspec_details: {details_text}\n---"
    ).encode("utf-8", "surrogatepass")


FRONT_MATTER_NOISE = st.text(
    st.characters(blacklist_categories=()) | st.sampled_from("-:&*[]{}\n\"'!|>#%@`,?"), max_size=300
)
LAUGHS = "".join(
    ["  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"]
    + [f"  {chr(98 + n)}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 9)}]\n" for n in range(9)]
)
KNOWN_HOSTILE = st.sampled_from(
    [
        f"---\nlayout: cache\ntitle: bolt\ncategories: [package, develop]\nmeta:\n{LAUGHS}spec_details: []\n---",
        f"---\nlayout: cache\ntitle: bolt\ncategories: [package, develop]\nmeta: {deep(50_000)}\nspec_details: []\n---",
        "---\nlayout: cache\ntitle: bolt\ncategories: [package, develop]\nmeta: {}\nspec_details: " + "{" * 50_000,
    ]
).map(str.encode)
ANY_BYTES = st.one_of(
    KNOWN_HOSTILE,
    st.binary(max_size=2000),
    st.builds(lambda b: b"---\n" + b + b"\n---", st.binary(max_size=2000)),
    st.builds(lambda t: f"---\n{t}\n---".encode("utf-8", "surrogatepass"), FRONT_MATTER_NOISE),
    pages_with_any_json(),
)
MEMORY_BOUND = 64 * 2**20  # far above what a page of a few kilobytes needs; an alias bomb or a walk of one exceeds it
READER_SETTINGS = settings(max_examples=300, deadline=10_000, suppress_health_check=[HealthCheck.too_slow])


def read_whole_page(data, explicit):
    """What a build does with a file's bytes: read_page, then every spec checked into a Document."""
    source = SourceFile("page.md", explicit)
    try:
        return page_document(read_page(source, data), Configurations())
    except (NotACachePage, OldLayoutPage) as skipped:  # a file in a folder that is no page; an old-layout page
        assert not explicit or isinstance(skipped, OldLayoutPage)
        return skipped


@READER_SETTINGS
@given(ANY_BYTES, st.booleans())
def test_any_bytes_give_a_page_or_a_page_error_in_bounded_memory(data, explicit):
    tracemalloc.start()
    try:
        outcome = read_whole_page(data, explicit)
    except PageError as error:
        assert error.path == "page.md" and error.field and error.expected
        assert "\n" not in str(error) and is_storable_text(str(error))  # one line, storable in problems
        outcome = error
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert isinstance(outcome, Document | PageError | NotACachePage | OldLayoutPage)
    assert peak < MEMORY_BOUND
    if isinstance(outcome, Document):
        assert_storable(outcome)


def assert_storable(document):
    """What the writer gets from a Document: text SQLite takes (UTF-8), integers it holds (64 bits)."""
    for binary in document.binaries:
        built = binary.built
        texts = [binary.hash, built.version, built.os, built.platform, built.target, *binary.stacks]
        texts += [str(built.compiler), *built.raw_variants, json.dumps(binary.extra, ensure_ascii=False)]
        texts += [document.tag, document.package, json.dumps(document.extra, ensure_ascii=False)]
        texts += [] if document.meta_text is None else [document.meta_text]  # None: the one the binaries imply
        for text in texts:
            text.encode("utf-8")
        assert binary.size is None or 0 <= binary.size < 2**63
