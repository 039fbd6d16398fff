"""Getting the bytes of a location: a local path, a file:// URL or an http(s):// URL (s3://spack-binaries/...
is read from https://binaries.spack.io/..., as cache.spack.io does). Downloads have time-outs, a bounded
number of retries and a size cap; failures are one-line InputErrors naming the URL."""

import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from spack_cache_db import __version__
from spack_cache_db.read import files
from spack_cache_db.records import InputError

S3_BUCKET = "s3://spack-binaries/"
S3_HTTPS = "https://binaries.spack.io/"
MAX_BYTES = 2 * 1024**3  # an index of the busiest tag is about 100 MB; anything near this is not an index
TIMEOUT_SECONDS = 60  # for each connection and each read
DEADLINE_SECONDS = 30 * 60  # for a whole download, however slowly the bytes come
ATTEMPTS = 3
RETRY_PAUSE_SECONDS = 1.0  # doubled after each failed attempt
CHUNK = 1024 * 1024
_TRANSIENT_STATUS = {408, 425, 429, 500, 502, 503, 504}


@dataclass
class Fetched:
    location: str
    data: bytes | None  # None: not modified since the validators given
    etag: str | None = None
    last_modified: str | None = None


def is_url(text):
    return urllib.parse.urlsplit(str(text)).scheme in ("http", "https", "file", "s3")


def readable_url(location):
    """The URL to read: s3://spack-binaries/<key> is served at https://binaries.spack.io/<key>."""
    location = str(location)
    if location.startswith(S3_BUCKET):
        return S3_HTTPS + location[len(S3_BUCKET) :]
    if location.startswith("s3://"):
        raise InputError(
            location, "url", f"expected an s3 URL under {S3_BUCKET} (other buckets have no public address)"
        )
    return location


def join(base, relative):
    """A location relative to another (a URL, or a local file's path), as a browser resolves links."""
    if is_url(relative):
        return readable_url(relative)
    if is_url(base):
        return urllib.parse.urljoin(readable_url(base), relative)
    if os.path.isabs(relative):
        return relative
    return os.path.normpath(os.path.join(os.path.dirname(base), relative))


def child(base, path):
    """path below the folder or URL base."""
    if is_url(base):
        return readable_url(base).rstrip("/") + "/" + path
    return os.path.join(base, path)


def fetch(location, *, validators=None, progress=None, max_bytes=MAX_BYTES):
    """The bytes at location, or Fetched(data=None) when validators (etag, last_modified) say they did not
    change. progress(n) is called with each chunk's size."""
    url = readable_url(location)
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme in ("http", "https"):
        return _download(url, validators, progress, max_bytes)
    path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path) if scheme == "file" else url
    return Fetched(str(location), _read_file(str(location), path, progress, max_bytes))


def exists(location):
    """Whether location can be read (a missing file, or an HTTP 404 or 403, says no)."""
    url = readable_url(location)
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path) if url.startswith("file:") else url
        return os.path.isfile(path)
    try:
        _with_retries(url, lambda: _open(urllib.request.Request(url, method="HEAD")).close())
    except _NotFound:
        return False
    return True


def _read_file(location, path, progress, max_bytes):
    """A regular file's bytes (files.read_regular_file: a FIFO or a device would block or never end)."""
    data, _ = files.read_regular_file(path, limit=max_bytes)
    if progress:
        progress(len(data))
    return data


class _NotFound(Exception):
    pass


def _download(url, validators, progress, max_bytes):
    headers = {"User-Agent": f"spack-cache-db/{__version__}"}
    etag, last_modified = validators or (None, None)
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified

    def attempt():
        try:
            response = _open(urllib.request.Request(url, headers=headers))
        except urllib.error.HTTPError as error:
            if error.code == 304:
                return Fetched(url, None, etag, last_modified)
            raise
        with response:
            data = _read_body(url, response, progress, max_bytes)
            return Fetched(url, data, response.headers.get("ETag"), response.headers.get("Last-Modified"))

    try:
        return _with_retries(url, attempt)
    except _NotFound as error:
        raise InputError(url, "download", f"expected the file to exist (HTTP {error})") from error


def _open(request):
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS)
    except urllib.error.HTTPError as error:
        if error.code in (403, 404, 410):
            error.close()
            raise _NotFound(error.code) from error
        raise


def _read_body(url, response, progress, max_bytes):
    declared = response.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise InputError(url, "size", f"expected at most {max_bytes:,} bytes, the server announces {int(declared):,}")
    deadline = time.monotonic() + DEADLINE_SECONDS
    chunks, received = [], 0
    while chunk := response.read(CHUNK):
        received += len(chunk)
        if received > max_bytes:
            raise InputError(url, "size", f"expected at most {max_bytes:,} bytes")
        if time.monotonic() > deadline:
            raise InputError(url, "download", f"expected it to finish within {DEADLINE_SECONDS} s")
        chunks.append(chunk)
        if progress:
            progress(len(chunk))
    if declared is not None and declared.isdigit() and received != int(declared):
        raise _Truncated(f"received {received:,} of the {int(declared):,} bytes announced")
    return b"".join(chunks)


class _Truncated(Exception):
    pass


def _with_retries(url, attempt):
    """attempt(), again after transient failures (time-outs, refused or dropped connections, HTTP 5xx and 429),
    at most ATTEMPTS times; then one InputError that says what went wrong last."""
    number, pause = 1, RETRY_PAUSE_SECONDS
    while True:
        try:
            return attempt()
        except urllib.error.HTTPError as error:
            if error.code not in _TRANSIENT_STATUS or number == ATTEMPTS:
                raise InputError(url, "download", f"expected HTTP 200, got {error.code} {error.reason}") from error
        except (urllib.error.URLError, OSError, _Truncated) as error:
            if number == ATTEMPTS:
                raise InputError(
                    url, "download", f"expected an answer, but {_reason(error)} ({ATTEMPTS} attempts)"
                ) from error
        time.sleep(pause)
        number, pause = number + 1, pause * 2


def _reason(error):
    if isinstance(error, urllib.error.URLError) and not isinstance(error, urllib.error.HTTPError):
        error = error.reason
    if isinstance(error, TimeoutError):
        return f"no answer within {TIMEOUT_SECONDS} s"
    if isinstance(error, ConnectionRefusedError):
        return "the connection was refused"
    return " ".join(str(error).split()) or type(error).__name__
