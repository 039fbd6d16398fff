import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spec_strings import spec_string

from spack_cache_db.normalise import (
    Compiler,
    classify_tag,
    next_version_key,
    parse_compiler,
    parse_variant,
    tag_sort_key,
    version_key,
    version_sort_key,
)
from spack_cache_db.read.pages import parse_spec
from spack_cache_db.records import Configurations


def spack_sorted(versions):
    return sorted(versions, key=version_key)


@pytest.mark.parametrize(
    "lower, higher",
    [
        ("0.9", "0.10"),
        ("1.8.23", "1.12.3"),
        ("1.12.3", "1.14.6"),
        ("1.2", "1.2.1"),
        ("1.2rc1", "1.2"),
        ("1.2alpha1", "1.2beta1"),
        ("1.2beta1", "1.2rc1"),
        ("1.2rc1", "1.2rc2"),
        ("1.2", "1.10"),
        ("2024.2.1", "2025.1.0"),
        ("1.0", "1.0a"),
        ("abc", "1"),
        ("999", "stable"),
        ("stable", "trunk"),
        ("trunk", "head"),
        ("head", "master"),
        ("master", "main"),
        ("main", "develop"),
        ("1.1.1", "1.1.1a"),
        ("3.0-rc1", "3.0"),
        # Spack's test_prereleases: a bare alpha, beta or rc is a pre-release too, below one with a number.
        ("6.0alpha", "6.0alpha0"),
        ("6.0alpha2", "6.0beta"),
        ("6.0beta2", "6.0rc"),
        ("6.0rc", "6.0rc0"),
        ("6.0rc2", "6.0"),
        # rc only as a whole component: 1.0barc1 is 1.0 and the word barc, not a pre-release of 1.0ba.
        ("1.0", "1.0barc1"),
        ("10a2", "10b2"),  # not pre-releases: words
    ],
)
def test_versions_sort_the_way_spack_sorts_them(lower, higher):
    assert version_key(lower) < version_key(higher)
    assert spack_sorted([higher, lower]) == [lower, higher]


def test_string_order_would_be_wrong_for_hdf5():
    assert spack_sorted(["1.12.3", "1.14.6", "1.8.23"]) == ["1.8.23", "1.12.3", "1.14.6"]


VERSIONS = st.one_of(
    st.sampled_from(["1.14", "1.14.0", "1.14.6", "1.15rc1", "1.15", "develop", "main", "2.0alpha", "1.0a", "abc", ""]),
    st.from_regex(r"[0-9a-z]{1,3}([._-]?[0-9a-z]{1,3}){0,4}", fullmatch=True),
)


@given(VERSIONS, VERSIONS)
def test_sortable_versions_compare_as_their_keys(first, second):
    """The text SQL compares versions by (versions.version_key) orders them as version_key does."""
    keys, texts = (version_key(first), version_key(second)), (version_sort_key(first), version_sort_key(second))
    assert (keys[0] < keys[1]) == (texts[0] < texts[1]) and (keys[0] == keys[1]) == (texts[0] == texts[1])


@pytest.mark.parametrize(
    "version, following",
    [("1.14", "1.15"), ("1.9", "1.10"), ("1.99", "1.100"), ("2.0rc1", "2.0rc2"), ("2.0rc", "2.0rc0"), ("1.0b", "1.0c")],
)
def test_the_version_after_one_is_as_spack_steps(version, following):
    assert next_version_key(version_key(version)) == version_key(following)


def test_separators_do_not_matter():
    assert version_key("1.2.3") == version_key("1-2-3") == version_key("1_2_3")


@pytest.mark.parametrize(
    "name, kind, date, release",
    [
        ("develop", "develop", None, None),
        ("develop-2025-04-20", "snapshot", "2025-04-20", None),
        ("v0.23.1", "release", None, "0.23.1"),
        ("v1.0.0", "release", None, "1.0.0"),
        ("2025.10", "other", None, None),
        ("develop-2025", "other", None, None),
    ],
)
def test_tags_are_classified(name, kind, date, release):
    tag = classify_tag(name)
    assert (tag.kind, tag.snapshot_date, tag.release_version) == (kind, date, release)
    assert tag.mirror_url == f"https://binaries.spack.io/{name}"


def test_tags_order_develop_then_releases_then_snapshots_newest_first():
    names = ["develop-2024-03-17", "v0.22.0", "v1.0.0", "develop", "v0.23.1", "develop-2025-04-20", "2025.10"]
    ordered = [t.name for t in sorted(map(classify_tag, names), key=tag_sort_key)]
    assert ordered == ["develop", "v1.0.0", "v0.23.1", "v0.22.0", "develop-2025-04-20", "develop-2024-03-17", "2025.10"]


@pytest.mark.parametrize(
    "text, compiler, exact",
    [
        ("gcc@=11.4.0", Compiler("gcc", "11.4.0"), True),
        ("gcc@11.4.0", Compiler("gcc", "11.4.0"), False),
        ("intel-oneapi-compilers@2025.1.0", Compiler("intel-oneapi-compilers", "2025.1.0"), False),
        ("none", Compiler("none", None), False),
    ],
)
def test_compiler_spellings(text, compiler, exact):
    assert parse_compiler(text) == (compiler, exact)


def test_both_compiler_spellings_are_the_same_compiler():
    assert parse_compiler("gcc@=11.4.0")[0] == parse_compiler("gcc@11.4.0")[0]
    assert str(parse_compiler("gcc@=11.4.0")[0]) == "gcc@11.4.0"


@pytest.mark.parametrize("text", ["gcc@@1", "gcc@", "", "gcc 13"])
def test_compiler_nonsense_is_refused(text):
    assert parse_compiler(text) is None


@pytest.mark.parametrize(
    "raw, name, operator, value, values",
    [
        ("+mpi", "mpi", "+", "true", None),
        ("~shared", "shared", "~", "false", None),
        ("build_type=Release", "build_type", "=", "Release", ["Release"]),
        ("patches:=db4173c,de0de41", "patches", ":=", "db4173c,de0de41", ["db4173c", "de0de41"]),
        ("cuda_arch=70,80", "cuda_arch", "=", "70,80", ["70", "80"]),
        ("amdgpu_target:=gfx90a", "amdgpu_target", ":=", "gfx90a", ["gfx90a"]),
    ],
)
def test_variants_are_split(raw, name, operator, value, values):
    variant = parse_variant(raw)
    assert (variant.name, variant.operator, variant.value) == (name, operator, value)
    if values is not None:
        assert variant.values == values


@pytest.mark.parametrize("raw", ["mpi", "+", "=x", "+a b"])
def test_variant_nonsense_is_refused(raw):
    assert parse_variant(raw) is None


def test_spec_string_follows_spack_syntax():
    variants = [parse_variant(v) for v in ["api=default", "build_system=cmake", "~cxx", "+mpi", "patches:=a1,b2"]]
    text = spec_string("hdf5", "1.14.6", variants, "linux", "ubuntu24.04", "x86_64_v3", Compiler("gcc", "13.2.0"))
    assert text == (
        "hdf5@1.14.6~cxx+mpi api=default build_system=cmake patches:=a1,b2 arch=linux-ubuntu24.04-x86_64_v3 %gcc@13.2.0"
    )


def test_spec_string_has_no_compiler_part_for_none():
    text = spec_string("py-six", "1.16.0", [], "linux", "ubuntu22.04", "x86_64_v3", Compiler("none", None))
    assert text == "py-six@1.16.0 arch=linux-ubuntu22.04-x86_64_v3"


def test_configurations_read_from_different_pages_share_their_texts():
    """A build keeps every configuration it has seen: the texts they have in common are held once, not
    once per page they were read from."""
    cache = Configurations()

    def parse(hash_letter, variants):
        entry = json.loads(
            json.dumps(
                {  # decoded afresh, as each page is
                    "compiler": "gcc@13.2.0",
                    "hash": hash_letter * 32,
                    "os": "ubuntu24.04",
                    "platform": "linux",
                    "size": "-",
                    "stacks": ["root"],
                    "target": "x86_64_v3",
                    "variants": variants,
                    "versions": ["1.14.6"],
                }
            )
        )
        return parse_spec(entry, "spec_details[0]", cache).built

    first, second = parse("a", ["+mpi", "build_system=cmake"]), parse("b", ["~mpi", "build_system=cmake"])
    assert first is not second
    assert (
        (first.os, first.target, first.version)
        == (second.os, second.target, second.version)
        == ("ubuntu24.04", "x86_64_v3", "1.14.6")
    )
    assert first.os is second.os and first.target is second.target and first.version is second.version
    assert first.raw_variants[1] is second.raw_variants[1]
    first_key, second_key = cache.built
    assert first_key[0] is second_key[0] and first_key[4][1] is second_key[4][1]
