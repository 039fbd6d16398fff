"""Getting the bytes at a Location (locations.py): a regular local file, or an http(s) download.

A download has a time-out for each read and a deadline for each attempt that a server sending a byte at a time
cannot stretch; a bounded number of retries; and a cap on the bytes kept. gzip is decompressed as the bytes
arrive, the cap applying to what comes out, and their sha256 is taken on the way: memory stays bounded
whatever a server sends. Redirects stay on http(s). Every failure becomes one InputError naming the URL
(_failure); what a server sent is described by its kind (found_instead), never printed."""

import hashlib
import http.client
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass

from spack_cache_db import __version__
from spack_cache_db.read import files
from spack_cache_db.read.locations import REMOTE_SCHEMES
from spack_cache_db.records import InputError, one_line

MAX_BYTES = 512 * 1024**2  # kept, once decompressed: the index of the busiest tag is about 150 MB
TIMEOUT_SECONDS = 60  # to connect, and for each read
DEADLINE_SECONDS = 30 * 60  # for each attempt at a request, however slowly the bytes come
ATTEMPTS = 3
RETRY_PAUSE_SECONDS = 1.0  # doubled after each failed attempt
PIECE = 64 * 1024  # read at a time: each read returns what has arrived, at most this
MAX_REDIRECTS = 10
_TRANSIENT_STATUS = {408, 425, 429, 500, 502, 503, 504}


@dataclass
class Fetched:
    location: str
    data: bytes | bytearray | None  # None: not modified since the validators given
    etag: str | None = None
    last_modified: str | None = None
    sha256: str | None = None  # of the bytes as stored (compressed, if they were)
    size: int = 0  # bytes as stored
    # gzip data that could not be decompressed: raised by the caller once it has compared the checksum, which
    # says better what went wrong when it does not match
    problem: InputError | None = None


def fetch(location, *, validators=None, progress=None, max_bytes=MAX_BYTES, gzip=False):
    """The bytes at location (a Location; gzip: decompressed), or Fetched(data=None) when validators (etag,
    last_modified) say they did not change. progress(n) is called with the size of each piece received."""
    if location.is_local:
        data, _ = files.read_regular_file(location.path, limit=max_bytes)
        if progress:
            progress(len(data))
        return _Body.of(location.text, data, max_bytes, gzip).fetched(location.text)
    return _download(location.text, validators, progress, max_bytes, gzip)


def exists(location):
    """Whether location can be read (a missing file, or an HTTP 404 or 403, says no)."""
    if location.is_local:
        return os.path.isfile(location.path)
    try:
        _with_retries(location.text, lambda deadline: _answers(location.text, deadline))
    except _NotFound:
        return False
    return True


# What a server that does not answer HEAD says (Method Not Allowed, Not Implemented): it is asked with GET, and
# the connection closed once the status and headers came.
_NO_HEAD = (405, 501)


def _answers(url, deadline):
    try:
        _open(urllib.request.Request(url, method="HEAD"), deadline).close()
    except urllib.error.HTTPError as error:
        if error.code not in _NO_HEAD:
            raise
        error.close()
        _open(urllib.request.Request(url), deadline).close()


def found_instead(data, expected, error=None):
    """What data is, said without its content: 'found an HTML page', 'found 12 bytes that are not JSON'; and
    where a parser's error (msgspec's) says it stopped reading, if it does."""
    kind = _kind_of(data, expected)
    stopped = re.search(r"\(byte (\d+)\)", str(error or ""))
    if stopped and int(stopped[1]) > 0 and kind.endswith(f"not {expected}"):
        return f"{kind} (unreadable from byte {int(stopped[1]):,})"
    return kind


def _kind_of(data, expected):
    start = bytes(data[:512]).lstrip().lower()
    if not data:
        return "found nothing (0 bytes)"
    if start.startswith((b"<!doctype html", b"<html")):
        return "found an HTML page"
    if start.startswith(b"<?xml"):
        return "found an XML document"
    if start.startswith(b"\x1f\x8b"):
        return "found gzip-compressed data"
    return f"found {len(data):,} bytes that are not {expected}"


class _Body:
    """The bytes of a file as they arrive: their size and sha256 as stored, and what is kept of them
    (decompressed from gzip when asked), at most max_bytes of each."""

    def __init__(self, url, max_bytes, gzip):
        self.url, self.max_bytes = url, max_bytes
        self.size, self.sha256, self.kept = 0, hashlib.sha256(), bytearray()
        self.inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS) if gzip else None
        self.problem = None

    @classmethod
    def of(cls, url, data, max_bytes, gzip):
        """The body of a file read whole."""
        body = cls(url, max_bytes, gzip)
        if gzip:
            view = memoryview(data)
            for start in range(0, len(data), PIECE):
                body.add(view[start : start + PIECE])
        else:
            body.size, body.kept = len(data), data
            body.sha256.update(data)
        return body

    def add(self, piece):
        self.size += len(piece)
        if self.size > self.max_bytes:
            raise InputError(self.url, "size", f"expected at most {self.max_bytes:,} bytes")
        self.sha256.update(piece)
        if self.inflater is None:
            self.kept += piece
        elif self.problem is None:
            self._inflate(piece)

    def _inflate(self, piece):
        try:
            while piece and not self.inflater.eof:
                self.kept += self.inflater.decompress(piece, self.max_bytes + 1 - len(self.kept))
                piece = self.inflater.unconsumed_tail
                if len(self.kept) > self.max_bytes:
                    self._give_up(f"expected at most {self.max_bytes:,} bytes once decompressed")
                    return
        except zlib.error:
            self._give_up("expected gzip data, found data that does not decompress")

    def _give_up(self, expected):
        """Keep nothing more: the data is refused, once its checksum has been compared."""
        self.problem = InputError(self.url, "compression", expected)
        self.kept = bytearray()

    def fetched(self, url, etag=None, last_modified=None):
        if self.inflater is not None and self.problem is None and not self.inflater.eof:
            self._give_up("expected complete gzip data (it is truncated)")
        return Fetched(url, self.kept, etag, last_modified, self.sha256.hexdigest(), self.size, self.problem)


class _NotFound(Exception):
    pass


class _Truncated(Exception):
    pass


class _Refused(Exception):
    """A redirect to somewhere other than http(s)."""


class _DeadlinePassed(Exception):
    pass


def _download(url, validators, progress, max_bytes, gzip):
    headers = {"User-Agent": f"spack-cache-db/{__version__}"}
    etag, last_modified = validators or (None, None)
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified

    def attempt(deadline):
        try:
            response = _open(urllib.request.Request(url, headers=headers), deadline)
        except urllib.error.HTTPError as error:
            if error.code == 304:
                error.close()
                return Fetched(url, None, etag, last_modified)
            raise
        with response:
            body = _read_body(url, response, deadline, progress, max_bytes, gzip)
            return body.fetched(url, response.headers.get("ETag"), response.headers.get("Last-Modified"))

    try:
        return _with_retries(url, attempt)
    except _NotFound as error:
        raise InputError(url, "download", f"expected the file to exist (HTTP {error})") from error


def _read_body(url, response, deadline, progress, max_bytes, gzip):
    """The body, a piece at a time: each read returns what has arrived, so the deadline is looked at often."""
    declared = _length(response.headers.get("Content-Length"))
    if declared is not None and declared > max_bytes:
        raise InputError(url, "size", f"expected at most {max_bytes:,} bytes, the server announces {declared:,}")
    body = _Body(url, max_bytes, gzip)
    while piece := response.read1(PIECE):
        deadline.check()
        body.add(piece)
        if progress:
            progress(len(piece))
    if declared is not None and body.size != declared:
        raise _Truncated(f"received {body.size:,} of the {declared:,} bytes announced")
    return body


def _length(text):
    """A Content-Length, or None when there is none that can be read."""
    return int(text) if text and len(text) <= 19 and text.isdigit() else None


def _open(request, deadline):
    """The response to request, within the deadline of the attempt; redirects stay on http(s)."""
    try:
        return _opener(deadline).open(request, timeout=TIMEOUT_SECONDS)
    except urllib.error.HTTPError as error:
        if error.code in (403, 404, 410):
            error.close()
            raise _NotFound(error.code) from error
        raise


def _opener(deadline):
    """An opener of http(s) URLs only (no file:, ftp: or data: handlers) whose connections deadline watches."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.UnknownHandler(),
        _HTTPHandler(),
        _HTTPSHandler(),
        urllib.request.HTTPDefaultErrorHandler(),
        _Redirects(),
        urllib.request.HTTPErrorProcessor(),
    ):
        handler.deadline = deadline
        opener.add_handler(handler)
    return opener


class _Watched:
    """A handler whose connections the attempt's deadline can cut short."""

    def do_open(self, http_class, request, **arguments):
        return super().do_open(self.deadline.watching(http_class), request, **arguments)


class _HTTPHandler(_Watched, urllib.request.HTTPHandler):
    pass


class _HTTPSHandler(_Watched, urllib.request.HTTPSHandler):
    pass


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Redirects that stay on http(s), at most MAX_REDIRECTS of them."""

    max_redirections = MAX_REDIRECTS
    inf_msg = "redirect loop: "  # how urllib starts the reason of the HTTPError it raises for a loop

    def http_error_302(self, request, fp, code, message, headers):
        target = headers.get("Location") or headers.get("URI") or ""
        scheme = urllib.parse.urlsplit(urllib.parse.urljoin(request.full_url, target)).scheme
        if scheme not in REMOTE_SCHEMES:  # urllib itself would follow ftp:, and refuse others in three lines
            fp.close()
            raise _Refused(f"the server redirects to a {scheme}: URL, and redirects must stay on http(s)")
        return super().http_error_302(request, fp, code, message, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


class _Deadline:
    """An attempt's deadline. A timer shuts the attempt's connections down when it passes, so that no read
    (of headers or of the body, however slowly the bytes come) outlasts it."""

    def __init__(self, seconds):
        self.seconds, self.passed, self.descriptors = seconds, False, []
        self.timer = threading.Timer(seconds, self._shut)
        self.timer.daemon = True

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, *exception):
        self.timer.cancel()

    def check(self):
        if self.passed:
            raise _DeadlinePassed

    def watching(self, http_class):
        """http_class, whose connections this deadline shuts down."""

        def connection(*arguments, **options):
            made = http_class(*arguments, **options)
            connect = made._create_connection  # http.client's hook for making the socket

            def connect_and_watch(*arguments, **options):
                sock = connect(*arguments, **options)
                self.descriptors.append(sock.fileno())  # kept when TLS wraps the socket
                if self.passed:
                    self._shut()
                return sock

            made._create_connection = connect_and_watch
            return made

        return connection

    def _shut(self):
        self.passed = True
        for descriptor in self.descriptors:
            try:
                with socket.socket(fileno=os.dup(descriptor)) as sock:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes a read waiting on it
            except OSError:  # closed already
                pass


def _with_retries(url, attempt):
    """attempt(), within a deadline, again after transient failures (time-outs, refused or dropped connections,
    HTTP 5xx and 429), at most ATTEMPTS times; then one InputError that says what went wrong last."""
    number, pause = 1, RETRY_PAUSE_SECONDS
    while True:
        with _Deadline(DEADLINE_SECONDS) as deadline:
            try:
                result = attempt(deadline)
                deadline.check()  # a read the deadline cut short can look like an answer that ended
                return result
            except (*_FAILURES, _DeadlinePassed) as error:
                if isinstance(error, urllib.error.HTTPError):
                    error.close()
                if deadline.passed:
                    raise InputError(url, "download", f"expected it to finish within {DEADLINE_SECONDS:,} s") from error
                if not _transient(error) or number == ATTEMPTS:
                    raise _failure(url, error, number) from error
        time.sleep(pause)
        number, pause = number + 1, pause * 2


# What a request can fail with: the network (OSError: sockets, ssl, time-outs, urllib's URLError), a server
# that does not speak HTTP (http.client), a URL that cannot be requested (ValueError), a body cut short.
_FAILURES = (OSError, http.client.HTTPException, ValueError, _Truncated, _Refused)


def _transient(error):
    if isinstance(error, urllib.error.HTTPError):
        return error.code in _TRANSIENT_STATUS
    return isinstance(error, OSError | _Truncated) or (
        isinstance(error, http.client.HTTPException) and not isinstance(error, http.client.InvalidURL)
    )


def _failure(url, error, attempts):
    """The one InputError that says how a request failed."""
    if isinstance(error, urllib.error.HTTPError):
        if str(error.reason).startswith(_Redirects.inf_msg):
            return InputError(url, "download", "expected an answer, but the redirects go round in a loop")
        return InputError(url, "download", f"expected HTTP 200, got {error.code} {str(error.reason)[:80]}")
    tries = f" ({attempts} attempts)" if attempts > 1 else ""
    return InputError(url, "download", f"expected an answer, but {_reason(error)}{tries}")


def _reason(error):
    if isinstance(error, urllib.error.URLError) and isinstance(error.reason, BaseException):
        error = error.reason
    text = one_line(error)[:200] or type(error).__name__
    if isinstance(error, TimeoutError):
        return f"no answer within {TIMEOUT_SECONDS} s"
    if isinstance(error, ValueError | http.client.InvalidURL):
        return f"the URL cannot be requested ({text})"
    return next((reason for kind, reason in _REASONS if isinstance(error, kind)), text)


_REASONS = (  # what the server did, in our words; others say it well enough themselves
    (ConnectionRefusedError, "the connection was refused"),
    (http.client.RemoteDisconnected, "the server closed the connection without answering"),
    (http.client.BadStatusLine, "the server's answer does not start with an HTTP status line"),
    (http.client.IncompleteRead, "the connection closed before the whole answer came"),
    (http.client.LineTooLong, "the server sent a line over 64 KiB"),
    (http.client.UnknownProtocol, "the server answers in another protocol than HTTP/1"),
)
