import json
from pathlib import Path

import pytest
from pagemaker import page_text, spec, write_page
from paths import SITE

from spack_cache_db.read.pages import (
    NotACachePage,
    OldLayoutPage,
    PageError,
    SourceFile,
    exactly,
    find_inputs,
    page_document,
    read_page,
)
from spack_cache_db.records import Configurations

SAMPLES = SITE


def read_text(tmp_path, text, explicit=True, name="page.md"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return read_page(SourceFile(str(path), explicit), path.read_bytes())


def test_new_era_page_is_read_in_generator_form():
    page = read_page(
        SourceFile(f"{SAMPLES}/_cache/develop-2025-04-20/hdf5/specs.md", True),
        open(f"{SAMPLES}/_cache/develop-2025-04-20/hdf5/specs.md", "rb").read(),
    )
    assert (page.title, page.tag, page.sorted_keys, page.extra) == ("hdf5", "develop-2025-04-20", True, {})
    assert len(page.specs) == page.meta["num_specs"] == 46
    assert page.meta_text.startswith('{"compilers": ["apple-clang@16.0.0"')


def test_old_era_page_keeps_its_hash_first_order_and_tarball():
    path = f"{SAMPLES}/_cache/develop-2024-03-17/bolt/specs.md"
    page = read_page(SourceFile(path, True), open(path, "rb").read())
    assert page.sorted_keys is False
    assert list(page.specs[0])[:2] == ["hash", "compiler"]
    assert page.key_order == list(page.specs[0])
    assert page.specs[0]["tarball"].startswith("https://binaries.spack.io/develop-2024-03-17/build_cache/")
    assert list(page.meta)[0] == "versions"


def test_yaml_traps_keep_the_text_of_the_document(tmp_path):
    text = page_text("py-x", "2025.10", [spec(1, versions=["1.10"])]).replace(
        '"versions": ["1.10"]}]', '"versions": [1.10]}]'
    )
    page = read_text(tmp_path, text)
    assert page.tag == "2025.10"
    assert exactly(page).specs[0]["versions"] == ["1.10"]
    assert page_document(page, Configurations()).binaries[0].built.version == "1.10"


def test_a_number_with_a_fraction_in_a_field_we_keep_keeps_its_text(tmp_path):
    """orjson reads a page in the generator's form; where it would turn 1.10 into 1.1 the page is read again."""
    text = page_text("py-x", "develop", [spec(1, note="x")]).replace('"note": "x"', '"note": 1.10')
    document = page_document(read_text(tmp_path, text), Configurations())
    assert document.binaries[0].extra == {"note": "1.10"}


@pytest.mark.parametrize("categories", ["[package, develop ]", "[ package, develop]", "[package,  develop]"])
def test_categories_are_read_as_yaml_reads_them(tmp_path, categories):
    text = page_text("bolt", "develop", [spec(1)]).replace(
        "categories: [package, develop]", f"categories: {categories}"
    )
    assert read_text(tmp_path, text).tag == "develop"


def test_key_order_of_specs_written_in_different_orders_is_each_keys_first_appearance(tmp_path):
    hash_first = {"hash": spec(1)["hash"], **{k: v for k, v in spec(1).items() if k != "hash"}}
    with_tarball = {**spec(2), "tarball": "https://example.org/x.spack"}
    text = page_text("bolt", "develop", [spec(1), spec(2)]).split("spec_details: ")[0]
    text += "spec_details: " + json.dumps([hash_first, with_tarball]) + "\n---"
    page = read_text(tmp_path, text)
    assert page.sorted_keys is False
    assert page.key_order == list(hash_first) + ["tarball"]


def test_sorted_pages_need_no_key_order(tmp_path):
    page = read_text(tmp_path, page_text("bolt", "develop", [spec(1), spec(2)]))
    assert (page.sorted_keys, page.key_order) == (True, None)


def test_block_style_yaml_is_read_as_text(tmp_path):
    text = (
        "---\ntitle: py-x\nlayout: cache\ncategories:\n  - package\n  - 2025.10\n"
        "meta:\n  num_specs: 1\n  versions: [1.10]\n"
        "spec_details:\n  - hash: " + spec(1)["hash"] + "\n    versions: [2025.10]\n---\n"
    )
    page = read_text(tmp_path, text)
    assert (page.title, page.tag, page.sorted_keys) == ("py-x", "2025.10", False)
    assert page.meta == {"num_specs": "1", "versions": ["1.10"]}
    assert page.specs[0]["versions"] == ["2025.10"]


def test_unknown_front_matter_fields_are_kept(tmp_path):
    text = page_text("bolt", "develop", [spec(1)]).replace("layout: cache\n", "layout: cache\ngenerated_by: x\n")
    assert read_text(tmp_path, text).extra == {"generated_by": "x"}


def test_crlf_and_byte_order_mark_are_accepted(tmp_path):
    text = page_text("bolt", "develop", [spec(1)])
    page = read_text(tmp_path, b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode() + b"\r\n\r\n")
    assert (page.title, len(page.specs), page.sorted_keys) == ("bolt", 1, True)


@pytest.mark.parametrize(
    "text, field, expected",
    [
        ("", "file", "empty file"),
        ('---\ntitle: "x"\nlayout: cache\n', "front matter", "closing '---'"),
        ("title: x\n", "front matter", "start with a '---'"),
        ("---\ntitle: [x\n---", "front matter", "valid YAML"),
        (
            '---\ntitle: "x"\nlayout: cache\ncategories: [package, develop]\nmeta: {\nspec_details: []\n---',
            "meta",
            "valid JSON",
        ),
        (
            '---\ntitle: "x"\nlayout: cache\ncategories: [package, develop]\nmeta: {"a": }\nspec_details: []\n---',
            "meta",
            "valid JSON",
        ),
        (
            '---\ntitle: "x"\nlayout: cache\ncategories: [package, develop]\nmeta: {}\nspec_details: {}\n---',
            "spec_details",
            "JSON list",
        ),
        (
            '---\ntitle: "x"\nlayout: post\ncategories: [package, develop]\nmeta: {}\nspec_details: []\n---',
            "layout",
            "expected 'cache'",
        ),
        ('---\ntitle: "x"\nlayout: cache\nmeta: {}\nspec_details: []\n---', "categories", "expected this field"),
        (
            '---\ntitle: "x"\nlayout: cache\ncategories: [package]\nmeta: {}\nspec_details: []\n---',
            "categories",
            "[package, <tag>]",
        ),
        (
            '---\ntitle: "../x"\nlayout: cache\ncategories: [package, develop]\nmeta: {}\nspec_details: []\n---',
            "title",
            "package name",
        ),
        (
            '---\ntitle: "x"\nlayout: cache\ncategories: [package, ../../etc]\nmeta: {}\nspec_details: []\n---',
            "categories",
            "tag name",
        ),
        # \a is an escape in YAML (a bell) but not in JSON: found by the property test
        (
            '---\ntitle: "\\a-0000"\nlayout: cache\ncategories: [package, develop]\nmeta: {}\nspec_details: []\n---',
            "title",
            "package name",
        ),
    ],
)
def test_bad_pages_name_file_field_and_expectation(tmp_path, text, field, expected):
    with pytest.raises(PageError) as raised:
        read_text(tmp_path, text)
    assert raised.value.field == field
    assert expected in raised.value.expected
    assert str(raised.value).startswith(str(tmp_path / "page.md") + f": {field}: ")


def test_invalid_utf8_is_named(tmp_path):
    text = page_text("bolt", "develop", [spec(1, os="ubuntuXX")]).encode().replace(b"XX", b"\xff")
    with pytest.raises(PageError, match="encoding: expected UTF-8 text"):
        read_text(tmp_path, text)


def test_old_per_package_layout_is_recognised(tmp_path):
    with pytest.raises(OldLayoutPage):
        read_text(tmp_path, "---\ntitle: bolt\ncategory: package\nlayout: package\nspec_files: [a, b]\n---\n")


def test_other_documents_in_folders_are_not_pages(tmp_path):
    with pytest.raises(NotACachePage):
        read_text(tmp_path, "---\nlayout: default\ntitle: Home\n---\n# Home\n", explicit=False, name="index.md")
    with pytest.raises(NotACachePage):
        read_text(tmp_path, "just some notes\n", explicit=False, name="notes.txt")


def test_page_in_the_wrong_folder_is_named(tmp_path):
    path = write_page(tmp_path, "bolt", "develop-2025-04-20", [spec(1)])
    target = tmp_path / "_cache" / "develop" / "bolt" / "specs.md"
    target.parent.mkdir(parents=True)
    path.rename(target)
    [source] = find_inputs([str(tmp_path)]).files
    with pytest.raises(PageError, match="categories: expected tag 'develop' as in the page's folder"):
        read_page(source, target.read_bytes())


def test_inputs_mix_files_folders_and_checkouts(tmp_path):
    write_page(tmp_path / "site", "bolt", "develop", [spec(1)])
    (tmp_path / "site" / "_data").mkdir()
    (tmp_path / "site" / "_data" / "tags.yaml").write_text("- name: develop\n  stacks: [root]\n")
    single = tmp_path / "one.txt"
    single.write_text(page_text("cli11", "v0.23.1", [spec(2)]))
    inputs = find_inputs([str(tmp_path / "site" / "_cache"), str(single)])
    assert [f.path for f in inputs.files] == [str(single), str(tmp_path / "site/_cache/develop/bolt/specs.md")]
    assert inputs.tags_yaml == [str(tmp_path / "site" / "_data" / "tags.yaml")]


def test_folders_that_are_links_inside_the_input_are_followed_once(tmp_path):
    site = tmp_path / "site"
    write_page(site / "store", "bolt", "develop", [spec(1)])
    (site / "_cache").mkdir()
    (site / "_cache" / "develop").symlink_to(site / "store" / "_cache" / "develop", target_is_directory=True)
    (site / "store" / "_cache" / "develop" / "bolt" / "loop").symlink_to(site, target_is_directory=True)  # back up
    inputs = find_inputs([str(site)])
    assert [f.path for f in inputs.files] == [str(site / "_cache" / "develop" / "bolt" / "specs.md")]
    assert inputs.problems == []


def test_folder_links_that_lead_out_of_the_input_are_not_followed(tmp_path):
    write_page(tmp_path / "mirror", "bolt", "develop", [spec(1)])
    site = tmp_path / "site" / "_cache"
    site.mkdir(parents=True)
    (site / "develop").symlink_to(tmp_path / "mirror" / "_cache" / "develop", target_is_directory=True)
    (site / "root").symlink_to("/", target_is_directory=True)
    inputs = find_inputs([str(site)])
    assert inputs.files == []
    assert [(p.path, p.field) for p in inputs.problems] == [
        (str(site / "develop"), "folder"),
        (str(site / "root"), "folder"),
    ]
    assert (
        inputs.problems[1].expected
        == f"expected a folder inside {site}, found a link to / (not followed: name it as an input to read it)"
    )


def _documents_read_twice(paths):
    """Each page's Document read with a fresh Configurations, then again once the build has seen every page: the
    second reading is the one most pages of a history get (their configurations and stacks seen before)."""
    sources = [SourceFile(str(path), True) for path in paths]
    pages = [read_page(source, open(source.path, "rb").read()) for source in sources]
    first = [page_document(page, Configurations()) for page in pages]
    warm = Configurations()
    for page in pages:
        page_document(page, warm)
    return first, [page_document(page, warm) for page in pages]


def test_a_page_whose_specs_the_build_has_seen_gives_the_document_it_gives_at_first():
    paths = sorted(Path(SAMPLES).glob("_cache/*/*/specs.md"))
    first, again = _documents_read_twice(paths)
    assert len(paths) > 20 and any(not document.sorted_keys for document in first)  # both page formats
    assert [_without_numbers(d) for d in again] == [_without_numbers(d) for d in first]


def _without_numbers(document):
    """A Document's binaries and facts, without the configuration numbers its Configurations gave."""
    return (
        document.tag,
        document.package,
        [(b.hash, b.built._replace(number=None), b.stacks, b.size, b.extra) for b in document.binaries],
        document.binaries_per_stack,
        document.meta_text,
        document.warnings,
    )


def test_specs_the_build_has_seen_are_not_checked_one_by_one_again(monkeypatch):
    """Page after page, a history's specs have configurations and stacks checked before: those are read without
    parse_spec, which checks a spec field by field."""
    from spack_cache_db.read import pages

    path = Path(SAMPLES) / "_cache/develop-2024-03-17/bolt/specs.md"  # hash-first, with tarball URLs
    page = read_page(SourceFile(str(path), True), path.read_bytes())
    configurations = Configurations()
    page_document(page, configurations)
    checked = []
    monkeypatch.setattr(pages, "parse_spec", lambda *arguments: checked.append(arguments) or None)
    again = page_document(page, configurations)
    assert checked == [] and len(again.binaries) == len(page.specs) > 1


@pytest.mark.parametrize(
    "change, field, expected",
    [
        (lambda specs: specs[1].update(hash=specs[1]["hash"].upper()), "spec_details[1].hash", "expected 32"),
        (lambda specs: specs[1].update(hash=specs[0]["hash"]), "spec_details[1].hash", "expected each hash once"),
        (lambda specs: specs[2].update(hash=7), "spec_details[2].hash", "expected non-empty text"),
        # two hashes in one, a space between: the page's hashes, joined, still look like one per spec
        (lambda specs: specs[1].update(hash=specs[1]["hash"] + " " + "a" * 32), "spec_details[1].hash", "expected 32"),
        (lambda specs: specs[1].pop("os"), "spec_details[1].os", "expected this field"),
        (lambda specs: specs.insert(1, ["not", "a", "spec"]), "spec_details[1]", "expected a JSON object"),
        (lambda specs: specs[2].update(size="12 bytes"), "spec_details[2].size", "expected '-' (unknown)"),
        (lambda specs: specs[1].update(stacks="root"), "spec_details[1].stacks", "expected a list"),
        (lambda specs: specs[1].update(variants="+mpi"), "spec_details[1].variants", "expected a list"),
    ],
)
def test_a_wrong_spec_among_specs_the_build_has_seen_is_named_as_at_first(tmp_path, change, field, expected):
    specs = [spec(n) for n in range(4)]
    configurations = Configurations()
    page_document(read_text(tmp_path, page_text("bolt", "develop", specs)), configurations)
    specs = [dict(sorted(entry.items())) for entry in sorted(specs, key=lambda entry: entry["hash"])]
    change(specs)
    text = (
        page_text("bolt", "develop", [specs[0]]).split("spec_details: ")[0] + f"spec_details: {json.dumps(specs)}\n---"
    )
    page = read_text(tmp_path, text)
    with pytest.raises(PageError) as seen:
        page_document(page, configurations)
    with pytest.raises(PageError) as at_first:
        page_document(page, Configurations())
    assert str(seen.value) == str(at_first.value)
    assert (seen.value.field, seen.value.expected[: len(expected)]) == (field, expected)
