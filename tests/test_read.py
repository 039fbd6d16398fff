import json

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
