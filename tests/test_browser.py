"""What a person sees: a real datasette server, driven by Debian's headless Chromium through Playwright.

Screenshots go to tests/artifacts/. Nothing is downloaded: Playwright launches /usr/bin/chromium.
"""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from paths import METADATA_YML

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

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(url, process, deadline_seconds=30):
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"datasette exited with {process.returncode}: {process.stderr.read().decode()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"datasette did not answer {url} within {deadline_seconds} s")


@pytest.fixture(scope="module")
def server(cache_db):
    """The documented command: datasette -i cache.db -m metadata.yml --setting suggest_facets off."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "datasette",
        "serve",
        "-i",
        str(cache_db),
        "-m",
        str(METADATA_YML),
        "--setting",
        "suggest_facets",
        "off",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(base + "/-/versions.json", process)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15000)
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    context.close()


def screenshot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def result_column(page, column):
    return page.locator(f"table.rows-and-columns tbody td.col-{column}").all_inner_texts()


def test_find_binaries_through_its_form_then_follow_the_package_link(server, page):
    page.goto(server + "/")
    assert page.locator("h1").inner_text() == "Spack binary build cache"
    screenshot(page, "1-index")

    page.get_by_role("link", name="Find binaries").click()
    page.wait_for_url("**/cache/find_binaries")
    page.fill("input[name=package]", "hdf5")
    page.fill("input[name=tag]", "develop-2025-04-20")
    page.fill("input[name=variant]", "+mpi")
    page.click("input[type=submit][value='Run SQL']")
    page.wait_for_url("**/cache/find_binaries?*package=hdf5*")
    screenshot(page, "2-find-binaries-hdf5")
    assert "returning 42 rows" in page.locator("h3").first.inner_text()
    specs = result_column(page, "spec")
    assert len(specs) == 42 and all(spec.startswith("hdf5@") and "+mpi" in spec for spec in specs)
    assert result_column(page, "install")[0].startswith(
        "spack mirror add develop-2025-04-20 https://binaries.spack.io/"
    )

    page.locator("td.col-links a", has_text="versions").first.click()
    page.wait_for_url("**/cache/package_versions?package=hdf5")
    screenshot(page, "3-package-versions-hdf5")
    assert page.locator("h1").inner_text() == "Versions of a package across tags"
    assert result_column(page, "version") == ["1.14.6", "1.12.3", "1.8.23"]
    assert result_column(page, "newest_tag") == ["develop-2025-04-20"] * 3
    assert page.errors == []


def chart_drawn(page, chart):
    """vega-embed draws into a canvas (or an svg) inside the chart's card; wait until it has a size."""
    drawing = page.locator(f"#chart-{chart} canvas, #chart-{chart} svg").first
    drawing.wait_for(state="visible")
    box = drawing.bounding_box()
    return box is not None and box["width"] > 100 and box["height"] > 50


def test_package_history_dashboard_draws_specs_per_tag_over_time(server, page):
    page.goto(server + "/-/dashboards/package-history?package=bolt")
    for chart in ("specs-over-time", "specs-per-release", "versions-by-tag"):
        assert chart_drawn(page, chart), chart
    screenshot(page, "4-dashboard-package-history-bolt")
    assert page.locator("#package").input_value() == "bolt"
    assert page.errors == []


def test_tag_overview_dashboard_draws_specs_per_stack(server, page):
    page.goto(server + "/-/dashboards/tag-overview?tag=develop-2025-04-20")
    for chart in ("specs-per-stack", "os-by-target", "compilers"):
        assert chart_drawn(page, chart), chart
    screenshot(page, "5-dashboard-tag-overview")
    assert page.errors == []


def test_binaries_view_has_a_search_box_that_searches(server, page):
    page.goto(server + "/cache/binaries?tag=develop")
    page.fill("input[name=_search]", "neoverse_v2")
    page.locator("input[name=_search]").press("Enter")
    page.wait_for_url("**_search=neoverse_v2*")
    screenshot(page, "6-binaries-search")
    targets = set(result_column(page, "target"))
    assert targets == {"neoverse_v2"}
    assert page.errors == []
