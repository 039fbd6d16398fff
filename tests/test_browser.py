"""What a person sees: a real datasette server started as the README says, driven by Debian's headless
Chromium through Playwright, for the six questions of issue 16, what links against a library (from a tag's
build-cache index, page after page) and the charts.

Each test starts from the index page and clicks, types and picks as a person would. Screenshots of each
end state go to tests/artifacts/. Nothing is downloaded: Playwright launches /usr/bin/chromium.
"""

import json
import os
import re
import sqlite3
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from datasette_server import PY_NUMPY_STACKS, build_with_py_numpy, datasette, readme_command
from paths import METADATA_YML, SEEDS, SITE

from spack_cache_db.web import describe

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WINDOW = {"width": 1366, "height": 900}  # the window the main questions must fit
SNAPSHOT = "develop-2025-04-20"
DASHBOARDS = describe.build_metadata()["plugins"]["datasette-dashboards"]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
)


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    return build_with_py_numpy([SITE, SEEDS], tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def server(db_path):
    with datasette(*readme_command(db_path, METADATA_YML)) as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport=WINDOW, base_url=server)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    page = context.new_page()
    page.set_default_timeout(15000)
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    context.close()


def screenshot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def cells(page, column):
    return [text.strip() for text in page.locator(f"table.spack-rows tbody td.col-{column}").all_inner_texts()]


def fits_the_window(page):
    """Neither the page nor any table scrolls sideways."""
    widths = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth,"
        " ...[...document.querySelectorAll('.table-wrapper')].map(e => e.scrollWidth - e.clientWidth)]"
    )
    return widths[0] <= widths[1] and all(extra <= 0 for extra in widths[2:])


def ask(page, question):
    """From the index page, follow the link of a question."""
    page.goto("/")
    page.locator(".spack-questions a", has_text=question).first.click()
    page.wait_for_load_state()
    assert page.locator("h1").inner_text().strip() == question


def answer(page, button):
    with page.expect_navigation():
        page.get_by_role("button", name=button).click()


def query_json(server, name, **params):
    url = f"{server}/cache/{name}.json?" + urllib.parse.urlencode({**params, "_shape": "objects"})
    with urllib.request.urlopen(url) as response:
        return json.load(response)["rows"]


def test_a_hdf5_mpi_binary_for_ubuntu24_that_runs_on_zen3_and_its_install_command(page, server, db_path):
    ask(page, "Find binaries")
    assert page.get_by_role("button", name="Run SQL").count() == 0
    page.fill("#field-package", "hdf5")
    page.fill("#field-variant", "+mpi")
    page.select_option("#field-os", "ubuntu24.04")
    page.select_option("#field-host", "zen3")
    page.select_option("#field-tag", SNAPSHOT)
    answer(page, "Find binaries")

    expected = sqlite3.connect(db_path).execute(
        "SELECT hash, spec FROM binaries WHERE package = 'hdf5' AND tag = ? AND os = 'ubuntu24.04'"
        " AND variants LIKE '%\"+mpi\"%' AND target IN (SELECT target FROM runs_on WHERE host = 'zen3')",
        [SNAPSHOT],
    )
    specs = dict(expected.fetchall())
    assert len(specs) == 3
    assert page.locator("h2.spack-found").inner_text() == f"3 binaries of hdf5 in {SNAPSHOT}"
    assert dict(zip(cells(page, "hash"), cells(page, "spec"), strict=True)) == specs
    assert "Custom SQL query" not in page.content()

    first = page.locator("table.spack-rows tbody tr").first
    first.locator(".spack-install summary").click()
    commands = first.locator(".spack-install pre").inner_text()
    spec_hash = first.locator("td.col-hash").inner_text().strip()
    assert commands.splitlines() == [
        f"spack mirror add {SNAPSHOT} https://binaries.spack.io/{SNAPSHOT}",
        "spack buildcache keys --install --trust",
        f"spack install --use-buildcache only /{spec_hash}",
    ]
    first.get_by_role("button", name="Copy").click()
    first.get_by_role("button", name="Copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == commands
    assert first.locator(".spack-install pre").is_visible(), "copying leaves the commands shown"
    assert fits_the_window(page)
    screenshot(page, "a-find-binaries-hdf5-mpi-ubuntu24-zen3")
    assert page.errors == []


def test_b_which_tags_carry_bolt_and_which_versions_newest_first(page, server):
    ask(page, "A package")
    page.fill("#field-package", "bolt")
    answer(page, "Show the package")
    assert page.locator("h1").inner_text().strip() == "bolt"

    cells_by_tag = query_json(server, "package", package="bolt")
    matrix = page.locator("table.spack-matrix")
    headers = matrix.locator("thead th").all_inner_texts()
    releases = [row["tag"] for row in cells_by_tag if row["kind"] == "release"]
    assert headers == ["version", "develop", *dict.fromkeys(releases), "weekly snapshots"]
    versions = matrix.locator("tbody th").all_inner_texts()
    assert versions == list(dict.fromkeys(row["version"] for row in cells_by_tag))
    snapshots = sorted(row["snapshot_date"] for row in cells_by_tag if row["kind"] == "snapshot")
    assert (
        matrix.locator("tbody td").last.inner_text() == f"{len(snapshots)} snapshots: {snapshots[0]} to {snapshots[-1]}"
    )
    develop = next(row["binaries"] for row in cells_by_tag if row["tag"] == "develop")
    assert matrix.locator("tbody tr").first.locator("td").first.inner_text() == str(develop)

    # The count of a release leads to its binaries, listed below on the same page.
    matrix.get_by_role(
        "link", name=str(next(row["binaries"] for row in cells_by_tag if row["tag"] == "v0.22.0"))
    ).click()
    page.wait_for_url("**tag=v0.22.0**")
    assert page.locator("#filter-tag").input_value() == "v0.22.0"
    assert len(cells(page, "hash")) == next(row["binaries"] for row in cells_by_tag if row["tag"] == "v0.22.0")
    assert fits_the_window(page)
    screenshot(page, "b-package-bolt")
    assert page.errors == []


def test_c_what_changed_for_mpich_between_two_snapshots(page, server):
    ask(page, "Differences between two tags")
    page.select_option("#field-from_tag", "develop-2025-03-23")
    page.select_option("#field-to_tag", SNAPSHOT)
    page.fill("#field-package", "mpich")
    answer(page, "Compare the tags")
    expected = query_json(server, "tag_diff", from_tag="develop-2025-03-23", to_tag=SNAPSHOT, package="mpich")
    assert expected
    assert cells(page, "version") == [row["version"] for row in expected]
    assert cells(page, "change") == [row["change"] for row in expected]
    assert "configurations changed" in cells(page, "change")
    assert page.locator("#field-from_tag").input_value() == "develop-2025-03-23"
    assert fits_the_window(page)
    screenshot(page, "c-tag-diff-mpich")
    assert page.errors == []


def test_d_what_a_hash_prefix_refers_to(page, db_path):
    (spec_hash, package, tags) = (
        sqlite3.connect(db_path)
        .execute("SELECT hash, package, count(*) FROM binaries GROUP BY hash HAVING count(*) > 1 ORDER BY hash LIMIT 1")
        .fetchone()
    )
    ask(page, "Look up a hash")
    page.fill("#field-hash", "/" + spec_hash[:6])
    answer(page, "Look it up")
    assert cells(page, "hash") == [spec_hash]
    assert cells(page, "package") == [package]
    assert len(page.locator("td.col-tags li").all()) == tags
    page.locator("td.col-package a").click()
    page.wait_for_url(f"**/cache/package?package={package}")
    assert page.locator("h1").inner_text().strip() == package
    screenshot(page, "d-hash-lookup-then-package")

    page.goto("/cache/hash_lookup?hash=abc")
    assert "Give at least 4 characters of the hash" in page.locator(".spack-said").inner_text()
    assert page.errors == []


def test_e_which_stacks_built_py_numpy_in_one_snapshot_and_how_many_binaries_each(page):
    ask(page, "Stacks of a tag")
    page.select_option("#field-tag", SNAPSHOT)
    page.fill("#field-package", "py-numpy")
    answer(page, "Show the stacks")
    shown = dict(zip(cells(page, "stack"), map(int, cells(page, "specs")), strict=True))
    assert shown == {"root": sum(PY_NUMPY_STACKS.values()), **PY_NUMPY_STACKS}
    assert page.locator("h2.spack-found").inner_text() == f"4 stacks in {SNAPSHOT}"
    assert fits_the_window(page)
    screenshot(page, "e-stacks-of-py-numpy")
    assert page.errors == []


def test_f_a_full_text_search_for_two_words(page, server):
    ask(page, "Search binaries")
    page.fill("#field-q", "hdf5 neoverse_v2")
    page.select_option("#field-tag", SNAPSHOT)
    answer(page, "Search")
    expected = query_json(server, "search_specs", q="hdf5 neoverse_v2", tag=SNAPSHOT)
    assert expected and len(cells(page, "spec")) == len(expected)
    assert all(spec.startswith("hdf5@") and "-neoverse_v2" in spec for spec in cells(page, "spec"))
    assert page.locator("#field-q").input_value() == "hdf5 neoverse_v2"
    assert fits_the_window(page)
    screenshot(page, "f-search-hdf5-neoverse_v2")
    assert page.errors == []


def test_g_binaries_of_a_spec_written_as_spack_takes_it(page, server):
    spec = "hdf5@1.14 +mpi target=:zen3 %gcc"
    ask(page, "Find binaries")
    page.fill("#field-spec", spec)
    page.select_option("#field-platform", "linux")
    page.select_option("#field-stack", "root")
    page.select_option("#field-tag", SNAPSHOT)
    answer(page, "Find binaries")
    expected = query_json(server, "find_binaries", spec=spec, platform="linux", stack="root", tag=SNAPSHOT)
    assert expected and len(expected) < len(query_json(server, "find_binaries", package="hdf5", tag=SNAPSHOT))
    assert cells(page, "hash") == [row["hash"] for row in expected]
    assert all(
        row["spec"].startswith("hdf5@1.14.") and "+mpi" in row["spec"] and "%gcc@" in row["spec"] for row in expected
    )
    assert {row["target"] for row in expected} <= {"x86_64", "x86_64_v2", "x86_64_v3", "zen3"}
    assert page.locator("td.col-compiler").count() == 0, "what the spec shows is left to JSON and CSV"
    assert page.locator("#field-spec").input_value() == spec
    assert fits_the_window(page)
    screenshot(page, "g-find-binaries-by-spec")

    page.fill("#field-spec", "hdf5@1.14 %")
    answer(page, "Find binaries")
    assert page.locator(".spack-said").inner_text() == (
        "The spec does not parse: hdf5@1.14 %: expected a compiler name after '%' (column 11)."
    )
    assert page.locator("table.spack-rows").count() == 0
    assert page.errors == []


def test_an_unknown_package_gets_a_sentence_with_a_close_match(page):
    ask(page, "Find binaries")
    page.fill("#field-package", "hdf")
    answer(page, "Find binaries")
    said = page.locator(".spack-said")
    assert said.inner_text() == "No package here is called “hdf”. Did you mean hdf5?"
    said.get_by_role("link", name="hdf5").click()
    page.wait_for_load_state()
    # hdf5 is in a snapshot only: the default tag (develop) says so, and names the tag that has it.
    assert page.locator(".spack-said").inner_text() == (
        f"develop, the default tag, has no binaries of hdf5. The tags that have them: {SNAPSHOT} (46)."
    )
    page.locator(".spack-said").get_by_role("link", name=SNAPSHOT).click()
    page.wait_for_load_state()
    assert page.locator("h2.spack-found").inner_text() == f"46 binaries of hdf5 in {SNAPSHOT}"
    screenshot(page, "unknown-package-then-its-tag")


def chart_view(page, dashboard, chart, rows):
    """The Vega view of a dashboard chart over rows, as the dashboards plugin draws it."""
    display = DASHBOARDS[dashboard]["charts"][chart]["display"]
    return page.evaluate(
        """async ([display, rows]) => {
            const spec = vegaLite.compile({...display, data: {values: rows}}).spec;
            const view = new vega.View(vega.parse(spec), {renderer: 'none'});
            await view.runAsync();
            const drawn = spec.data.map(data => view.data(data.name)).find(rows => rows.length && 'stretch' in rows[0]);
            return {
                x: view.scale('x').domain().map(String),
                drawn: (drawn || []).map(row => ({
                    stretch: row.stretch, snapshot_date: new Date(row.snapshot_date).toISOString().slice(0, 10),
                })),
            };
        }""",
        [display, rows],
    )


def test_the_package_page_draws_the_history_charts(page, server):
    page.goto("/cache/package?package=bolt")
    for chart in ("specs-over-time", "versions-by-tag"):
        drawing = page.locator(f"#chart-{chart} canvas, #chart-{chart} svg").first
        drawing.wait_for(state="visible")
        box = drawing.bounding_box()
        assert box["width"] > 100 and box["height"] > 50, chart
    screenshot(page, "package-bolt-history")
    assert page.errors == []


def test_the_heatmap_orders_tags_as_the_tags_table_does(page, server):
    page.goto("/-/dashboards/package-history?package=bolt")
    page.locator("#chart-versions-by-tag canvas, #chart-versions-by-tag svg").first.wait_for(state="visible")
    rows = query_json(server, "version_tag_specs", package="bolt")
    in_order = [row["tag"] for row in sorted(rows, key=lambda row: row["tag_order"])]
    assert chart_view(page, "package-history", "versions-by-tag", rows)["x"] == list(dict.fromkeys(in_order))
    screenshot(page, "dashboard-package-history-bolt")
    assert page.errors == []


def test_the_snapshot_line_breaks_where_weeks_have_no_snapshot(page, server):
    page.goto("/-/dashboards/package-history?package=bolt")
    page.locator("#chart-specs-over-time canvas, #chart-specs-over-time svg").first.wait_for(state="visible")
    rows = query_json(server, "specs_per_tag", package="bolt")
    state = chart_view(page, "package-history", "specs-over-time", rows)
    stretches = {}
    for row in state["drawn"]:
        stretches.setdefault(row["stretch"], []).append(row["snapshot_date"])
    # The samples' snapshots: 2024-03-17, then 2025-03-23 and -30, then 2025-04-20 and -27.
    assert sorted(map(sorted, stretches.values())) == [
        ["2024-03-17"],
        ["2025-03-23", "2025-03-30"],
        ["2025-04-20", "2025-04-27"],
    ]


def test_tag_overview_dashboard_draws_specs_per_stack(page):
    page.goto(f"/-/dashboards/tag-overview?tag={SNAPSHOT}")
    for chart in ("specs-per-stack", "os-by-target", "compilers"):
        drawing = page.locator(f"#chart-{chart} canvas, #chart-{chart} svg").first
        drawing.wait_for(state="visible")
        assert drawing.bounding_box()["width"] > 100, chart
    screenshot(page, "dashboard-tag-overview")
    assert page.errors == []


def test_the_binaries_view_from_the_index_fits_the_window_and_searches(page):
    page.goto("/")
    page.locator(".spack-questions a", has_text="Browse every binary").click()
    page.wait_for_load_state()
    page.locator("a", has_text=re.compile(r"^develop$")).first.click()  # the tag facet
    page.wait_for_url("**tag=develop**")
    page.fill("input[name=_search]", "neoverse_v2")
    page.locator("input[name=_search]").press("Enter")
    page.wait_for_url("**_search=neoverse_v2*")
    specs = page.locator("table.rows-and-columns tbody td.col-spec").all_inner_texts()
    assert specs and all("-neoverse_v2" in spec for spec in specs)
    assert fits_the_window(page)
    screenshot(page, "binaries-search")
    assert page.errors == []


def test_every_question_and_the_index_fit_the_window(page):
    page.goto("/")
    assert fits_the_window(page)
    screenshot(page, "index")
    for name, query in describe.build_metadata()["databases"]["cache"]["queries"].items():
        page.goto(f"/cache/{name}?package=bolt" if "package" in query["params"] else f"/cache/{name}")
        assert fits_the_window(page), name
    page.goto("/cache")
    assert fits_the_window(page)
    screenshot(page, "database")
    assert page.errors == []


@pytest.fixture(scope="module")
def index_server(tmp_path_factory):
    """The README's command serving a tag built from its build-cache index: dense-lib is linked against by
    3,300 of its 6,600 binaries (test_dependents' shaped tag)."""
    from test_dependents import build_tags, shaped_tag

    db = build_tags(tmp_path_factory.mktemp("index"), {"develop": shaped_tag()})
    with datasette(*readme_command(db, METADATA_YML)) as base:
        yield base


def test_h_which_binaries_link_against_a_library_and_the_ones_after_them(browser, index_server):
    context = browser.new_context(viewport=WINDOW, base_url=index_server)
    page = context.new_page()
    page.set_default_timeout(15000)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    ask(page, "Binaries that link against a library")
    page.fill("#field-package", "dense-lib")
    answer(page, "Find the binaries that link against it")
    first = query_json(index_server, "dependents", package="dense-lib")
    heading = page.locator("h2.spack-found").inner_text()
    assert heading == f"{len(first)} binaries of aa-app in develop: the first {len(first)}"
    assert cells(page, "hash") == [row["hash"] for row in first]
    screenshot(page, "h-dependents-dense-lib")

    with page.expect_navigation():
        page.get_by_role("link", name="The binaries after these →").click()
    after = first[-1]["hash"]
    assert page.locator("h2.spack-found").inner_text() == f"{heading} after {after}"
    assert page.locator("#field-after").count() == 0  # asked anew, a question starts from the start
    assert page.input_value("#field-package") == "dense-lib"
    assert cells(page, "hash") == [
        row["hash"] for row in query_json(index_server, "dependents", package="dense-lib", after=after)
    ]
    assert not set(cells(page, "hash")) & {row["hash"] for row in first}
    assert fits_the_window(page)
    answer(page, "Find the binaries that link against it")
    assert page.locator("h2.spack-found").inner_text() == heading
    assert errors == []
    context.close()
