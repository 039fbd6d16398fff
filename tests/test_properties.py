"""Property-based: random valid pages survive build → export → parse; random damage is named, never lost."""

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pagemaker import meta_for, page_facts

from spack_cache_db.build import BuildError, build
from spack_cache_db.export import export
from spack_cache_db.read_pages import PageError, SourceFile, read_page

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
