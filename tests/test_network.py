"""Issue 22: the network reader against hostile servers of our own on 127.0.0.1. A remote document never makes
us read a local file; every failure is one line naming the URL; nothing hangs or balloons.

Each case runs the command line as a subprocess with short network limits (a deadline of DEADLINE seconds for
each request, a time-out of TIMEOUT for each read) and checks its exit status, that it prints exactly one
'Error:' line and no traceback, its time, its peak memory as the kernel measured it, that the previous
database is byte for byte as it was and that no file but the output changed."""

import hashlib
import json
import re
import shutil
import sqlite3
import sys
import zlib

import pytest
from mirrors import drip, endless, raw, redirect, sample_index, serving, write_v2, write_v3
from pagemaker import page_text, spec, write_page
from watched import run_watched, snapshot, temporaries

from spack_cache_db.build import build
from spack_cache_db.read import fetch

DEADLINE, TIMEOUT = 2, 1
TIME_LIMIT = 30  # seconds for any case; the drips and time-outs end within DEADLINE + TIMEOUT of starting
MEMORY_LIMIT = 1024**3  # peak RSS of the build and its writer, whatever a server sends
SECRET = "builder-secret-7d1f"  # what a local file holds that no remote document may make us read
HEX = re.compile(r"[0-9a-f]{64}")


def run_build(*args, deadline=DEADLINE):
    """build_db.py build ARGS with short network limits."""
    limits = f"fetch.DEADLINE_SECONDS = {deadline}; fetch.TIMEOUT_SECONDS = {TIMEOUT}; fetch.RETRY_PAUSE_SECONDS = 0.01"
    code = f"from spack_cache_db.read import fetch; {limits}; from spack_cache_db.cli import cli; cli()"
    return run_watched([sys.executable, "-c", code, "build", *map(str, args)], TIME_LIMIT)


class Scene:
    """A served site, a local file with a secret in it, and an output folder holding the previous database."""

    def __init__(self, root, previous, base, server):
        self.root, self.base, self.server = root, base, server
        self.site = root / "site"
        self.secret = root / "secret" / "build_cache" / "index.json"  # a local file that looks like an index
        self.secret.parent.mkdir(parents=True)
        self.secret.write_text(json.dumps({"database": {"version": SECRET}}))
        self.output = root / "out" / "cache.db"
        self.output.parent.mkdir()
        shutil.copyfile(previous, self.output)

    def url(self, path):
        return f"{self.base}/{path}"

    def fault(self, path, answer):
        self.server.faults["/" + path] = answer
        return self.url(path)

    def listing(self, entries, name="cache_spack_io_index.json"):
        """A listing on the site, {tag: [(label, url), ...]}; its URL."""
        document = {tag: [{"label": label, "url": url} for label, url in pairs] for tag, pairs in entries.items()}
        (self.site / name).write_text(json.dumps(document))
        return self.url(name)

    def fails(self, *args, error, deadline=DEADLINE):
        """The build exits 1 printing 'Error: <error>' (a string, or a pattern the line must match) and that the
        output was left as it was; it changes nothing, within the time and memory limits."""
        before, others = self.output.read_bytes(), snapshot(self.root, self.output)
        result = run_build(*args, "-o", self.output, deadline=deadline)
        print(f"{result.seconds:.1f} s, peak {result.peak_bytes / 2**20:.0f} MiB: {result.stderr.splitlines()[:1]}")
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stdout + result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 2 and lines[1] == f"{self.output} was left as it was.", result.stderr
        assert [line for line in lines if line.startswith("Error:")] == [lines[0]]
        if isinstance(error, re.Pattern):
            assert error.fullmatch(lines[0].removeprefix("Error: ")), lines[0]
        else:
            assert lines[0] == f"Error: {error}"
        assert lines[0].isprintable()
        assert SECRET not in result.stdout + result.stderr
        assert result.seconds < TIME_LIMIT
        assert result.peak_bytes < MEMORY_LIMIT, f"{result.peak_bytes / 2**20:.0f} MiB"
        assert self.output.read_bytes() == before
        assert snapshot(self.root, self.output) == others
        assert temporaries(self.output) == []
        return result

    def keeps_going(self, *args):
        """With --keep-going the build exits 0 and records what failed in problems: (its rows, the result)."""
        others = snapshot(self.root, self.output)
        result = run_build(*args, "-o", self.output, "--keep-going", "--quiet")
        assert (result.returncode, result.stderr) == (0, ""), result.stderr
        assert result.peak_bytes < MEMORY_LIMIT
        assert snapshot(self.root, self.output) == others
        conn = sqlite3.connect(self.output)
        try:
            problems = conn.execute("SELECT path, field, message FROM problems ORDER BY path").fetchall()
        finally:
            conn.close()
        assert SECRET not in repr(problems)
        return problems


@pytest.fixture
def scene(tmp_path, previous):
    (tmp_path / "site").mkdir()
    with serving(tmp_path / "site") as (base, server):
        yield Scene(tmp_path, previous, base, server)


def v2_mirror(scene, name, index=None):
    write_v2(scene.site / name, index or sample_index("8"))
    return scene.url(name)


# --- 1. A remote document never makes us read a local file ---------------------------------------------------


def test_a_served_listing_cannot_name_a_file_url(scene):
    listing = scene.listing({"develop": [("root", scene.secret.as_uri())]})
    scene.fails(
        listing,
        error=f"{listing}: develop[0].url: expected an http(s) URL (a document read over the network names nothing"
        " else), found a file: URL",
    )


def test_a_served_listing_cannot_name_a_plain_file_mirror(scene):
    listing = scene.listing({"develop": [("root", "v2"), ("e4s", scene.secret.parent.parent.as_uri())]})
    v2_mirror(scene, "v2")
    scene.fails(listing, error=re.compile(re.escape(f"{listing}: develop[1].url: expected an http(s) URL") + ".*"))


def test_a_local_path_in_a_served_listing_is_a_path_on_the_server(scene):
    listing = scene.listing({"develop": [("root", str(scene.secret))]})  # /tmp/.../index.json, resolved as a URL
    scene.fails(listing, error=f"{scene.url(str(scene.secret)[1:])}: download: expected the file to exist (HTTP 404)")


def test_other_schemes_in_a_served_listing_are_refused(scene):
    for url in ("ftp://127.0.0.1/index.json", "data:,{}", "s3://other-bucket/index.json"):
        listing = scene.listing({"develop": [("root", url)]})
        scene.fails(listing, error=re.compile(re.escape(f"{listing}: develop[0].url: expected ") + ".*"))


def test_a_query_cannot_make_a_local_file_an_index(scene):
    local = scene.root / "local.json"
    for url in (f"{scene.secret.parent.parent.parent.as_uri()}?/build_cache/index.json", f"{scene.secret.as_uri()}#x"):
        local.write_text(json.dumps({"develop": [{"label": "root", "url": url}]}))
        scene.fails(
            local,
            error=f"{local}: develop[0].url: expected a URL without ?query or #fragment (build-cache files are named"
            " by their path alone; percent-encode '?' and '#' in names)",
        )
    scene.fails(
        f"develop={scene.url('v2')}?/build_cache/index.json",
        error=re.compile(".*: location: expected a URL without \\?query or #fragment .*"),
    )


def test_redirects_stay_on_http(scene):
    for target in (scene.secret.as_uri().encode(), b"ftp://127.0.0.1/index.json", b"data:,{}"):
        scheme = target.split(b":")[0].decode()
        index = scene.fault("develop/index.json", redirect(target))
        scene.fails(
            f"develop={index}",
            error=f"{index}: download: expected an answer, but the server redirects to a {scheme}: URL, and redirects"
            " must stay on http(s)",
        )


def test_what_a_server_sent_instead_is_described_never_printed(scene):
    hash_file = scene.fault("v2/build_cache/index.json.hash", raw(b"HTTP/1.0 200 OK\r\n\r\n" + SECRET.encode()))
    v2_mirror(scene, "v2")
    scene.fails(
        scene.url("v2"),
        error=f"{hash_file}: hash: expected the sha256 of index.json in hex, found {len(SECRET)} bytes that are not"
        " a sha256 in hex",
    )
    listing = scene.fault(
        "html/cache_spack_io_index.json", raw(b"HTTP/1.0 200 OK\r\n\r\n<!DOCTYPE html><p>" + SECRET.encode())
    )
    scene.fails(listing, error=f"{listing}: file: expected JSON, found an HTML page")
    index = scene.fault("json/index.json", raw(b"HTTP/1.0 200 OK\r\n\r\n" + SECRET.encode()))
    scene.fails(f"develop={index}", error=f"{index}: file: expected JSON, found {len(SECRET)} bytes that are not JSON")


def test_keep_going_stores_what_failed_never_what_was_read(scene):
    v2_mirror(scene, "develop")
    stack = scene.fault("develop/e4s/index.json", raw(b"HTTP/1.0 200 OK\r\n\r\n<html>" + SECRET.encode()))
    hash_file = scene.fault("develop/ml/build_cache/index.json.hash", raw(b"HTTP/1.0 200 OK\r\n\r\n" + SECRET.encode()))
    v2_mirror(scene, "develop/ml")
    listing = scene.listing({"develop": [("root", "develop"), ("e4s", "develop/e4s/index.json"), ("ml", "develop/ml")]})
    assert scene.keeps_going(listing) == [
        (stack, "file", "expected JSON, found an HTML page"),
        (
            hash_file,
            "hash",
            f"expected the sha256 of index.json in hex, found {len(SECRET)} bytes that are not a sha256 in hex",
        ),
    ]


# --- 2. Every failure of a request is one line naming the URL ---------------------------------------------------

HTTP_FAULTS = [
    (b"garbage\r\n\r\n", "the server's answer does not start with an HTTP status line (3 attempts)"),
    (b"", "the server closed the connection without answering (3 attempts)"),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n", "the server sent a line over 64 KiB (3 attempts)"),
    (b"HTTP/1.1 200 OK\r\n" + b"X: a\r\n" * 101 + b"\r\n", "got more than 100 headers (3 attempts)"),
    (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n",
        "the connection closed before the whole answer came (3 attempts)",
    ),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{}", "received 2 of the 1,000 bytes announced (3 attempts)"),
    (b"HTTP/9.9 200 OK\r\n\r\n", "the server answers in another protocol than HTTP/1 (3 attempts)"),
]


@pytest.mark.parametrize(
    "answer, reason",
    HTTP_FAULTS,
    ids=["status line", "nothing", "long line", "101 headers", "chunking", "short body", "protocol"],
)
def test_a_server_that_breaks_http_is_one_line(scene, answer, reason):
    index = scene.fault("develop/index.json", raw(answer))
    scene.fails(f"develop={index}", error=f"{index}: download: expected an answer, but {reason}")


@pytest.mark.parametrize(
    "url, expected",
    [
        (
            "http://127.0.0.1:1/a b/index.json",
            "expected a URL of printable ASCII (percent-encode spaces and other characters)",
        ),
        (
            "http://127.0.0.1:1/a\u0000b/index.json",
            "expected a URL of printable ASCII (percent-encode spaces and other characters)",
        ),
        (
            "http://127.0.0.1:abc/index.json",
            "expected a URL, found one that cannot be read (Port could not be cast to integer value as 'abc')",
        ),
        ("http://[::1/index.json", "expected a URL, found one that cannot be read (Invalid IPv6 URL)"),
        ("http:///index.json", "expected a URL with a host"),
    ],
    ids=["space", "NUL", "port", "IPv6", "no host"],
)
def test_a_url_that_cannot_be_requested_is_one_line(scene, url, expected):
    listing = scene.listing({"develop": [("root", url)]})
    scene.fails(listing, error=f"{listing}: develop[0].url: {expected}")
    if "\x00" not in url:  # no command line can hold it
        scene.fails(f"develop={url}", error=f"{url}: location: {expected}")


def test_a_url_with_a_password_is_refused_without_showing_it(scene):
    """Credentials are not sent (urllib would take user:pw@host for a host name), and an error line would show
    them; the refusal writes them as ***."""
    expected = "expected a URL without a user name or password (they would be kept and shown with it)"
    listing = scene.listing({"develop": [("root", "http://user:secret@127.0.0.1:1/index.json")]})
    scene.fails(listing, error=f"{listing}: develop[0].url: {expected}")
    scene.fails(
        "develop=http://user:secret@127.0.0.1:1/mirror", error=f"http://***@127.0.0.1:1/mirror: location: {expected}"
    )


@pytest.mark.parametrize(
    "target, reason",
    [
        (b"http://[::1/index.json", "the URL cannot be requested (Invalid IPv6 URL)"),
        (b"http://127.0.0.1:abc/index.json", "the URL cannot be requested (nonnumeric port: 'abc')"),
    ],
)
def test_a_redirect_that_cannot_be_followed_is_one_line(scene, target, reason):
    index = scene.fault("develop/index.json", redirect(target))
    scene.fails(f"develop={index}", error=f"{index}: download: expected an answer, but {reason}")


def index_text(records):
    return ('{"database": {"version": "8", "installs": {' + ", ".join(records) + "}}}").encode()


def record(
    letter,
    spec_json='{"name": "demo", "version": "1.0", "arch": {"platform": "linux", "platform_os": "ubuntu24.04", "target": "zen3"}}',
):
    return f'"{letter * 32}": {{"spec": {spec_json}, "in_buildcache": true}}'


@pytest.mark.parametrize(
    "records, cut, expected",
    [
        ([f'"{"a" * 32}": 5'], 0, f"database.installs.{'a' * 32}: expected an object, found a whole number"),
        (
            [f'"{"a" * 32}": 5', record("b", "[" * 200_000 + "]" * 200_000)],
            0,
            "database.installs[...]: expected an object, found a whole number",
        ),
        ([f'"{"a" * 32}": []', record("b")], 40, "database.installs[...]: expected an object, found a list"),
    ],
    ids=["wrong type", "then nested 200,000 deep", "then truncated"],
)
def test_a_record_of_the_wrong_type_is_one_line_whatever_follows(scene, records, cut, expected):
    index = scene.site / "develop" / "index.json"
    index.parent.mkdir()
    text = index_text(records)
    index.write_bytes(text[: len(text) - cut])
    scene.fails(f"develop={scene.url('develop/index.json')}", error=f"{scene.url('develop/index.json')}: {expected}")


# --- 3. One clean line ------------------------------------------------------------------------------------------


def test_a_redirect_loop_is_one_line(scene):
    index = scene.fault("develop/index.json", redirect(b"/develop/index.json"))
    scene.fails(
        f"develop={index}", error=f"{index}: download: expected an answer, but the redirects go round in a loop"
    )
    scene.fault("a/index.json", redirect(b"/b/index.json"))
    scene.fault("b/index.json", redirect(b"/a/index.json"))
    scene.fails(
        f"develop={scene.url('a/index.json')}",
        error=f"{scene.url('a/index.json')}: download: expected an answer, but the redirects go round in a loop",
    )


def test_a_reason_phrase_with_terminal_escapes_is_printed_escaped(scene):
    for reason, shown in (
        (b"Nope\x1b[2J\x07\x08", "Nope\\x1b[2J\\x07\\x08"),
        (b"Gone\x1b]0;title\x07", "Gone\\x1b]0;title\\x07"),
    ):
        index = scene.fault("develop/index.json", raw(b"HTTP/1.1 418 " + reason + b"\r\nContent-Length: 0\r\n\r\n"))
        scene.fails(f"develop={index}", error=f"{index}: download: expected HTTP 200, got 418 {shown}")


def test_a_tag_name_with_nul_or_a_newline_is_printed_escaped(scene):
    for tag, shown in (
        ("dev\u0000elop", "'dev\\x00elop'"),
        ("dev\nelop", "'dev\\nelop'"),
        ("dev\u2028", "'dev\\u2028'"),
    ):
        listing = scene.listing({tag: [("root", "v2")]})
        scene.fails(
            listing, error=f"{listing}: tag: expected a name (letters, digits, '.', '_', '+', '-'), found {shown}"
        )


# --- 4. A drip never outlasts the deadline ----------------------------------------------------------------------

DRIPS = [
    b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n",  # the body, a byte at a time
    b"HTTP/1.1 200 OK\r\nX-Slow: ",  # the headers
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000",  # a chunk's size line
    b"HTTP/1.1 20",  # the status line
]


@pytest.mark.parametrize("head", DRIPS, ids=["body", "headers", "chunk size", "status line"])
def test_a_drip_ends_at_the_deadline(scene, head):
    index = scene.fault(
        "develop/index.json", drip(head, byte=b"a" if head.endswith(b": ") else b" ", every=TIMEOUT / 3)
    )
    result = scene.fails(f"develop={index}", error=f"{index}: download: expected it to finish within {DEADLINE} s")
    assert result.seconds < DEADLINE + TIMEOUT + 3


def test_a_server_that_says_nothing_times_out_on_each_attempt(scene):
    index = scene.fault("develop/index.json", drip(b"", byte=b"", every=0.5, seconds=8))
    result = scene.fails(
        f"develop={index}",
        error=f"{index}: download: expected an answer, but no answer within {TIMEOUT} s (3 attempts)",
    )
    assert result.seconds < 3 * TIMEOUT + 5


# --- 5. Memory stays bounded whatever a server sends -------------------------------------------------------------


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    """gzip of 600 MiB of JSON-looking spaces: about 600 KB."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [squeeze.compress(b'{"database": {"version": "8", "installs": {')]
    spaces = b" " * 2**20
    parts += [squeeze.compress(spaces) for _ in range(600)]
    parts.append(squeeze.flush())
    return b"".join(parts)


def test_a_gzip_bomb_is_refused_within_the_memory_limit(scene, bomb):
    checksum = hashlib.sha256(bomb).hexdigest()
    mirror = scene.site / "develop"
    blob = mirror / "blobs" / "sha256" / checksum[:2] / checksum
    blob.parent.mkdir(parents=True)
    blob.write_bytes(bomb)
    write_v3(scene.site / "model", b"{}", compression="gzip")  # layout.json and a manifest to rewrite
    shutil.copytree(scene.site / "model" / "v3", mirror / "v3")
    manifest = mirror / "v3" / "manifests" / "index" / "index.manifest.json"
    document = json.loads(manifest.read_text())
    document["data"][0].update(checksum=checksum, contentLength=len(bomb))
    manifest.write_text(json.dumps(document))
    scene.fails(
        f"develop={scene.url('develop')}",
        error=f"{scene.url(blob.relative_to(scene.site).as_posix())}: compression: expected at most"
        f" {fetch.MAX_BYTES:,} bytes once decompressed",
        deadline=TIME_LIMIT,  # the bytes come fast: time to decompress them all
    )


def test_an_endless_body_is_refused_within_the_memory_limit(scene):
    index = scene.fault("develop/index.json", endless(b"HTTP/1.0 200 OK\r\n\r\n"))
    expected = f"expected at most {fetch.MAX_BYTES:,} bytes"
    scene.fails(f"develop={index}", error=f"{index}: size: {expected}", deadline=TIME_LIMIT)


def test_tls_to_a_server_that_does_not_speak_it_is_one_line(scene):
    index = scene.url("develop/index.json").replace("http://", "https://")
    scene.fails(
        f"develop={index}",
        error=re.compile(re.escape(f"{index}: download: expected an answer, but ") + r"\[SSL.*\(3 attempts\)"),
    )


# --- 6. Names that cannot be file names are refused when read, not at export -----------------------------------

LONG = "t" * 10_000
TOO_LONG = "of at most 255 bytes (the longest file name: tags and packages are folders on export), found"


def test_names_too_long_for_a_file_name_are_refused_in_pages(scene):
    page = scene.root / "page.md"
    page.write_text(page_text("bolt", LONG, [spec("bolt")]))
    scene.fails(page, error=f"{page}: categories: expected a tag name {TOO_LONG} 10,000 bytes")
    page.write_text(page_text("b" * 256, "develop", [spec("bolt")]))
    scene.fails(page, error=f"{page}: title: expected a package name {TOO_LONG} 256 bytes")
    page.write_text(page_text("bolt", "develop", [spec("bolt", stacks=["root", "s" * 256])]))
    scene.fails(page, error=f"{page}: spec_details[0].stacks[1]: expected a stack name {TOO_LONG} 256 bytes")
    tags = scene.root / "checkout" / "_data" / "tags.yaml"
    write_page(scene.root / "checkout", "bolt", "develop", [spec("bolt")])
    tags.parent.mkdir()
    for entry, field, what in (
        (f"name: {LONG}", "[0].name", "a tag name"),
        (f"name: develop\n  stacks: [{LONG}]", "[0].stacks[0]", "a stack name"),
    ):
        tags.write_text(f"- {entry}\n")
        scene.fails(scene.root / "checkout", error=f"{tags}: {field}: expected {what} {TOO_LONG} 10,000 bytes")


def test_names_too_long_for_a_file_name_are_refused_in_listings_and_arguments(scene):
    v2_mirror(scene, "develop")
    listing = scene.listing({LONG: [("root", "develop")]})
    scene.fails(listing, error=f"{listing}: tag: expected a name {TOO_LONG} 10,000 bytes")
    listing = scene.listing({"develop": [("root", "develop"), (LONG, "develop")]})
    scene.fails(listing, error=f"{listing}: develop[1].label: expected a name {TOO_LONG} 10,000 bytes")
    mirror = f"{LONG[:300]}={scene.url('develop')}"
    scene.fails(mirror, error=f"{mirror}: tag: expected a name {TOO_LONG} 300 bytes")


def test_a_local_listing_the_user_named_may_name_local_files(tmp_path):
    """The other side of the policy: a listing on this machine, named on the command line, may name local
    mirrors by path or file: URL (relative ones resolved against it)."""
    write_v2(tmp_path / "mirrors" / "develop", sample_index("8"))
    write_v2(tmp_path / "mirrors" / "e4s", sample_index("8"))
    listing = tmp_path / "listings" / "cache_spack_io_index.json"
    listing.parent.mkdir()
    entries = [("root", (tmp_path / "mirrors" / "develop").as_uri()), ("e4s", "../mirrors/e4s")]
    listing.write_text(json.dumps({"develop": [{"label": label, "url": url} for label, url in entries]}))
    build([str(listing)], tmp_path / "cache.db")
    conn = sqlite3.connect(tmp_path / "cache.db")
    try:
        mirrors = conn.execute("SELECT DISTINCT stack, mirror_url FROM binary_stacks ORDER BY stack").fetchall()
    finally:
        conn.close()
    assert mirrors == [
        ("e4s", str(tmp_path / "mirrors" / "e4s")),
        ("root", (tmp_path / "mirrors" / "develop").as_uri()),
    ]
