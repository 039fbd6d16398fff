"""Every page a person can reach answers: real datasette servers, started as the README says (or plainly,
with a database of another name), and every link followed from / to depth 3."""

import contextlib
import itertools
import shutil
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser

import pytest
from datasette_server import datasette, readme_command
from paths import METADATA_YML, SEEDS

from spack_cache_db.build import build

DEPTH = 3
TIMEOUT = 60  # seconds for one page
# Servers of the same database, started alike, that share the crawl's requests: a datasette process renders
# its pages on one core at a time, so two answer a crawl in about half the time.
SERVERS = 2


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.links.append(href)


def links_of(html):
    parser = _Links()
    parser.feed(html)
    return parser.links


def fetch(url):
    """(status, HTML or "") of a page."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            kind = response.headers.get("content-type", "")
            body = response.read()
            return response.status, body.decode("utf-8", "replace") if kind.startswith("text/html") else ""
    except urllib.error.HTTPError as error:
        return error.code, ""


def _canonical(url):
    """The URL without its fragment, its arguments in order: links that differ only so are one page."""
    parts = urllib.parse.urlsplit(urllib.parse.urldefrag(url).url)
    query = urllib.parse.urlencode(sorted(urllib.parse.parse_qsl(parts.query, keep_blank_values=True)))
    return urllib.parse.urlunsplit(parts._replace(query=query))


def crawl(bases, depth=DEPTH, start="/"):
    """{url: (status, the page it was found on)} of every page reachable from start in depth links, each
    fetched from one of the servers at bases (as the first one's URL: their pages are the same)."""
    base = bases[0]
    found = {base + start: (None, None)}
    level = [base + start]
    servers = itertools.cycle(bases)
    with ThreadPoolExecutor(max_workers=4) as pool:
        for step in range(depth + 1):
            answers = list(pool.map(fetch, [url.replace(base, next(servers), 1) for url in level]))
            following = []
            for url, (status, html) in zip(level, answers, strict=True):
                found[url] = (status, found[url][1])
                if step == depth:
                    continue
                for href in links_of(html):
                    target = _canonical(_as_first(urllib.parse.urljoin(url, href), bases))
                    if target.startswith(base + "/") and target not in found:
                        found[target] = (None, url)
                        following.append(target)
            level = following
    return found


def _as_first(url, bases):
    """A link to the page of another of the servers, as the first one's URL (a page that spells out its own
    address links to the server that answered it)."""
    other = next((other for other in bases[1:] if url == other or url.startswith(other + "/")), None)
    return bases[0] + url[len(other) :] if other else url


def assert_every_page_answers(bases, depth=DEPTH, start="/"):
    found = crawl(bases, depth, start)
    failed = {url: (status, on) for url, (status, on) in found.items() if status != 200}
    assert not failed, "\n".join(f"{status} {url} (linked from {on})" for url, (status, on) in failed.items())
    return found


@contextlib.contextmanager
def servers(*arguments):
    """The base URLs of SERVERS datasette servers started with these arguments."""
    with contextlib.ExitStack() as started:
        yield [started.enter_context(datasette(*arguments)) for _ in range(SERVERS)]


@pytest.fixture(scope="module")
def seeds_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("seeds") / "cache.db"
    build([SEEDS], path)
    return path


def test_every_page_of_the_seeds_answers(seeds_db):
    with servers(*readme_command(seeds_db, METADATA_YML)) as bases:
        found = assert_every_page_answers(bases)
    assert len(found) > 200


def test_every_page_of_the_test_pages_answers(cache_db):
    with servers(*readme_command(cache_db, METADATA_YML)) as bases:
        found = assert_every_page_answers(bases)
    base = bases[0]
    assert f"{base}/cache/package?package=hdf5" in found
    assert any(url.startswith(f"{base}/cache/hash_lookup?hash=") for url in found)


def test_every_page_of_a_database_of_another_name_served_plainly_answers(cache_db, tmp_path):
    """`datasette spack.db`: no -i, no -m; the questions, the database page and every link on them work
    (two links deep: the pages beyond are the same as cache.db's, above)."""
    path = tmp_path / "spack.db"
    shutil.copy(cache_db, path)
    with servers(path) as bases:
        found = assert_every_page_answers(bases, depth=2)
    base = bases[0]
    assert f"{base}/spack/find_binaries" in found
    assert not any("/cache/" in url or url.endswith("/cache") for url in found)


def test_every_page_of_a_database_built_from_indexes_answers(tmp_path):
    """Spack's sample indexes (with dependencies, an external, two tags) served as the README says."""
    from mirrors import sample_index, write_v2

    for version in ("7", "8"):
        write_v2(tmp_path / f"v{version}", sample_index(version))
    path = tmp_path / "cache.db"
    build([f"develop={tmp_path / 'v8'}", f"v0.23.0={tmp_path / 'v7'}"], path)
    with servers(*readme_command(path, METADATA_YML)) as bases:
        found = assert_every_page_answers(bases)
    base = bases[0]
    assert any(url.startswith(f"{base}/cache/dependency_tree?hash=") for url in found)
    assert any(url.startswith(f"{base}/cache/dependents?") for url in found)
    assert any(url.startswith(f"{base}/cache/-/dependencies?") for url in found)
    assert f"{base}/cache/-/packages" in found
