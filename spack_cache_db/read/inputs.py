"""What the build's arguments are: cache pages (files and folders), listings of build-cache indexes
(cache_spack_io_index.json) or single mirrors and indexes (TAG=LOCATION, or a bare LOCATION)."""

import fnmatch
import os
from dataclasses import dataclass, field

from spack_cache_db.read import fetch
from spack_cache_db.read import indexes as read_indexes
from spack_cache_db.read.locations import Location, is_url
from spack_cache_db.records import InputError

_MIRROR_MARKERS = ("v3/layout.json", "build_cache/index.json")


@dataclass
class Arguments:
    pages: list = field(default_factory=list)  # files and folders of cache pages
    listings: list = field(default_factory=list)  # cache_spack_io_index.json files or URLs
    mirrors: list = field(default_factory=list)  # TAG=LOCATION or LOCATION of a mirror or an index


def classify(arguments):
    """Sort the command line's arguments by what they are; a local path that does not exist is an error."""
    found = Arguments()
    for argument in map(str, arguments):
        kind = _kind(argument)
        getattr(found, kind).append(argument)
    return found


def is_remote(argument):
    """A URL, or TAG=LOCATION: nothing to find on this machine (yet)."""
    return is_url(argument) or read_indexes.names_a_tag(argument)


def _kind(argument):
    if read_indexes.names_a_tag(argument):
        return "mirrors"
    if is_url(argument):
        return "listings" if read_indexes.is_listing(argument) else "mirrors"
    if not os.path.exists(argument):
        raise InputError(argument, "path", "expected an existing file or folder, a URL, or TAG=LOCATION")
    if os.path.isdir(argument):
        is_mirror = any(os.path.isfile(os.path.join(argument, marker)) for marker in _MIRROR_MARKERS)
        return "mirrors" if is_mirror else "pages"
    if read_indexes.is_listing(argument):
        return "listings"
    if argument.endswith(".json") or read_indexes.is_blob(argument):
        return "listings" if _looks_like_a_listing(argument) else "mirrors"
    return "pages"


def _looks_like_a_listing(path):
    """A JSON file is an index when it starts as one ({"database": ...}); otherwise a listing of tags."""
    with open(path, "rb") as f:
        start = f.read(256).lstrip().removeprefix(b"{").lstrip()
    return not start.startswith(b'"database"')


def index_sources(arguments, tags, progress=None):
    """The IndexSources the listings and mirrors name, only for tags matching one of the shell-style patterns
    in tags (all tags when there is none); listings are read here."""
    sources = []
    for listing in map(Location.named, arguments.listings):
        data = fetch.fetch(listing, max_bytes=64 * 1024**2, progress=progress).data
        sources.extend(read_indexes.listing_sources(listing, data))
    sources.extend(read_indexes.mirror_source(mirror) for mirror in arguments.mirrors)
    sources = [source for source in sources if wanted(source.tag, tags)]
    seen = {}
    for source in sources:
        key = (source.tag, source.label)
        if key in seen and seen[key] != source.location:
            raise InputError(
                source.location,
                "label",
                f"expected one index per tag and stack: {source.tag} {source.label} is also {seen[key]}",
            )
        seen[key] = source.location
    return list({(s.tag, s.label): s for s in sources}.values())


def wanted(tag, patterns):
    return not patterns or any(fnmatch.fnmatchcase(tag, pattern) for pattern in patterns)
