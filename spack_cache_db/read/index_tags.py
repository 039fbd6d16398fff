"""The index side of a build: which tags' build-cache indexes changed since the last build (by their content
addresses, without downloading them), and reading a changed tag into the loader.

A tag is the unit: its binaries and their stacks come from all its indexes together. Within a changed tag,
an index whose content address is unchanged is not downloaded again when the indexes that are downloaded
hold the facts of every binary it lists: its part (which binaries it has) is taken from the last build."""

import dataclasses
import sqlite3
from dataclasses import dataclass, field

from spack_cache_db import normalise
from spack_cache_db.db.connection import database_uri
from spack_cache_db.read import indexes as read_indexes
from spack_cache_db.read.indexes import ROOT, ParsedIndex
from spack_cache_db.records import InputError

_IMMUTABLE = ("snapshot", "release")  # such tags never change once published


@dataclass
class Stored:
    """An index as the last build recorded it (a row of the indexes table)."""

    url: str
    mirror_url: str
    layout: str
    database_version: str
    checksum: str
    etag: str | None
    last_modified: str | None
    records: int


@dataclass
class IndexTag:
    """A tag to read from its indexes."""

    tag: str
    read: list  # Resolved, root first: downloaded this build
    reused: dict = field(default_factory=dict)  # label -> (Resolved, Stored, {hash}): unchanged, its part known
    failures: list = field(default_factory=list)  # InputError of stacks skipped with --keep-going


@dataclass
class IndexPlan:
    tags: set = field(default_factory=set)  # every tag the index inputs give
    to_load: list = field(default_factory=list)  # IndexTag
    unchanged: list = field(default_factory=list)  # tag names
    removed: list = field(default_factory=list)  # tags the last build read from indexes and no input gives now
    failures: list = field(default_factory=list)  # (tag, InputError): tags skipped with --keep-going


def stored_indexes(conn):
    """{tag: {label: Stored}} from an existing database."""
    found = {}
    rows = conn.execute(
        "SELECT tags.name, stacks.name, indexes.url, indexes.mirror_url, layout, database_version, checksum, etag,"
        " last_modified, records FROM indexes JOIN tags ON tags.id = tag_id JOIN stacks ON stacks.id = stack_id"
    )
    for tag, label, *row in rows:
        found.setdefault(tag, {})[label] = Stored(*row)
    return found


def plan(sources, stored, existing_path, keep_going):
    """What to do with each tag the sources give, compared with what the last build stored."""
    by_tag = {}
    for source in sources:
        by_tag.setdefault(source.tag, []).append(source)
    result = IndexPlan(tags=set(by_tag), removed=sorted(set(stored) - set(by_tag)))
    for tag, tag_sources in sorted(by_tag.items()):
        tag_sources.sort(key=lambda s: (s.label != ROOT, s.label))
        before = stored.get(tag, {})
        if _immutable_and_same(tag, tag_sources, before):
            result.unchanged.append(tag)
            continue
        try:
            index_tag = _probe(tag, tag_sources, before, keep_going)
        except InputError as error:
            if not keep_going:
                raise
            result.failures.append((tag, error))
            continue
        if _all_same(index_tag, before):
            result.unchanged.append(tag)
        else:
            _reuse_unchanged_parts(index_tag, before, existing_path)
            result.to_load.append(index_tag)
    return result


def _immutable_and_same(tag, sources, before):
    """A snapshot or a release listed as last time: nothing to ask the network."""
    return (
        normalise.classify_tag(tag).kind in _IMMUTABLE
        and {s.label for s in sources} == set(before)
        and all(_listed_where_read(s.location, before[s.label]) for s in sources)
    )


def _listed_where_read(location, stored):
    """Whether a listing names the index the last build read: by its own URL (a v3 blob, a v2 index.json), or
    by the mirror it was read from. The same mirror named by another index URL (moved to v3 in place) is not."""
    return str(location).rstrip("/") in (stored.url, stored.mirror_url)


def _probe(tag, sources, before, keep_going):
    """Resolve every index of the tag (a manifest or a hash file each, at most); a stack that fails is
    skipped with keep_going, the root never."""
    index_tag = IndexTag(tag, [])
    for source in sources:
        try:
            resolved = read_indexes.resolve(source)
            if resolved.checksum is None:  # an index file with no companion hash: its bytes tell
                stored = before.get(source.label)
                same_file = stored is not None and stored.url == str(resolved.index_url)
                validators = (stored.etag, stored.last_modified) if same_file else None
                resolved.fetched = read_indexes.download(resolved, validators=validators)
                if resolved.fetched.data is None:
                    resolved.checksum = stored.checksum
        except InputError as error:
            if source.label == ROOT or not keep_going:
                raise
            index_tag.failures.append(error)
            continue
        index_tag.read.append(resolved)
    return index_tag


def _all_same(index_tag, before):
    """Whether every index is where it was (its URL and mirror, which the database shows) with the content it
    had."""
    return (
        not index_tag.failures
        and {r.source.label for r in index_tag.read} == set(before)
        and all(_address(r) == _address(before[r.source.label]) for r in index_tag.read)
    )


def _address(index):
    """What says where an index is and what it holds, as the indexes table records it: a Resolved's, or a
    Stored's (an index without a content address: its HTTP validators too)."""
    if isinstance(index, Stored):
        validators = _validators(index.layout, index.etag, index.last_modified)
        return index.url, index.mirror_url, index.layout, index.checksum, *validators
    fetched = index.fetched
    validators = _validators(index.layout, *((fetched.etag, fetched.last_modified) if fetched else (None, None)))
    return str(index.index_url), index.mirror_url, index.layout, index.checksum, *validators


def _reuse_unchanged_parts(index_tag, before, existing_path):
    """Stacks whose index did not change keep their part of the tag, known from the last build (wherever the
    index is now: its content is the same)."""
    unchanged = [
        r
        for r in index_tag.read
        if r.source.label != ROOT
        and r.source.label in before
        and r.checksum == before[r.source.label].checksum
        and r.checksum is not None
    ]
    if not unchanged or existing_path is None:
        return
    conn = sqlite3.connect(database_uri(existing_path), uri=True)
    try:
        for resolved in unchanged:
            label = resolved.source.label
            members = {row[0] for row in conn.execute(_MEMBERS, (index_tag.tag, label))}
            index_tag.reused[label] = (resolved, before[label], members)
            index_tag.read.remove(resolved)
    finally:
        conn.close()


_MEMBERS = """
SELECT specs.hash FROM pages
JOIN tags ON tags.id = pages.tag_id
JOIN page_specs ON page_specs.page_id = pages.id
JOIN specs ON specs.id = page_specs.spec_id
JOIN listings ON listings.id = page_specs.listing_id
JOIN stack_set_members ON stack_set_members.stack_set_id = listings.stack_set_id
JOIN stacks ON stacks.id = stack_set_members.stack_id
WHERE tags.name = ? AND stacks.name = ?
"""


def read_tag(index_tag, configurations, keep_going, progress=None):
    """(TagRecords, [indexes rows without their ids: (label, Stored)]) for a tag: its changed indexes downloaded,
    verified and parsed; its unchanged ones taken from the last build, or downloaded when what was read does
    not hold the facts of their binaries. A stack that fails is skipped with keep_going, the root never."""
    indexes, rows, known = [], [], {}
    for resolved in index_tag.read:  # root first: it has the facts of (nearly) every binary of the tag
        try:
            index = _read_index(resolved, known, progress)
        except InputError as error:
            if resolved.source.label == ROOT or not keep_going:
                raise
            index_tag.failures.append(error)
            continue
        indexes.append(index)
        rows.append((resolved.source.label, _stored(resolved, index)))
        for spec_hash, record in index.records.items():
            known.setdefault(spec_hash, record)
    for label, (resolved, stored, members) in sorted(index_tag.reused.items()):
        if members <= known.keys():
            records = {h: read_indexes.as_binary(known[h]) for h in members}
            url = str(resolved.index_url)
            indexes.append(ParsedIndex(label, url, stored.checksum, stored.database_version, records, stored.records))
            rows.append((label, _stored_again(resolved, stored)))
        else:
            indexes.append(_read_index(resolved, known, progress))
            rows.append((label, _stored(resolved, indexes[-1])))
    indexes.sort(key=lambda index: (index.label != ROOT, index.label))  # as a fresh build has them
    return read_indexes.tag_records(index_tag.tag, indexes, configurations), rows


def _read_index(resolved, known, progress):
    """A downloaded index parsed; a stack's index whose binaries the indexes read before have the facts of is
    only listed (which binaries it has)."""
    if progress:
        progress.index_started(resolved.source)
    if resolved.fetched is None or resolved.fetched.data is None:  # not downloaded yet, or only asked about
        resolved.fetched = read_indexes.download(resolved, progress=progress.downloaded if progress else None)
    if progress:
        progress.index_read()
    data, label, url = resolved.fetched.data, resolved.source.label, str(resolved.index_url)
    resolved.fetched = dataclasses.replace(resolved.fetched, data=None)  # the bytes are not kept past this
    if label != ROOT and known:
        version, binaries, size = read_indexes.listed_binaries(url, data)
        if binaries <= known.keys():
            records = {h: read_indexes.as_binary(known[h]) for h in binaries}
            return ParsedIndex(label, url, resolved.checksum, version, records, size)
    return read_indexes.parse_index(url, label, resolved.checksum, data)


def _stored(resolved, index):
    return Stored(
        str(resolved.index_url),
        resolved.mirror_url,
        resolved.layout,
        index.version,
        resolved.checksum,
        *_validators(resolved.layout, resolved.fetched.etag, resolved.fetched.last_modified),
        index.size,
    )


def _stored_again(resolved, stored):
    """The row of an index whose content did not change, where it is now."""
    return Stored(
        str(resolved.index_url),
        resolved.mirror_url,
        resolved.layout,
        stored.database_version,
        stored.checksum,
        *_validators(resolved.layout, stored.etag, stored.last_modified),
        stored.records,
    )


def _validators(layout, etag, last_modified):
    """HTTP validators, kept only for an index with no content address (layout 'file'): the next build asks
    with them whether it changed. Others' checksums say it; their validators would only differ between
    builds that read the same content."""
    return (etag, last_modified) if layout == "file" else (None, None)
