"""The pages of our databases as a person reads them: what the index, database, question and package pages
show, what a form offers, what the answers say, and that other databases keep Datasette's pages."""

import asyncio
import html
import re
import shutil
import sqlite3

import pytest
import pytest_asyncio
from datasette.app import Datasette
from pagemaker import spec, write_page

from spack_cache_db.build import build
from spack_cache_db.db.schema import NO_DEPENDENCIES
from spack_cache_db.query import canned
from spack_cache_db.web import cells, describe

pytestmark = pytest.mark.asyncio

METADATA = describe.build_metadata()
QUERIES = METADATA["databases"]["cache"]["queries"]
SNAPSHOT = "develop-2025-04-20"


async def started(*files, mutable=()):
    ds = Datasette(files=[str(file) for file in mutable], immutables=[str(file) for file in files])
    await ds.invoke_startup()
    return ds


@pytest_asyncio.fixture
async def ds(cache_db):
    """The samples' database, served as `datasette -i cache.db` (its metadata from the plugin)."""
    return await started(cache_db)


@pytest.fixture
def other_db(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE things (name TEXT)")
        conn.execute("INSERT INTO things VALUES ('a thing')")
    return path


async def page(ds, path):
    response = await ds.client.get(path)
    assert response.status_code == 200, (path, response.text[:500])
    return response.text


def text_of(fragment):
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def sentences(text):
    return [" ".join(text_of(found).split()) for found in re.findall(r'<p class="spack-said">(.*?)</p>', text, re.S)]


def options(text, field):
    select = re.search(rf'<select id="field-{field}" name="{field}">(.*?)</select>', text, re.S).group(1)
    return [text_of(option) for option in re.findall(r"<option[^>]*>(.*?)</option>", select)]


def question_links(text):
    return re.findall(r'<section class="spack-questions">.*?</section>', text, re.S)


async def test_the_index_leads_with_the_questions_and_puts_internal_tables_apart(ds):
    text = await page(ds, "/")
    sections = question_links(text)
    headings = [text_of(re.search(r"<h3>(.*?)</h3>", section).group(1)) for section in sections]
    assert headings == [section["heading"] for section in METADATA["plugins"]["spack-cache-db"]["questions"]]
    links = dict(
        (text_of(title), href)
        for section in sections
        for href, title in re.findall(r'<a href="([^"]*)">(.*?)</a>', section)
    )
    assert links["Find binaries"] == "/cache/find_binaries"
    assert links["Differences between two tags"] == "/cache/tag_diff"
    assert links["The package list (search any part of a name)"] == "/cache/packages"
    assert links["Search binaries"] == "/cache/search_specs"
    assert links["Browse every binary, faceted by tag, os, target, compiler and stack"].startswith(
        "/cache/binaries?_col=tag"
    )
    internal = text.split("<h3>Internal tables</h3>", 1)[1]
    assert "page_specs" not in text.split("<h3>Internal tables</h3>", 1)[0], "internal tables stay under their heading"
    assert 'href="/cache#internal-tables"' in internal


async def test_the_database_page_lists_every_table_once_questions_first(ds, cache_db):
    text = await page(ds, "/cache")
    questions, internal = text.split('<h2 id="internal-tables">', 1)
    names = [
        row[0]
        for row in sqlite3.connect(cache_db).execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE '%fts%' AND name NOT LIKE 'sqlite%'"
        )
    ]
    linked = re.findall(r'href="/cache/([a-z_]+)(?:\?[^"]*)?"', text)
    for name in names:
        assert name in linked, name
    assert {"binaries", "packages", "tags"} <= set(re.findall(r'href="/cache/([a-z_]+)[?"]', questions))
    assert not {"binaries", "packages", "tags"} & set(re.findall(r'href="/cache/([a-z_]+)"', internal))
    assert "One row per configuration" not in internal and "Distinct binaries by hash" in internal
    for name in QUERIES:
        assert f'href="/cache/{name}"' in questions, name


async def test_a_database_of_another_name_gets_the_same_pages_under_its_name(cache_db, tmp_path):
    path = tmp_path / "spack.db"
    shutil.copy(cache_db, path)
    ds = await started(mutable=[path])
    for address in ("/", "/spack", "/spack/find_binaries", "/spack/package?package=bolt"):
        text = await page(ds, address)
        assert "/cache/" not in text and 'href="/cache"' not in text, address
    assert 'href="/spack/find_binaries"' in await page(ds, "/")


async def test_other_databases_keep_datasettes_own_pages(cache_db, other_db):
    alone = await started(other_db)
    assert "spack-questions" not in await page(alone, "/")
    assert "Custom SQL query" in await page(alone, "/other")
    assert "Custom SQL query returning" in await page(alone, "/other?sql=select+*+from+things")
    beside = await started(cache_db, other_db)
    index = await page(beside, "/")
    assert 'href="/other/things"' in index and 'href="/cache/find_binaries"' in index
    assert "Custom SQL query" in await page(beside, "/other")
    assert "site.css" not in await page(beside, "/other")


@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_a_question_says_what_its_form_does(ds, name):
    text = await page(ds, f"/cache/{name}")
    assert f'<button type="submit">{html.escape(QUERIES[name]["button"], quote=False)}</button>' in text
    assert "Run SQL" not in text and "Custom SQL query" not in text
    going_on = canned.named(name).next_page
    for param in QUERIES[name]["params"]:
        asked = not going_on or param not in going_on.parameters  # the page's link sets those
        assert (f'name="{param}"' in text) == asked, param


async def test_a_form_offers_the_values_the_database_holds(ds, cache_db):
    conn = sqlite3.connect(cache_db)
    text = await page(ds, "/cache/find_binaries")
    tags = [
        row[0]
        for row in conn.execute("SELECT name FROM tags WHERE id IN (SELECT tag_id FROM pages) ORDER BY sort_order")
    ]
    assert options(text, "tag") == ["develop (the default)", *tags]
    assert options(text, "os") == ["any", *sorted(row[0] for row in conn.execute("SELECT name FROM oss"))]
    assert options(text, "target") == ["any", *sorted(row[0] for row in conn.execute("SELECT name FROM targets"))]
    hosts = conn.execute("SELECT name, family FROM microarchitectures ORDER BY family, name").fetchall()
    assert options(text, "host") == ["any", *(name for name, _ in hosts)]
    assert re.findall(r'<optgroup label="([^"]+)">', text) == list(dict.fromkeys(family for _, family in hosts))
    compilers = re.search(r'<datalist id="choices-compiler">(.*?)</datalist>', text, re.S).group(1)
    labels = re.findall(r'<option value="([^"]+)">', compilers)
    assert set(labels) == {row[0] for row in conn.execute("SELECT label FROM compilers")}
    assert labels.index("gcc@7.5.0") < labels.index("gcc@13.2.0"), "compiler versions as numbers"
    runs_on = await page(ds, "/cache/runs_on_host")
    assert options(runs_on, "platform") == ["any", "darwin", "linux"]
    assert options(await page(ds, "/cache/missing_from_root"), "tag")[0] == "every tag"


async def test_a_form_keeps_what_was_asked(ds):
    text = await page(ds, f"/cache/find_binaries?package=hdf5&tag={SNAPSHOT}&os=ubuntu24.04&host=zen3&variant=%2Bmpi")
    assert f"<option selected>{SNAPSHOT}</option>" in text
    assert "<option selected>ubuntu24.04</option>" in text and "<option selected>zen3</option>" in text
    assert 'name="variant" value="+mpi"' in text
    unknown = await page(ds, "/cache/find_binaries?tag=nosuchtag")
    assert '<option value="nosuchtag" selected>nosuchtag (not here)</option>' in unknown


SAID = [
    ("/cache/find_binaries?package=hdf", "No package here is called “hdf”. Did you mean hdf5?"),
    ("/cache/find_binaries?package=py-mpi4pi", "No package here is called “py-mpi4pi”. Did you mean py-mpi4py?"),
    ("/cache/package?package=bolr", "No package here is called “bolr”. Did you mean bolt?"),
    (
        f"/cache/find_binaries?package=hdf5&tag={SNAPSHOT[:-1]}",
        f"No tag here is called “{SNAPSHOT[:-1]}”. Did you mean",
    ),
    ("/cache/tag_diff?from_tag=devlop", "No tag here is called “devlop”. Did you mean develop"),
    ("/cache/tag_diff?to_tag=v0.21.2", "No tag here comes before “v0.21.2” of its kind: choose a From tag"),
    ("/cache/tag_diff?to_tag=develop-2024-03-17", "No tag here comes before “develop-2024-03-17” of its kind"),
    ("/cache/tag_diff?from_tag=develop", "“develop” is compared with itself: choose another tag"),
    ("/cache/find_binaries?os=ubuntu24", "No binary here was built on “ubuntu24”. Did you mean ubuntu24.04"),
    ("/cache/find_binaries?target=zen5", "No binary here was built for the target “zen5”."),
    ("/cache/runs_on_host?host=zen33", "archspec knows no CPU called “zen33”. Did you mean zen3"),
    ("/cache/runs_on_host?host=zen3&platform=windows", "No binary here was built for the platform “windows”."),
    ("/cache/stack_packages?stack=e4s-onapi", "No stack here is called “e4s-onapi”. Did you mean e4s-oneapi"),
    ("/cache/find_binaries?compiler=gcc@99", "No binary here was built with “gcc@99”."),
    (
        f"/cache/find_binaries?package=hdf5&tag={SNAPSHOT}&variant=%2Bmpii",
        "No binary has the variant “+mpii”. Did you mean +mpi or",
    ),
    (
        f"/cache/find_binaries?package=hdf5&tag={SNAPSHOT}&variant=cuda_arch%3D99",
        "No binary has the variant “cuda_arch=99”.",
    ),
    (
        f"/cache/find_binaries?package=hdf5&tag={SNAPSHOT}&variant=%2Bmpi~java",
        "Write the variants apart, separated by spaces: +mpi ~java.",
    ),
    (
        f"/cache/find_binaries?package=hdf5&tag={SNAPSHOT}&version=1.15",
        "hdf5 has no version 1.15: its versions are 1.14.6, 1.12.3, 1.8.23.",
    ),
    ("/cache/find_binaries?spec=hdf5%40", "The spec does not parse: hdf5@: expected a version after '@' (column 5)."),
    ("/cache/find_binaries?spec=hdf%40%3A1.14+%2Bmpi&tag=*", "No package here is called 'hdf': did you mean hdf5?"),
    (
        "/cache/find_binaries?spec=hdf5+%2Bmpi",
        f"develop, the default tag, has no binaries of hdf5. The tags that have them: {SNAPSHOT} (46).",
    ),
    ("/cache/find_binaries?spec=hdf5&tag=v9*+develop", "No tag here matches “v9*”."),
    ("/cache/find_binaries?spec=hdf5+%5Empich&tag=*", "This database has no dependencies: they come from build-cache"),
    # Only find_binaries takes tag patterns; elsewhere a tag is one name, and a pattern is no tag here.
    ("/cache/dependents?package=bolt&tag=*", "No tag here is called “*”."),
    (f"/cache/search_specs?q=x86_64_v3&tag={SNAPSHOT[:-1]}*", f"No tag here is called “{SNAPSHOT[:-1]}*”."),
    ("/cache/stacks_in_tag?tag=develop+v0.23.1", "No tag here is called “develop v0.23.1”."),
    (
        f"/cache/search_specs?q=%7Empi&tag={SNAPSHOT}",
        "A search matches words, not a spec: +mpi and ~mpi both match the word mpi. Find binaries reads “~mpi” as a spec.",
    ),
    ("/cache/hash_lookup?hash=ab", "Give at least 4 characters of the hash: fewer match too many binaries to tell."),
    ("/cache/hash_lookup?hash=/AAAA", "No binary's hash starts with “aaaa”."),
    (
        f"/cache/search_specs?q=hdf5+nosuchword&tag={SNAPSHOT}",
        "No binary has every word of “hdf5 nosuchword”: search for fewer words.",
    ),
    (
        "/cache/find_binaries?package=hdf5",
        f"develop, the default tag, has no binaries of hdf5. The tags that have them: {SNAPSHOT} (46).",
    ),
    (
        "/cache/stacks_in_tag?package=hdf5",
        f"develop, the default tag, has no binaries of hdf5. The tags that have them: {SNAPSHOT} (46).",
    ),
    (
        "/cache/find_binaries?package=hdf5&tag=v0.23.1",
        f"v0.23.1 has no binaries of hdf5. The tags that have them: {SNAPSHOT} (46).",
    ),
    (
        f"/cache/find_binaries?package=hdf5&tag={SNAPSHOT}&os=sequoia&target=x86_64_v3",
        "No binaries match all of these fields: leave one empty to see more.",
    ),
]


@pytest.mark.parametrize("path, sentence", SAID, ids=[path.split("/")[-1] for path, _ in SAID])
async def test_an_answer_says_what_was_not_found(ds, path, sentence):
    said = sentences(await page(ds, path))
    assert len(said) == 1 and said[0].startswith(sentence), said


@pytest.mark.parametrize(
    "path",
    [
        "/cache/find_binaries?package=bolt",
        f"/cache/find_binaries?package=hdf5&tag={SNAPSHOT}&variant=%2Bmpi+~java+api%3Ddefault",
        "/cache/hash_lookup?hash=skuy",
        "/cache/runs_on_host?host=ZEN3&package=bolt",
        "/cache/find_binaries?package=bolt&platform=Linux&tag=*",
    ],
)
async def test_an_answer_with_what_was_asked_says_nothing_more(ds, path):
    text = await page(ds, path)
    assert sentences(text) == [] and '<h2 class="spack-found">' in text


async def test_a_close_match_leads_to_its_answer(ds):
    text = await page(ds, "/cache/find_binaries?package=hdf&tag=" + SNAPSHOT)
    link = re.search(r'<p class="spack-said">.*?<a href="([^"]+)">hdf5</a>', text, re.S).group(1)
    assert (
        text_of(re.search(r'<h2 class="spack-found">(.*?)</h2>', await page(ds, html.unescape(link)), re.S).group(1))
        == f"46 binaries of hdf5 in {SNAPSHOT}"
    )


async def test_what_was_typed_is_shown_as_text(ds):
    text = await page(ds, "/cache/find_binaries?package=%3Cscript%3Ealert(1)%3C/script%3E&variant=%3Cb%3Ex")
    assert "<script>alert(1)" not in text and "<b>x" not in text
    assert "No package here is called “&lt;script&gt;alert(1)&lt;/script&gt;”." in text


async def test_answers_read_as_text(ds, cache_db):
    (spec_hash,) = (
        sqlite3.connect(cache_db)
        .execute("SELECT hash FROM binaries WHERE package = 'bolt' AND tag = 'develop'")
        .fetchone()
    )
    for path in ("/cache/find_binaries?package=bolt", "/cache/binaries?package=bolt&tag=develop"):
        text = await page(ds, path)
        assert f'<a class="spack-hash" href="/cache/hash_lookup?hash={spec_hash}"' in text, path
        assert re.search(r'<ul class="spack-list"><li>[^<]+</li>', text), path
        assert 'class="spack-install"' in text and 'class="spack-copy"' in text, path
        assert f"spack install --use-buildcache only /{spec_hash}" in text
    assert '<a class="spack-package" href="/cache/package?package=bolt">bolt</a>' in await page(
        ds, "/cache/binaries?package=bolt"
    )
    assert '<a class="spack-package" href="/cache/package?package=bolt">bolt</a>' in await page(
        ds, "/cache/packages?name=bolt"
    )
    spec_cell = re.search(r'<code class="spack-spec">(.*?)</code>', await page(ds, "/cache/find_binaries?package=bolt"))
    assert (
        spec_cell.group(1)
        == "bolt@2.0<wbr>~ipo build_system=cmake build_type=Release generator=make arch=linux-rhel8-zen4 %cce@15.0.1"
    )
    versions = await page(ds, "/cache/package_versions?package=bolt")
    assert "<li>develop: 18</li>" in versions
    links = re.search(r'<td class="col-links">(.*?)</td>', await page(ds, "/cache/find_binaries?package=bolt"))
    assert links.group(1) == (
        '<a href="package_versions?package=bolt">versions</a> · '
        '<a href="version_timeline?package=bolt">timeline</a> · '
        '<a href="../-/dashboards/package-history?package=bolt">chart</a>'
    )


@pytest.mark.parametrize(
    "value, html",
    [
        ("[tree](dependency_tree?hash=abc&tag=v1) · x", '<a href="dependency_tree?hash=abc&amp;tag=v1">tree</a> · x'),
        ("[a](javascript:alert(1))", "[a](javascript:alert(1))"),
        ("[<b>](x) <i>", '<a href="x">&lt;b&gt;</a> &lt;i&gt;'),
        ('[a](x" onclick="y)', "[a](x&#34; onclick=&#34;y)"),
    ],
)
async def test_a_links_cell_links_only_to_our_pages(value, html):
    assert str(cells.cell_html("/cache", None, "links", value)) == html


async def test_the_json_of_a_question_is_unchanged_by_the_pages(ds):
    response = await ds.client.get(f"/cache/find_binaries.json?package=hdf5&tag={SNAPSHOT}&_shape=objects")
    row = response.json()["rows"][0]
    assert row["stacks"].startswith("[") and row["install"].startswith("spack mirror add")
    assert row["links"].startswith("[versions](package_versions?package=hdf5)")


@pytest.fixture
def hostile_db(tmp_path):
    """Markup in values a page may hold (stacks are plain names: mirrors' folders)."""
    variants = ["+mpi", "note=<b>x</b>", "tag=<img src=x onerror=alert(1)>"]
    write_page(tmp_path / "site", "bolt", "develop", [spec("hostile", variants=variants)])
    path = tmp_path / "cache.db"
    build([str(tmp_path / "site")], path)
    return path


async def test_names_in_lists_are_shown_as_text(hostile_db):
    ds = await started(hostile_db)
    for path in ("/cache/find_binaries?package=bolt", "/cache/binaries", "/cache/package?package=bolt"):
        text = await page(ds, path)
        assert "<img src=x" not in text and "<b>x</b>" not in text, path
        assert "&lt;img src=x onerror=alert(1)&gt;" in text, path


async def test_the_package_page(ds, cache_db):
    text = await page(ds, "/cache/package?package=bolt")
    matrix = re.search(r'<table class="rows-and-columns spack-matrix">(.*?)</table>', text, re.S).group(1)
    assert [text_of(th) for th in re.findall(r"<th scope=\"col\">(.*?)</th>", matrix)] == [
        "version", "develop", "v0.23.1", "v0.23.0", "v0.22.0", "v0.21.2", "weekly snapshots"
    ]  # fmt: skip
    assert [text_of(td) for td in re.findall(r"<td>(.*?)</td>", matrix)] == [
        "18", "4", "5", "7", "5", "5 snapshots: 2024-03-17 to 2025-04-27"
    ]  # fmt: skip
    assert text.count('class="spack-hash"') == 18, "the binaries of the newest tag with the package, develop"
    assert 'id="chart-specs-over-time"' in text and 'id="chart-versions-by-tag"' in text
    filtered = await page(ds, "/cache/package?package=bolt&tag=v0.22.0&os=ubuntu22.04")
    expected = (
        sqlite3.connect(cache_db)
        .execute("SELECT count(*) FROM binaries WHERE package = 'bolt' AND tag = 'v0.22.0' AND os = 'ubuntu22.04'")
        .fetchone()[0]
    )
    assert 0 < filtered.count('class="spack-hash"') == expected
    assert f"{expected} binaries of bolt in v0.22.0 that match the filters" in text_of(filtered)


async def test_the_package_page_without_a_package_asks_for_one(ds):
    text = await page(ds, "/cache/package")
    assert 'name="package"' in text and 'href="/cache/-/packages"' in text
    assert sentences(text) == []


async def test_the_sites_stylesheet_and_script_are_served(ds):
    for name, kinds in (("site.css", ("text/css",)), ("site.js", ("text/javascript", "application/javascript"))):
        response = await ds.client.get(f"/-/static-plugins/spack-cache-db/{name}")
        assert response.status_code == 200 and response.headers["content-type"].startswith(kinds)
    assert (await ds.client.get("/-/static-plugins/spack-cache-db/other.css")).status_code == 404
    assert '<link rel="stylesheet" href="/-/static-plugins/spack-cache-db/site.css">' in await page(
        ds, "/cache/find_binaries"
    )


HOSTILE = [
    "'",
    '"',
    "NEAR(",
    "%_%",
    "nul\x00byte",
    "+mpi ~cuda cuda_arch=80 patches:=x ==",
    "zen3é☃",
    "x" * 5000,
    "+" * 600,
]


@pytest.mark.parametrize("value", HOSTILE, ids=lambda value: repr(value[:12]))
async def test_a_question_page_answers_whatever_is_typed(ds, value):
    for name, query in QUERIES.items():
        response = await asyncio.wait_for(
            ds.client.get(f"/cache/{name}", params=dict.fromkeys(query["params"], value)), 10
        )
        assert response.status_code == 200, (name, response.text[:300])
        assert "Traceback" not in response.text


def dependencies_section(text):
    return re.search(r'<h2 id="dependencies">Dependencies</h2>(.*?)<h2 id="history">', text, re.S).group(1)


async def test_the_package_page_shows_what_its_binaries_depend_on_and_who_links_against_it(tmp_path):
    from mirrors import sample_index, write_v2

    write_v2(tmp_path / "develop", sample_index("8"))
    db = tmp_path / "cache.db"
    build([f"develop={tmp_path / 'develop'}"], db)
    ds = await started(db)
    section = dependencies_section(await page(ds, "/cache/package?package=libelf&tag=develop"))
    body_rows = re.findall(r"<tr>(.*?)</tr>", section, re.S)[1:]  # after the header
    table = [
        [" ".join(text_of(cell).split()) for cell in re.findall(r"<td>(.*?)</td>", row, re.S)] for row in body_rows
    ]
    assert table == [
        ["compiler-wrapper", "1.0", "build", "1"],
        ["gcc (external)", "10.2.1", "build", "1"],
        ["gcc-runtime", "10.2.1", "link", "1"],
    ]
    assert "Packages of develop whose binaries link against libelf" in text_of(section)
    assert re.search(r'href="/cache/package\?package=libdwarf">libdwarf</a> \(2\)', section)
    assert 'href="/cache/dependents?package=libelf&amp;tag=develop"' in section
    assert 'href="/cache/-/dependencies?hash=' in section


async def test_the_package_page_of_a_pages_only_database_says_where_dependencies_come_from(ds):
    section = dependencies_section(await page(ds, f"/cache/package?package=hdf5&tag={SNAPSHOT}"))
    assert NO_DEPENDENCIES in " ".join(text_of(section).split())


async def test_every_dependency_question_of_a_pages_only_database_says_the_same_sentence(ds, cache_db):
    """The sentence is written once (schema.NO_DEPENDENCIES, and the view sentences): the questions,
    the package page and the terminal each wrote their own, and two of them had come to read differently."""
    hash_ = sqlite3.connect(cache_db).execute("SELECT hash FROM binaries WHERE package = 'hdf5'").fetchone()[0]
    for question, parameters in (("dependents", "package=bolt"), ("dependency_tree", f"hash={hash_}")):
        rows = (await ds.client.get(f"/cache/{question}.json?{parameters}&_shape=arrays")).json()["rows"]
        assert [value for row in rows for value in row if isinstance(value, str) and "dependencies" in value] == [
            NO_DEPENDENCIES
        ], question
    assert NO_DEPENDENCIES in sentences(await page(ds, "/cache/find_binaries?spec=hdf5+%5Empich&tag=*"))
    # The terminal says it too: test_dependencies.test_a_database_built_from_pages_says_where_dependencies_come_from.


async def test_a_search_for_a_spec_leads_to_find_binaries_with_it(ds):
    """name@version spans two fields of a binary, which no word of a search can: the page says so, and its link
    asks Find binaries for the same text as a spec, which finds the binaries."""
    text = await page(ds, f"/cache/search_specs?q=hdf5%401.14.6&tag={SNAPSHOT}")
    assert sentences(text) == [
        "No binary has every word of “hdf5@1.14.6”: search for fewer words.",
        "A search matches words, not a spec: a word does not span two fields, as name@version."
        " Find binaries reads “hdf5@1.14.6” as a spec.",
    ]
    link = html.unescape(re.search(r'<a href="([^"]*find_binaries[^"]*)">Find binaries</a>', text).group(1))
    assert "spack-found" in await page(ds, link)
    assert len(re.findall(r"<tr", await page(ds, link))) > 1
