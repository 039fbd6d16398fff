"""The pages of issue 21 as people meet them: the dependency tree (its toggles are links, so it works without
JavaScript), the spec diff, the package page's "only what differs" and the package list with counts,
served by Datasette with the plugin's start-up; crawled link by link; driven in Chromium."""

import json
import re
import sqlite3
import urllib.parse
from html import unescape

import pytest
from datasette.app import Datasette
from datasette_server import datasette, readme_command
from mirrors import edited, sample_index, write_v2
from paths import METADATA_YML
from test_browser import CHROMIUM, browser, fits_the_window, screenshot  # noqa: F401 (browser: a fixture)
from test_crawl import assert_every_page_answers
from test_indexes import GCC_EXTERNAL, GCC_RUNTIME, LIBDWARF_CORE2, LIBDWARF_M1, LIBELF_M1, WRAPPER

from spack_cache_db.build import build

needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing")


async def client(db_path):
    ds = Datasette(immutables=[str(db_path)])
    await ds.invoke_startup()
    return ds.client


async def html(db_path, path):
    response = await (await client(db_path)).get(path)
    assert response.status_code == 200, (path, response.status_code)
    return response.text


def links(text):
    return [unescape(href) for href in re.findall(r'<a [^>]*href="([^"]*)"', text)]


def link_named(text, name):
    """The address of the link whose text is name."""
    found = [
        unescape(href)
        for href, inner in re.findall(r'<a [^>]*href="([^"]*)"[^>]*>(.*?)</a>', text, re.S)
        if name in inner
    ]
    assert found, name
    return found[0]


def tree_items(text):
    return re.findall(
        r"<li class=\"spack-(node|repeat)\"[^>]*>(.*?)</li>", text.split('<ol class="spack-tree">', 1)[1], re.S
    )


@pytest.mark.asyncio
async def test_the_tree_page_toggles_by_links_and_refers_back_to_shared_subtrees(index_db):
    page = await html(index_db, f"/cache/-/dependencies?hash={LIBDWARF_M1[:6]}")
    items = tree_items(page)
    assert [kind for kind, _ in items] == ["node", "node", "node", "repeat"]
    assert "compiler-wrapper" not in page.split('<ol class="spack-tree">', 1)[1]
    assert "2 build-only dependencies are not shown." in re.sub(r"\s+", " ", page)
    # The repeated gcc-runtime refers to the line where it is expanded.
    assert f'href="#spec-{GCC_RUNTIME}"' in items[3][1] and "↑ shown above" in items[3][1]
    assert page.count(f'id="spec-{GCC_RUNTIME}"') == 1
    # The toggles are plain links that reload with their argument.
    with_build = link_named(page, "hide build deps")
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(with_build).query) == {"hash": [LIBDWARF_M1[:6]], "build": ["1"]}
    page = await html(index_db, with_build)
    items = tree_items(page)
    assert len(items) == 9 and "only to build" in items[1][1] and "compiler-wrapper" in items[1][1]
    assert re.search(r'spack-status-external">external</span>.*?>gcc</a>', items[2][1])
    flat = await html(index_db, link_named(page, "flatten &amp; deduplicate"))
    rows = re.findall(r'<tr id="spec-([a-z2-7]{32})"', flat)
    assert rows == [LIBDWARF_M1, WRAPPER, GCC_EXTERNAL, GCC_RUNTIME, LIBELF_M1]
    assert "<script" not in flat.split('<section class="content">', 1)[1].split("</section>", 1)[0]


@pytest.mark.asyncio
async def test_the_tree_page_says_what_was_wrong(index_db):
    c = await client(index_db)
    short = await c.get("/cache/-/dependencies?hash=u5u")
    assert short.status_code == 400 and "expected 4 to 32 characters" in short.text
    unknown = await c.get("/cache/-/dependencies?hash=aaaa")
    assert unknown.status_code == 404 and "no spec&#39;s hash starts with &#39;aaaa&#39;" in unknown.text
    assert (await c.get("/cache/-/dependencies.json")).json() == {
        "error": "hash: expected a hash, or its first 4 or more characters"
    }
    assert (await c.get("/nothing/-/dependencies?hash=u5uz")).status_code == 404


@pytest.mark.asyncio
async def test_the_questions_and_the_package_page_lead_to_the_tree_and_the_diff(index_db):
    question = await html(index_db, f"/cache/dependency_tree?hash={LIBDWARF_M1}")
    assert link_named(question, "See it as a tree") == f"/cache/-/dependencies?hash={LIBDWARF_M1}"
    lookup = await html(index_db, f"/cache/hash_lookup?hash={LIBDWARF_M1[:5]}")
    assert link_named(lookup, "its dependency tree") == f"/cache/-/dependencies?hash={LIBDWARF_M1}"
    assert re.search(rf'<form [^>]*action="/cache/-/diff"[^>]*>.*?value="{LIBDWARF_M1}"', lookup, re.S)
    package = await html(index_db, "/cache/package?package=libdwarf")
    assert (
        link_named(package, "everything the first binary needs")
        == f"/cache/-/dependencies?hash={LIBDWARF_CORE2}&tag=develop"
    )
    assert re.search(r'<form class="spack-compare" action="/cache/-/diff"', package)
    assert re.findall(r'<input type="checkbox" name="hash" value="([a-z2-7]+)"', package) == [
        LIBDWARF_CORE2,
        LIBDWARF_M1,
    ]


@pytest.mark.asyncio
async def test_the_diff_page_marks_what_differs(index_db):
    page = await html(index_db, f"/cache/-/diff?hash={LIBDWARF_M1[:5]}&hash={LIBDWARF_CORE2[:5]}")
    differs = re.findall(r'<tr class="spack-(\w+) spack-differs">', page) + re.findall(
        r'<tr class="spack-field-(\w+) spack-differs">', page
    )
    assert sorted(differs) == ["tags", "target"]
    assert "hash changed" in page and 'href="/cache/-/diff.json?hash=' in page
    one = await html(index_db, f"/cache/-/diff?hash={LIBDWARF_M1}")
    assert re.findall(r'name="hash" value="([^"]*)"', one) == [LIBDWARF_M1, ""]


@pytest.mark.asyncio
async def test_the_package_page_shows_only_what_differs_between_the_binaries_listed(cache_db):
    page = await html(cache_db, "/cache/package?package=bolt&tag=develop")
    assert link_named(page, "only what differs") == "/cache/package?package=bolt&tag=develop&differences=1#binaries"
    conn = sqlite3.connect(cache_db)
    conn.row_factory = sqlite3.Row
    binaries = conn.execute(
        "SELECT version, compiler, os, platform, target, stacks, variants FROM binaries WHERE package = 'bolt' AND tag = 'develop'"
    ).fetchall()
    parts = ("version", "compiler", "os", "platform", "target", "stacks")
    varying = [name for name in parts if len({row[name] for row in binaries}) > 1]
    shared = set.intersection(*(set(json.loads(row["variants"])) for row in binaries))
    some_own = any(set(json.loads(row["variants"])) - shared for row in binaries)
    assert len(varying) >= 2
    page = await html(cache_db, "/cache/package?package=bolt&tag=develop&differences=1")
    binaries_table = page.split('<form class="spack-compare"', 1)[1]
    headings = re.findall(r'<th class="col-([\w-]+)" scope="col">', binaries_table)
    assert headings == ["compare", "hash", *varying, *["variants"] * some_own, "install"]
    common = re.search(r'<dl class="spack-common">(.*?)</dl>', page, re.S).group(1)
    assert re.findall(r"<dt>(\w+)</dt>", common) == [name for name in parts if name not in varying] + ["variants"]
    assert sorted(re.findall(r"<code>([^<]+)</code>", common.split("<dt>variants</dt>", 1)[1])) == sorted(shared)


@pytest.mark.asyncio
async def test_the_package_list_counts_binaries_and_sets_dependencies_apart(cache_db, index_db):
    listed = json.loads(await html(cache_db, "/cache/-/packages.json"))
    conn = sqlite3.connect(cache_db)
    in_all = dict(conn.execute("SELECT package, count(*) FROM binaries GROUP BY package"))
    in_develop = dict(conn.execute("SELECT package, count(*) FROM binaries WHERE tag = 'develop' GROUP BY package"))
    tags = dict(conn.execute("SELECT package, count(DISTINCT tag) FROM binaries GROUP BY package"))
    assert listed["tag"] == "develop" and listed["dependencies_only"] == []
    assert listed["packages"] == [
        {"package": name, "binaries_in_tag": in_develop.get(name, 0), "binaries": in_all[name], "tags": tags[name]}
        for name in sorted(in_all)
    ]
    by_binaries = json.loads(await html(cache_db, "/cache/-/packages.json?sort=binaries&name=b"))
    assert [row["package"] for row in by_binaries["packages"]] == sorted(
        (name for name in in_all if "b" in name), key=lambda name: (-in_all[name], name)
    )
    page = await html(index_db, "/cache/-/packages")
    apart = page.split('<h2 id="dependencies-only">', 1)[1]
    assert re.findall(r"<li><a [^>]*>([^<]+)</a></li>", apart) == ["gcc"]
    assert link_named(apart, "gcc") == "/cache/dependents?package=gcc&tag=develop"
    assert "gcc</a>" not in page.split('<h2 id="dependencies-only">', 1)[0].split("spack-package-counts", 1)[1]
    index = await html(index_db, "/")
    assert link_named(index, "The package list, with each one") == "/cache/-/packages"


@pytest.mark.asyncio
async def test_forms_offer_only_the_compilers_that_built_a_binary(tmp_path):
    """libelf, made a dependency only, built with a gcc no binary was built with."""

    def libelf_only_a_dependency(database):
        record = database["installs"]["rqh2vuf6fqwkmipzgi2wjx352mq7y7ez"]
        record["in_buildcache"] = False
        record["spec"]["compiler"]["version"] = "9.9.9"

    write_v2(tmp_path / "mirror", edited(sample_index("7"), libelf_only_a_dependency))
    build([f"develop={tmp_path / 'mirror'}"], tmp_path / "cache.db")
    compilers = [row[0] for row in sqlite3.connect(tmp_path / "cache.db").execute("SELECT label FROM compilers")]
    assert sorted(compilers) == ["gcc@10.2.1", "gcc@9.9.9"]
    form = await html(tmp_path / "cache.db", "/cache/find_binaries")
    assert re.findall(
        r'<option value="([^"]+)">', form.split('id="choices-compiler"', 1)[1].split("</datalist>", 1)[0]
    ) == ["gcc@10.2.1"]
    package = await html(tmp_path / "cache.db", "/cache/package?package=libdwarf")
    select = package.split('id="filter-compiler"', 1)[1].split("</select>", 1)[0]
    assert "gcc@9.9.9" not in select and "gcc@10.2.1" in select


@pytest.fixture(scope="module")
def server(index_db):
    with datasette(*readme_command(index_db, METADATA_YML)) as base:
        yield base


def test_every_link_of_the_new_pages_answers(server):
    for start in (
        f"/cache/-/dependencies?hash={LIBDWARF_M1}&build=1",
        f"/cache/-/dependencies?hash={LIBDWARF_M1}&flat=1",
        f"/cache/-/diff?hash={LIBDWARF_M1}&hash={LIBDWARF_CORE2}",
        "/cache/-/packages",
        "/cache/package?package=libdwarf&differences=1",
    ):
        found = assert_every_page_answers([server], depth=2, start=start)
        assert len(found) > 10, start


@pytest.fixture
def no_script_page(browser, server):  # noqa: F811 (browser: the fixture imported above)
    """A page in a browser with JavaScript turned off."""
    context = browser.new_context(viewport={"width": 1366, "height": 900}, base_url=server, java_script_enabled=False)
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()


@pytest.fixture
def page(browser, server):  # noqa: F811
    context = browser.new_context(viewport={"width": 1366, "height": 900}, base_url=server)
    page = context.new_page()
    page.set_default_timeout(15000)
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    context.close()


@needs_chromium
def test_a_hash_lookup_leads_to_its_tree_which_shows_build_deps_and_flattens_without_javascript(no_script_page):
    page = no_script_page
    page.goto("/")
    page.locator(".spack-questions a", has_text="Look up a hash").click()
    page.fill("#field-hash", "/" + LIBDWARF_M1[:6])
    with page.expect_navigation():
        page.get_by_role("button", name="Look it up").click()
    page.get_by_role("link", name="its dependency tree").click()
    page.wait_for_url("**/cache/-/dependencies?hash=*")
    tree = page.locator("ol.spack-tree")
    assert tree.locator("li").count() == 4
    assert tree.get_by_text("compiler-wrapper").count() == 0
    page.get_by_role("link", name="hide build deps").click()
    page.wait_for_url("**build=1**")
    assert tree.locator("li").count() == 9
    assert tree.locator("li.spack-node", has_text="compiler-wrapper").locator(".spack-chip").all_inner_texts() == [
        "build",
        "only to build",
    ]
    gcc = tree.locator("li.spack-node").filter(has=page.get_by_role("link", name="gcc", exact=True))
    assert gcc.locator(".spack-virtual").all_inner_texts() == ["c", "cxx"]
    tree.locator("li.spack-repeat", has_text="gcc-runtime").get_by_role("link").click()
    assert page.url.endswith(f"#spec-{GCC_RUNTIME}")
    screenshot(page, "tree-libdwarf-with-build-deps")
    page.get_by_role("link", name="flatten & deduplicate").click()
    page.wait_for_url("**flat=1**")
    hashes = page.locator("table.spack-flat tbody td.col-hash").all_inner_texts()
    assert hashes == [spec_hash[:7] for spec_hash in (LIBDWARF_M1, WRAPPER, GCC_EXTERNAL, GCC_RUNTIME, LIBELF_M1)]
    assert fits_the_window(page)
    screenshot(page, "tree-libdwarf-flat")


@needs_chromium
def test_two_binaries_of_a_package_ticked_and_compared(page):
    page.goto("/cache/package?package=libdwarf")
    page.get_by_role("link", name="only what differs").click()
    page.wait_for_url("**differences=1**")
    table = page.locator("form.spack-compare table")
    assert table.locator("thead th").all_inner_texts() == ["compare", "hash", "target", "install"]
    for spec_hash in (LIBDWARF_CORE2, LIBDWARF_M1):
        page.get_by_label(f"compare {spec_hash}").check()
    with page.expect_navigation():
        page.get_by_role("button", name="Compare the two ticked").click()
    assert "/cache/-/diff?" in page.url
    target = page.locator("table.spack-diff tr.spack-differs", has_text="target")
    assert target.locator("td").all_inner_texts() == ["core2", "m1"]
    assert page.locator("table.spack-dependency-changes tbody tr").count() == 4
    assert fits_the_window(page)
    screenshot(page, "diff-libdwarf-core2-m1")
    page.goto(f"/cache/hash_lookup?hash={LIBDWARF_M1[:6]}")
    page.get_by_label("compare it with").fill(LIBDWARF_CORE2[:6])
    with page.expect_navigation():
        page.get_by_role("button", name="Compare").click()
    assert page.locator("table.spack-diff tr.spack-differs", has_text="target").locator("td").all_inner_texts() == [
        "m1",
        "core2",
    ]
    assert page.errors == []
