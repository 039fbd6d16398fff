"""Where a document may send us. Every place bytes are read from is a Location, and Locations are made here
only, by one policy:

- the user names local paths, file: URLs, http(s) URLs and s3://spack-binaries/... (read from
  https://binaries.spack.io/..., as cache.spack.io does) on the command line: Location.named;
- a document names others (a listing its indexes): one read over the network names only http(s) URLs (and
  s3://spack-binaries/); a local one, which the user named or which a local one names, may name local paths
  and file: URLs too: Location.join;
- a mirror's own files are below it, of its kind: Location.below, Location.up;
- redirects stay on http(s) (fetch.py).

A URL's query and fragment are never dropped: a build-cache file is named by its path alone, so a URL with
either is refused (a file: URL's '?/build_cache/index.json' would otherwise make any file look like an index).
"""

import os
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass

from spack_cache_db.records import InputError

S3_BUCKET = "s3://spack-binaries/"
S3_HTTPS = "https://binaries.spack.io/"
REMOTE_SCHEMES = ("http", "https")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")  # RFC 3986; use match
_NOT_IN_A_URL = re.compile(r"[^\x21-\x7e]")  # spaces, control characters, anything outside ASCII
_KINDS = "a local path, a file: URL, an http(s) URL or an s3://spack-binaries/ URL"


class Refused(Exception):
    """A location the policy does not allow, or text that is not one: says what was expected."""


@dataclass(frozen=True)
class Location:
    """A place to read bytes from: an http(s) URL, or (is_local) a local path or file: URL. Made by the policy
    only: named, join, below and up."""

    text: str  # as messages and the database show it: the URL read, or the path or file: URL as named
    is_local: bool

    def __str__(self):
        return self.text

    @classmethod
    def named(cls, text):
        """What the user named on the command line; raises InputError naming text when it is no location."""
        try:
            return cls._of(text, local=True) if is_url(text) else _local_path(text)
        except Refused as refused:
            raise InputError(_credentials_hidden(text), "location", str(refused)) from refused

    def join(self, reference, field):
        """The location reference names, found in the document at self (relative to it, as a browser resolves
        links); raises InputError naming this document and the field when the policy refuses it."""
        try:
            if _scheme(reference) is not None:
                return self._of(reference, local=self.is_local)
            if self.is_local and _scheme(self.text) != "file":
                return _local_path(reference if os.path.isabs(reference) else _beside(self.text, reference))
            return self._of(_urljoin(self.text, reference), local=self.is_local)
        except Refused as refused:
            raise InputError(self, field, str(refused)) from refused

    def below(self, path):
        """The file at path (ours, never a document's) below the folder or URL self."""
        return Location(self.text.rstrip("/") + "/" + path, self.is_local)

    def up(self, path):
        """The folder or URL that self is path below (self ends with /path)."""
        text = self.text.rstrip("/")
        if text != path and not text.endswith("/" + path):
            raise ValueError(f"{text} is not below {path}")
        return Location(text[: -len(path)].rstrip("/") or ".", self.is_local)

    @property
    def path(self):
        """The local file a local location names."""
        if _scheme(self.text) == "file":
            return urllib.request.url2pathname(urllib.parse.urlsplit(self.text).path)
        return self.text

    @classmethod
    def _of(cls, url, *, local):
        """The URL as a Location; local: whether file: URLs are allowed (the document naming it is local)."""
        scheme = _scheme(url)
        if scheme == "s3":
            if not url.startswith(S3_BUCKET):
                raise Refused(f"expected an s3 URL under {S3_BUCKET} (other buckets have no public address)")
            return cls(_checked_url(S3_HTTPS + url[len(S3_BUCKET) :]), False)
        if scheme in REMOTE_SCHEMES:
            return cls(_checked_url(url), False)
        if scheme == "file" and local:
            return _file_url(url)
        if not local:
            raise Refused(
                "expected an http(s) URL (a document read over the network names nothing else),"
                f" found {'a ' + scheme + ': URL' if scheme else 'a path'}"
            )
        raise Refused(f"expected {_KINDS}, found a {scheme}: URL")


def is_url(text):
    """Whether text is a URL of a kind we read (http, https, s3, file)."""
    return _scheme(str(text)) in (*REMOTE_SCHEMES, "s3", "file")


def _scheme(text):
    """The URL scheme text starts with, in lower case, or None (a path)."""
    match = _SCHEME.match(text)
    return match[1].lower() if match else None


def _checked_url(url):
    """url, when it is an http(s) URL that can be requested as it is written."""
    if _NOT_IN_A_URL.search(url):
        raise Refused("expected a URL of printable ASCII (percent-encode spaces and other characters)")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number from 0 to 65535)
    except ValueError as error:
        raise Refused(f"expected a URL, found one that cannot be read ({error})") from error
    if not parts.hostname:
        raise Refused("expected a URL with a host")
    if "@" in parts.netloc:
        raise Refused("expected a URL without a user name or password (they would be kept and shown with it)")
    _refuse_query_and_fragment(url)
    return url


def _credentials_hidden(text):
    """text with the user name and password of a URL, if it has them, written as ***: what messages show."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@", r"\1***@", text)


def _refuse_query_and_fragment(url):
    if "?" in url or "#" in url:
        raise Refused(
            "expected a URL without ?query or #fragment (build-cache files are named by their path alone;"
            " percent-encode '?' and '#' in names)"
        )


def _file_url(text):
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError as error:
        raise Refused(f"expected a file: URL, found one that cannot be read ({error})") from error
    if parts.netloc not in ("", "localhost"):
        raise Refused(f"expected a file: URL of this machine (file:///path), found one of host {parts.netloc!r:.80}")
    _refuse_query_and_fragment(text)
    location = Location(text, True)
    _local_path(location.path)
    return location


def _local_path(path):
    if "\x00" in path:
        raise Refused("expected a path without NUL characters")
    try:
        os.fsencode(path)
    except UnicodeError as error:
        raise Refused("expected a path this system can spell (it holds a lone surrogate)") from error
    return Location(path, True)


def _urljoin(base, reference):
    try:
        return urllib.parse.urljoin(base, reference)
    except ValueError as error:
        raise Refused(f"expected a URL, found one that cannot be read ({error})") from error


def _beside(document, reference):
    """reference, relative to the folder of the local document."""
    return os.path.normpath(os.path.join(os.path.dirname(document), reference))
