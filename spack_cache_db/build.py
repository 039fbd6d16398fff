"""The build: plan what changed, load it into a temporary copy, finish the file, swap it in atomically."""

import gc
import json
import multiprocessing
import os
import re
import shutil
import signal
import sqlite3
import threading
import time
from collections import Counter
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from operator import attrgetter
from pathlib import Path

from spack_cache_db import __version__
from spack_cache_db.db import load, maintenance, microarchitectures, schema
from spack_cache_db.db.connection import database_uri, open_for_build, sort_on_spare_cores
from spack_cache_db.db.schema import ROWS, SCHEMA_DIGEST, SCHEMA_VERSION, create_schema, of_this_schema
from spack_cache_db.db.writer import BackgroundWriter, process_start_method
from spack_cache_db.read import index_tags, inputs
from spack_cache_db.read.files import FileError, FolderListing, read_ahead, read_start, same_identity
from spack_cache_db.read.pages import (
    NotACachePage,
    OldLayoutPage,
    file_digest,
    find_inputs,
    page_document,
    read_page,
    read_source,
    read_tags_yaml,
    recorded_folders,
)
from spack_cache_db.records import Configurations, InputError

FLUSH_EVERY = 20000  # queued binaries before rows are written, once the writer is under way
# The first batch's binaries: batches grow from it to FLUSH_EVERY, and shrink back to it as the pages run out,
# so that the writer starts soon after the build does, and has little left to write once the last page is read.
# Side by side with batches of FLUSH_EVERY throughout: adding a tag to a 100-tag history took 0.20 s less of
# 4.03 (usual shape; 0.26 s less of 5.90 in the spread shape), building that tag alone 0.18 s less of 1.68
# (0.22 of 2.64), so the one's ratio to the other did not shrink; the whole history's build was within its noise
# (69-75 s against 71-72).
FLUSH_LEAST = 2500
# Reading makes many objects per binary: the garbage collector's default (a look at the young objects every 700
# allocations) cost a tenth of the reading's CPU, looking for cycles the build does not make. Every flush freezes
# what it keeps (_flush_now_and_then), so with a million a collection runs only when that many objects pile up
# between two flushes (gc.freeze starts the count again): 100,000 still cost 4.3 s of the reader's CPU in the
# spread shape's first 30 tags (82 collections, of the rows queued), a million none; with no collection at all,
# one after the load found nothing to free. The same holds before the load: the walk makes a few objects per file
# while the earlier build's record of every file is held (find_page_inputs), and the collections it set off looked
# through that record. Finding the usual 100-tag history's 90,000 pages unchanged took 2.1-2.7 s with the default,
# 1.5-1.7 s with a million (benchmarks/floors.py, alternating); before the record was read ahead of the walk, the
# default cost nothing there (2.2-2.4 s either way).
YOUNG_OBJECTS_PER_COLLECTION = 1_000_000


@contextmanager
def fewer_collections():
    """Run the body with the garbage collector looking at young objects every YOUNG_OBJECTS_PER_COLLECTION."""
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS_PER_COLLECTION, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


class BuildError(Exception):
    """The build stopped: the message says why; the output was left as it was."""


class Interrupted(Exception):
    """The build was interrupted (Ctrl-C, SIGTERM) once its new database was made: replaced says whether the
    rename had put it in the output's place already (so the output is the new database, whole) or not (the
    output was left as it was)."""

    def __init__(self, replaced):
        super().__init__(replaced)
        self.replaced = replaced


@dataclass
class Summary:
    output: str
    pages_read: int = 0
    pages_unchanged: int = 0
    pages_removed: int = 0
    rejected: list = field(default_factory=list)  # InputError
    warnings: list = field(default_factory=list)  # (path, field, message)
    old_layout: int = 0
    skipped_pages: Counter = field(default_factory=Counter)  # tag -> pages not read: another input has the tag
    index_tags_read: list = field(default_factory=list)
    index_tags_unchanged: int = 0
    indexes_read: int = 0
    index_failures: list = field(default_factory=list)  # InputError: tags or stacks skipped with --keep-going
    failed_tags: list = field(default_factory=list)  # tags whose indexes failed while their rows were written
    up_to_date: bool = False
    incremental: bool = False
    seconds: float = 0.0
    counts: dict = field(default_factory=dict)


@dataclass
class Plan:
    to_read: list  # SourceFile
    touched: list  # (SourceFile, stat): same content, new mtime
    relisted: list  # SourceFile: unchanged, in a folder whose listing is another than recorded (written with others)
    unchanged: int
    removed: list  # paths
    tags: list  # (tag name, [stacks]) from _data/tags.yaml
    tags_digest: str
    tags_changed: bool  # _data/tags.yaml declares other tags or stacks than the last build read
    indexes: index_tags.IndexPlan
    page_tags: str  # which tags pages may give (none that indexes give; only those --tag asks for)
    skipped: Counter  # tag -> page files not read, by their folder: the tag is read from its indexes or not asked for
    problems: list  # InputError: unreadable folders, links out of an input, names not in UTF-8 (--keep-going)
    # (SourceFile, what the earlier build recorded) of files not yet stat'ed: a build that only adds checks them
    # while it loads (RecordedCheck), and the other fields count none of them
    unchecked: list = field(default_factory=list)


def build(paths, output, *, keep_going=False, strict=False, tags=(), overwrite=False, progress=None):
    """Build (or bring up to date) the database at output from the pages, build-cache indexes and mirrors in
    paths; with tags (shell-style patterns), only the tags that match. overwrite: replace output even when
    it is not a database this project built."""
    with fewer_collections():
        return _build(paths, output, keep_going, strict, tags, overwrite, progress)


def _build(paths, output, keep_going, strict, tags, overwrite, progress):
    started = time.monotonic()
    output = Path(output)
    _refuse_output_inside_inputs(paths, output)
    remove_stale_temporaries(output)
    arguments = inputs.classify(paths)
    existing = _existing_sources(output, overwrite)
    page_inputs = find_page_inputs(arguments, existing)
    if page_inputs.problems and not keep_going:
        raise page_inputs.problems[0]
    index_plan = _plan_indexes(arguments, tags, existing, output, keep_going, progress)
    temporary = output.with_name(f".{output.name}.tmp-{os.getpid()}")
    # A build that deletes pages' rows before it writes copies output first: the copy is made while the plan
    # stats the files it has not found changed. A build that only adds stats them while it loads, and if one of
    # them changed, plans and writes again, with nothing kept of that first try.
    with CopyAhead(output, temporary) as copy_ahead:
        written = (paths, output, temporary, existing, keep_going, strict, tags, progress, copy_ahead)
        try:
            plan = _plan(page_inputs, existing, index_plan, tags, copy_ahead.start, check_while_loading=True)
            summary = _write_planned(plan, *written)
        except RecordedFilesChanged:
            summary = _write_planned(_plan(page_inputs, existing, index_plan, tags, copy_ahead.start), *written)
    summary.seconds = time.monotonic() - started
    return summary


def _write_planned(plan, paths, output, temporary, existing, keep_going, strict, tags, progress, copy_ahead):
    """The Summary of a build that wrote what the plan says, or found nothing to do."""
    summary = Summary(
        str(output),
        incremental=existing is not None,
        pages_unchanged=plan.unchanged,
        pages_removed=len(plan.removed),
        skipped_pages=Counter(plan.skipped),
        index_tags_unchanged=len(plan.indexes.unchanged),
        index_failures=[error for _, error in plan.indexes.failures],
    )
    if existing is not None and _nothing_to_do(plan, existing):
        summary.up_to_date = True
        summary.counts = counts(output)
    else:
        _write(paths, output, temporary, existing, plan, summary, keep_going, strict, tags, progress, copy_ahead)
    return summary


def _write(paths, output, temporary, existing, plan, summary, keep_going, strict, tags, progress, copy_ahead):
    """Write what the plan says into temporary (a new file, or a copy of output: copy_ahead's, if it made one)
    and swap it in for output."""
    compacted = temporary.with_name(temporary.name + ".new")
    deleted_first = _deleted_first(plan, existing) if existing is not None else ([], [])
    adding = existing is not None and not any(deleted_first)  # nothing to delete before the new rows are written
    renamed = None  # the file that replaces output, once the rename may have been done
    try:
        if existing is None:
            temporary.touch(exist_ok=False)  # says why it cannot be created, where SQLite says 'unable to open'
        elif adding:  # the writer copies it while this process reads the new pages, looking rows up in the output
            with RecordedCheck(plan.unchecked) as check, closing(sqlite3.connect(database_uri(output), uri=True)) as db:
                loaded = _load(db, temporary, plan, summary, keep_going, tags, progress, copy_of=output, check=check)
        elif not copy_ahead.made():
            shutil.copyfile(output, temporary)
        conn = open_for_build(temporary)
        try:
            if existing is None:
                create_schema(conn)
            _watch_deletions(conn, summary)
            if not adding:
                loaded = _load(conn, temporary, plan, summary, keep_going, tags, progress, deleted_first)
            first_ids, uncounted_tags = _after_load(conn, loaded, summary)
            if not (summary.pages_read or summary.rejected or summary.old_layout or _pages_kept(conn)):
                raise BuildError(
                    f"{', '.join(map(str, paths))}: expected cache pages (such as _cache/<tag>/<package>/specs.md)"
                    " or build-cache indexes, found none"
                )
            if strict and (summary.warnings or summary.old_layout):
                raise BuildError(
                    f"--strict: {len(summary.warnings) + summary.old_layout} warning(s), e.g. {_first_warning(summary)}"
                )
            summary.counts = _finish(conn, first_ids, uncounted_tags, paths, plan, summary)
            finished = temporary
            if existing is None or _worth_compacting(conn):
                conn.execute("VACUUM INTO ?", (database_uri(compacted, "rwc"),))
                finished = compacted
        finally:
            conn.close()
        renamed = finished
        _swap_in(finished, output)
    except KeyboardInterrupt:
        # The rename is atomic: the file is gone from beside the output exactly when it is the output.
        raise Interrupted(replaced=renamed is not None and not renamed.exists()) from None
    except (sqlite3.Error, OSError) as error:
        raise BuildError(f"{output}: could not write the new database beside it ({error})") from error
    finally:
        _remove_quietly(temporary)
        _remove_quietly(compacted)


def _nothing_to_do(plan, existing):
    indexes = plan.indexes
    return (
        not (plan.to_read or plan.touched or plan.removed)
        and plan.tags_digest == existing["tags"]
        and {(e.path, e.field, e.expected) for e in plan.problems} == existing["input_problems"]
        and not (indexes.to_load or indexes.removed or indexes.failures)
    )


def _plan_indexes(arguments, tags, existing, output, keep_going, progress):
    sources = inputs.index_sources(arguments, tags)
    stored = existing["indexes"] if existing else {}
    return index_tags.plan(sources, stored, output if existing else None, keep_going)


def _pages_kept(conn):
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pages)").fetchone()[0]


def _first_warning(summary):
    if summary.warnings:
        path, field_name, message = summary.warnings[0]
        return f"{path}: {field_name}: {message}"
    return f"{summary.old_layout} page(s) of the old per-package layout skipped"


def remove_stale_temporaries(output):
    """Temporary files left by a build that was killed (its process is gone)."""
    for candidate in output.parent.glob(f".{output.name}.tmp-*"):
        pid = re.fullmatch(r"(\d+)(?:\.new)?", candidate.name.rsplit(".tmp-", 1)[-1])
        if pid and not _process_alive(int(pid.group(1))):
            _remove_quietly(candidate)


def _remove_quietly(path):
    """Clean up without hiding why the build stopped: on a read-only or failing file system even removing a
    file that is not there fails, and a file left behind is removed by the next build."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _process_alive(pid):
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


SQLITE_HEADER = b"SQLite format 3\x00"


def _existing_sources(output, overwrite=False):
    """What an earlier build of output read, or None when output has to be built from scratch. A file this
    project did not build is refused, unless overwrite; something that is not a file, always."""
    header = read_start(output, len(SQLITE_HEADER))
    if not header:  # nothing there, or an empty file: nothing to lose
        return None
    if header != SQLITE_HEADER:
        return _not_ours(output, "expected a SQLite database built by spack-cache-db (or a new path)", overwrite)
    try:
        conn = sqlite3.connect(database_uri(output), uri=True)
        try:
            info = dict(conn.execute("SELECT key, value FROM build_info"))
            if "spack_cache_db_version" not in info:
                return _not_ours(output, "expected a database built by spack-cache-db, found another", overwrite)
            if not of_this_schema(info):
                return None
            # (identity, digest, outcome, its folder's listing) by path, the identity as a plain tuple: ninety
            # thousand Identity objects would cost a third more, and a tuple compares equal to one.
            sources = {
                row[0]: (row[1:5], row[5], row[6], None if row[7] is None else FolderListing(*row[7:]))
                for row in conn.execute(
                    f"SELECT path, size, mtime_ns, ctime_ns, inode, digest, outcome, {', '.join(FOLDER_COLUMNS)}"
                    " FROM sources"
                )
            }
            input_problems = set(conn.execute(INPUT_PROBLEMS))
            indexes = index_tags.stored_indexes(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        return _not_ours(output, f"expected a database built by spack-cache-db ({error})", overwrite)
    return {
        "sources": sources,
        "tags": info.get("tags_digest", ""),
        "page_tags": info.get("page_tags", ""),
        "input_problems": input_problems,
        "indexes": indexes,
    }


def find_page_inputs(arguments, existing):
    """The page files of the inputs (pages.Inputs); the folders an earlier build recorded as unchanged since are
    not listed again."""
    recorded = {}
    if existing is not None:
        recorded = recorded_folders((path, known[3]) for path, known in existing["sources"].items())
    return find_inputs(arguments.pages, recorded)


def _not_ours(output, expected, overwrite):
    """None (build output from scratch) with overwrite; otherwise the build stops."""
    if overwrite:
        return None
    raise BuildError(f"{output}: {expected}; refusing to replace it (--overwrite replaces it anyway)")


def _refuse_output_inside_inputs(paths, output):
    """A build must not read its own output: an output inside an input folder would be read as input by the
    next build (inside _cache/, as a page that cannot be read)."""
    where = Path(output).resolve()
    for given in paths:
        folder = Path(given).resolve()
        if os.path.isdir(folder) and where.is_relative_to(folder):
            raise BuildError(
                f"{output}: expected an output outside the inputs; {given} holds it, so the next build would"
                " read it as input"
            )


# Problems about inputs rather than files read (a folder that could not be read): an incremental build
# records them again.
INPUT_PROBLEMS = "SELECT path, field, message FROM problems WHERE path NOT IN (SELECT path FROM sources)"


def _plan(page_inputs, existing, index_plan, tags, on_deleting=lambda: None, check_while_loading=False):
    """What the build reads, updates and deletes. on_deleting is called once the plan knows the build deletes
    pages' rows before it writes (_deleted_first): when it finds files removed or recorded ones to read again,
    before it stats the others; or at the first of those it finds changed. check_while_loading: a build that
    reads new files and deletes nothing first leaves the files recorded before unchecked, for its load to check
    (RecordedCheck)."""
    tags_yaml = [
        (tag, stacks)
        for path in page_inputs.tags_yaml
        for tag, stacks in read_tags_yaml(path)
        if inputs.wanted(tag, tags)
    ]
    tags_digest = file_digest(json.dumps(tags_yaml).encode())
    page_tags = json.dumps([sorted(index_plan.tags), list(tags)])
    known = existing["sources"] if existing else {}
    read_skipped_again = existing is None or existing["page_tags"] != page_tags
    to_read, recorded, skipped, seen = [], [], Counter(), set()
    for source in page_inputs.files:
        folder_tag = source.folder_tag
        if folder_tag is not None and (folder_tag in index_plan.tags or not inputs.wanted(folder_tag, tags)):
            skipped[folder_tag] += 1
            continue
        seen.add(source.path)
        before = known.get(source.path)
        if before is None or before[2] == "rejected" or (folder_tag is None and read_skipped_again):
            to_read.append(source)
        else:
            recorded.append((source, before))
    removed = [path for path in known if path not in seen]
    unchecked = []
    if _pages_deleted_first(removed, to_read, known):
        on_deleting()
    elif check_while_loading and recorded and _only_adds(to_read, index_plan, existing):
        unchecked, recorded = recorded, []
    touched, relisted, unchanged, changed = _check_recorded(recorded, on_deleting)
    if changed:  # the load takes a tag's pages together, in path order
        to_read = sorted(to_read + changed, key=attrgetter("path"))
    return Plan(
        to_read,
        touched,
        relisted,
        unchanged,
        removed,
        tags_yaml,
        tags_digest,
        existing is not None and tags_digest != existing["tags"],
        index_plan,
        page_tags,
        skipped,
        page_inputs.problems,
        unchecked=unchecked,
    )


def _only_adds(to_read, index_plan, existing):
    """Whether a build onto existing that reads these new files (none recorded by it) and indexes writes rows
    and deletes none first, once it finds the files recorded before unchanged."""
    return bool(to_read or index_plan.to_load) and not _index_tags_deleted_first(index_plan, existing)


def _check_recorded(recorded, on_deleting=lambda: None):
    """(touched, relisted, unchanged, changed) of recorded, (SourceFile, what an earlier build recorded of it):
    as Plan has them, and the files changed, to read again (on_deleting is called at the first)."""
    touched, relisted, unchanged, changed = [], [], 0, []
    for source, before in recorded:
        change = _change(source, before)
        if change is None:
            unchanged += 1
            if source.listing != before[3]:
                relisted.append(source)
            continue
        if change == "content":  # read again: deleted first
            on_deleting()
            changed.append(source)
        else:
            touched.append((source, change))
    return touched, relisted, unchanged, changed


def _change(source, before):
    """None when the file is as an earlier build read it (size, mtime, ctime and inode); the new Identity when
    only that changed (a copy, a touch: the same digest); 'content' otherwise, and when it cannot be read
    now: reading it again will say why."""
    recorded, digest = before[:2]
    try:
        if same_identity(os.stat(source.path), recorded):
            return None
        data, now = read_source(source)
    except (OSError, FileError):
        return "content"
    return now if file_digest(data) == digest else "content"


def _deleted_first(plan, existing):
    """(paths, tags) whose rows a build onto the existing database deletes before it loads (but for what the
    writer deletes first, _refreshed): the pages gone or read again, and the tags of indexes gone, read again
    or failed (--keep-going) that the database has."""
    paths = _pages_deleted_first(plan.removed, plan.to_read, existing["sources"])
    return paths, _index_tags_deleted_first(plan.indexes, existing)


def _index_tags_deleted_first(indexes, existing):
    """The tags of indexes gone, read again or failed (--keep-going) that the existing database has."""
    given = [*(index_tag.tag for index_tag in indexes.to_load), *(tag for tag, _ in indexes.failures)]
    return indexes.removed + [tag for tag in given if tag in existing["indexes"]]


def _pages_deleted_first(removed, to_read, known):
    """The paths of the pages whose rows a build deletes before it loads: those gone, and those read again (known:
    the sources an earlier build recorded)."""
    return removed + [source.path for source in to_read if source.path in known]


# {table: WHERE} of the rows every build onto an existing database deletes before it writes (the writer does,
# first): it records them again as it reads.
DELETED_BEFORE_WRITING = {
    "tag_stacks": "true",  # from tags.yaml
    "problems": "path NOT IN (SELECT path FROM sources)",  # problems with inputs rather than files read
}


def _refreshed(plan):
    """The statements, (SQL, parameters), that the writer runs first in every build onto an existing database."""
    return [
        *((f"DELETE FROM {table} WHERE {where}", ()) for table, where in DELETED_BEFORE_WRITING.items()),
        *_sources_updated(plan.touched, plan.relisted),
    ]


def _sources_updated(touched, relisted):
    """The statements, (SQL, parameters), that record the identities of touched files (Plan.touched) and the
    folder listings of relisted ones."""
    return [
        *(
            (
                f"UPDATE sources SET mtime_ns = :mtime_ns, ctime_ns = :ctime_ns, inode = :inode, {_SET_FOLDER}"
                " WHERE path = :path",
                {**now._asdict(), **_folder_columns(source.listing), "path": source.path},
            )
            for source, now in touched
        ),
        *(
            (
                f"UPDATE sources SET {_SET_FOLDER} WHERE path = :path",
                {**_folder_columns(source.listing), "path": source.path},
            )
            for source in relisted
        ),
    ]


# sources' columns of the listing of a file's folder, named after FolderListing's fields
FOLDER_COLUMNS = tuple(f"folder_{name}" for name in FolderListing._fields)
_SET_FOLDER = ", ".join(f"{column} = :{column}" for column in FOLDER_COLUMNS)


def _folder_columns(listing):
    """{column: value} of sources' FOLDER_COLUMNS for a file's folder listing (a FolderListing or None)."""
    return dict(zip(FOLDER_COLUMNS, listing or (None,) * len(FOLDER_COLUMNS), strict=True))


@dataclass
class Loaded:
    first_ids: dict  # table -> the first id of the rows the build wrote
    changed_tags: set  # the ids of the tags whose pages went before the load
    counted: set  # tags the writer counted after their last page
    conflicts: list  # InputError, with keep_going: the writer's
    index_sources: dict  # where a tag's rows are marked as coming from -> the tag
    released: dict  # {table: [ids]} of rows the writer's deletions released (maintenance.released_by_deleting)


def _load(conn, path, plan, summary, keep_going, tags, progress, deleted_first=([], []), copy_of=None, check=None):
    """Read the planned pages and indexes into the file at path (a new file, or a copy of the output) while a
    second process writes their rows into it, once the rows of deleted_first (_deleted_first) are deleted.
    copy_of: the output, which the writer process copies to path first, for a build that deletes nothing
    first: conn is the output's, read-only, which holds what the copy holds until the writer writes. check: the
    RecordedCheck of the plan's unchecked files, taken once the new files are read."""
    changed_tags = set()
    gone_paths, gone_tags = deleted_first
    if gone_paths or gone_tags:
        conn.execute("BEGIN")
        changed_tags.update(maintenance.delete_pages(conn, gone_paths))
        changed_tags.update(maintenance.delete_tags(conn, gone_tags))
        if changed_tags:  # pages went: whatever only they used goes too
            maintenance.prune_orphans(conn, full_text=True, counted=True)
        conn.execute("COMMIT")  # the writer continues from here: the file is a copy until it is swapped in
    first, released = (), {}
    if summary.incremental:
        first = _refreshed(plan)
        released = maintenance.released_by_deleting(conn, DELETED_BEFORE_WRITING)
    writer = BackgroundWriter(path, keep_going, keep_counts=summary.incremental, copy_of=copy_of, first=first)
    index_sources = {}  # where a tag's rows are marked as coming from -> the tag
    try:
        reads = plan.to_read or plan.indexes.to_load  # or else only _data/tags.yaml
        looked_up = load.LOOKED_UP if reads else load.LOOKED_UP_FOR_TAGS_YAML
        loader = load.Loader(conn, writer, {source.folder_tag for source in plan.to_read} - {None}, looked_up)
        configurations = Configurations()
        for error in plan.problems:
            _record_problem(loader, summary, error)
        if progress:
            progress.start(len(plan.to_read))
        read_from_pages = _reads_from_pages(plan.indexes.tags, tags)
        counted = set()  # tags the writer counted after their last page, while this process read on
        tag, listed = None, 0
        # sorted by path: a tag's pages come together
        for number, source in enumerate(read_ahead(plan.to_read, path_of=attrgetter("path")), 1):
            if source.folder_tag != tag:
                counted |= loader.count_written_tags()
                tag = source.folder_tag
                configurations.new_tag()
            specs = _load_file(loader, configurations, source, summary, keep_going, read_from_pages)
            listed += specs
            _flush_now_and_then(loader, to_come=listed * (len(plan.to_read) - number) // number)
            if progress:
                progress.advance(1, specs)
        counted |= loader.count_written_tags()
        if plan.indexes.to_load and progress:
            progress.start_indexes(sum(len(t.read) for t in plan.indexes.to_load))
        for index_tag in plan.indexes.to_load:
            source = str(index_tag.read[0].index_url) if index_tag.read else index_tag.tag
            index_sources[source] = index_tag
            loader.mark(source)
            _load_index_tag(loader, configurations, index_tag, summary, keep_going, progress)
            counted |= loader.count_written_tags()
        for tag, error in plan.indexes.failures:
            loader.queue(_problem(error, tag=tag))
        if check is not None:
            touched, relisted, unchanged = check.result()
            summary.pages_unchanged += unchanged
            writer.run(_sources_updated(touched, relisted))
        loader.mark("_data/tags.yaml")
        load.load_tags_yaml(loader, plan.tags)
        loader.flush()
        writer.finish()
    finally:
        writer.stop()
        gc.unfreeze()
    # the loader's memory is released before the file is finished
    return Loaded(loader.first_ids, changed_tags, counted, writer.conflicts, index_sources, released)


def _after_load(conn, loaded, summary):
    """(the first ids of the rows written, the tags whose pages changed since the writer last counted them)."""
    # The indexes made now, and the deletions and counts to come, sort millions of rows: INDEXES_AFTER_LOAD
    # took 9.7 -> 8.9 s (usual 100-tag history), 11.2 -> 9.8 s (spread), 11.2 -> 9.0 s (30 tags from indexes)
    # on 2 cores; smaller sorts lose a little (benchmarks/README.md, after_load.py).
    sort_on_spare_cores(conn)
    if not summary.incremental:  # before anything is deleted: deleting reads them
        schema.create_indexes_after_load(conn)
    maintenance.note_released(conn, loaded.released)
    conn.execute("BEGIN")
    changed_tags = loaded.changed_tags | {
        row[0] for row in conn.execute("SELECT DISTINCT tag_id FROM pages WHERE id >= ?", (loaded.first_ids["pages"],))
    }
    _leave_out_conflicts(conn, loaded.conflicts, loaded.index_sources, summary)
    counted = set() if loaded.conflicts else loaded.counted  # pages left out after their tags were counted
    return loaded.first_ids, changed_tags - counted


def _watch_deletions(conn, summary):
    """From now on, this connection notes the rows its deletions release (for pruning) and, onto an existing
    database, keeps the counts of the rows it deletes (the writer counts those it writes)."""
    maintenance.track_releases(conn)
    if summary.incremental:
        maintenance.keep_counts_as_written(conn, ["DELETE"])


def _leave_out_conflicts(conn, conflicts, index_sources, summary):
    """With --keep-going, an input that gives a hash other facts than where it first appeared is left out
    (the writer found them as it wrote): a page now, a tag's indexes when the build finishes."""
    first_of_each_input = {}
    for error in conflicts:
        first_of_each_input.setdefault(error.path, error)
    for error in first_of_each_input.values():  # in the order the inputs were read
        index_tag = index_sources.get(error.path)
        if index_tag is None:
            summary.pages_read -= 1
            summary.rejected.append(error)
            maintenance.reject_page(conn, _problem(error))
            continue
        summary.failed_tags.append(index_tag.tag)
        summary.index_tags_read.remove(index_tag.tag)
        summary.indexes_read -= len(index_tag.read)
        summary.index_failures.append(error)
        conn.execute(load.STATEMENTS["problems"], _problem(error, tag=index_tag.tag))


def _reads_from_pages(index_tags, patterns):
    return lambda tag: tag not in index_tags and inputs.wanted(tag, patterns)


def _load_file(loader, configurations, source, summary, keep_going, read_from_pages):
    """Read one file into the loader; returns how many specs it listed."""
    checkpoint = loader.checkpoint()
    loader.mark(source.path)
    data, page, outcome, specs = None, None, "page", 0
    try:
        data, read = read_source(source)
        page = read_page(source, data)
        if not read_from_pages(page.tag):
            summary.skipped_pages[page.tag] += 1
            page, outcome = None, "skipped"
            raise _Skipped
        document = page_document(page, configurations)
        loader.add_document(document)
        specs = len(document.binaries)
        summary.pages_read += 1
        for field_name, message in document.warnings:
            summary.warnings.append((document.source, field_name, message))
            loader.queue(
                ROWS["problems"](
                    id=None,
                    path=document.source,
                    field=field_name,
                    message=message,
                    severity="warning",
                    tag=document.tag,
                    package=document.package,
                )
            )
    except _Skipped:
        pass
    except NotACachePage:
        outcome = "not a page"
    except OldLayoutPage:
        outcome = "old layout"
        summary.old_layout += 1
    except InputError as error:
        if not keep_going:
            raise
        loader.rollback(checkpoint)
        outcome = "rejected"
        _record_problem(loader, summary, error)
    if data is not None:
        digest = page.digest if page else file_digest(data)
        loader.queue(
            ROWS["sources"](
                path=source.path, **read._asdict(), digest=digest, outcome=outcome, **_folder_columns(source.listing)
            )
        )
    return specs


class _Skipped(Exception):
    """A page of a tag this build does not read from pages."""


def _load_index_tag(loader, configurations, index_tag, summary, keep_going, progress):
    """Read one tag's indexes into the loader, its rows written as they come; a tag that cannot be read is
    left out with keep_going (what it wrote is deleted when the build finishes)."""
    tag = index_tag.tag
    try:
        records, rows = index_tags.read_tag(index_tag, configurations, keep_going, progress)
        tag_id = loader.tag_id(tag)
        loader.add_nodes(tag_id, records.nodes)
        for document in records.documents:
            loader.add_document(document)
            _flush_now_and_then(loader)
        loader.add_dependencies(records.nodes)
        for document in records.documents:  # once every spec of the tag is queued
            loader.add_dependencies(document.binaries)
            _flush_now_and_then(loader)
        for label, stored in rows:
            loader.queue(ROWS["indexes"](tag_id=tag_id, stack_id=loader.stack_id(label), **asdict(stored)))
    except InputError as error:
        if not keep_going:
            raise
        summary.failed_tags.append(tag)
        summary.index_failures.append(error)
        loader.queue(_problem(error, tag=tag))
        return
    summary.index_tags_read.append(tag)
    summary.indexes_read += len(index_tag.read)
    for error in index_tag.failures:
        summary.index_failures.append(error)
        loader.queue(_problem(error, tag=tag))


def _flush_now_and_then(loader, to_come=None):
    """Hand rows to the writer in batches, so that it inserts them while this process reads on: of FLUSH_LEAST
    binaries at first, then of as many as were handed before, up to FLUSH_EVERY; fewer again, down to
    FLUSH_LEAST, as fewer are still to come (to_come, where the build can tell). What is kept from then on (the
    loader's ids and configurations: millions of objects) is moved out of the garbage collector's sight: it
    would scan them again and again, for cycles the build does not make."""
    batch = min(loader.handed, FLUSH_EVERY if to_come is None else to_come)
    if loader.queued() >= min(FLUSH_EVERY, max(FLUSH_LEAST, batch)):
        loader.flush()
        gc.freeze()


def _record_problem(loader, summary, error):
    """With --keep-going: an input that could not be read, in the summary and the problems table."""
    summary.rejected.append(error)
    loader.queue(_problem(error))


def _problem(error, tag=None):
    """The problems row of an input that could not be read."""
    return ROWS["problems"](
        id=None, path=error.path, field=error.field, message=error.expected, severity="error", tag=tag, package=None
    )


# What loading tags.yaml again (tag_stacks emptied, then filled) may leave without a use.
TAGS_YAML_RELEASES = schema.released_by(["tag_stacks"])


def _finish(conn, first_ids, uncounted_tags, paths, plan, summary):
    """uncounted_tags: the tags whose pages changed since the writer last counted them."""
    full = not summary.incremental
    if summary.failed_tags:  # the rows such a tag got before it failed
        maintenance.delete_tags(conn, summary.failed_tags)
    if summary.rejected or summary.failed_tags:  # whatever only their rows used goes too
        maintenance.prune_orphans(conn, full_text=not full, added_from=first_ids, counted=not full)
    elif plan.tags_changed:  # tags and stacks only tags.yaml declared go too: looking at every spec would cost seconds
        maintenance.prune_orphans(
            conn, full_text=not full, added_from=first_ids, tables=TAGS_YAML_RELEASES, counted=not full
        )
    maintenance.rank_versions_and_tags(conn)
    microarchitectures.load(conn)
    maintenance.index_new_rows(conn, first_ids, every_row=full)  # a full build's rows are all new
    maintenance.gather_statistics(conn)
    _write_build_info(conn, paths, plan)
    maintenance.refresh_counts(conn, uncounted_tags, count_every_row=full)
    # No PRAGMA foreign_key_check (seconds per million rows): this connection deletes with foreign_keys = ON
    # (open_for_build), the writer inserts only references it or the loader resolved from existing rows;
    # tests/test_foreign_keys.py checks whole databases.
    conn.execute("COMMIT")
    return counts(conn)


def _worth_compacting(conn):
    """An incremental build compacts the file once over 5% of it is free pages; fewer are reused by the next
    build, and copying the whole file for them would cost more than the build itself."""
    free, total = (conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("freelist_count", "page_count"))
    return free * 20 > total


def _write_build_info(conn, paths, plan):
    info = {
        "schema_version": str(SCHEMA_VERSION),
        "schema_digest": SCHEMA_DIGEST,
        "spack_cache_db_version": __version__,
        "archspec_version": microarchitectures.archspec_version(),
        "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "inputs": json.dumps([str(p) for p in paths]),
        "tags_digest": plan.tags_digest,
        "page_tags": plan.page_tags,
    }
    conn.execute("DELETE FROM build_info")
    conn.executemany("INSERT INTO build_info (key, value) VALUES (?, ?)", sorted(info.items()))


SUMMARY_COUNTS = ("binaries", "packages", "pages", "problems", "specs", "tags")


def counts(db):
    """The row counts people look for, as the build recorded them in row_counts, from an open
    connection or a database path."""
    conn = db if isinstance(db, sqlite3.Connection) else sqlite3.connect(database_uri(db), uri=True)
    try:
        placeholders = ", ".join("?" * len(SUMMARY_COUNTS))
        return dict(conn.execute(f"SELECT name, count FROM row_counts WHERE name IN ({placeholders})", SUMMARY_COUNTS))
    finally:
        if conn is not db:
            conn.close()


class CopyAhead:
    """A copy of source at target, made in a thread from start() on while this process goes on: a build that
    deletes first (a tag removed) has it made while the plan stats the files it has not found changed (0.4-0.7 s
    of the usual 100-tag history's, where the copy of its 850 MB takes 0.3-0.6 s), not after. (A build that only
    adds has its writer copy the file while this process reads; copying during the plan measured no faster
    there: benchmarks/README.md.) Made in chunks of os.copy_file_range, so that stop() returns within one; where
    that call is missing, fails or leaves the copy short, made() says no and the build copies as before. As a
    context, stopped at its end, the target removed if the build failed."""

    CHUNK = 64 * 1024 * 1024

    def __init__(self, source, target):
        self.source, self.target = source, target
        self._thread = None
        self._stopping = False
        self._made = False

    def start(self):
        if self._thread is None and hasattr(os, "copy_file_range"):
            self._thread = threading.Thread(target=self._copy, daemon=True)
            self._thread.start()

    def made(self):
        """Whether target is a whole copy of source; the thread has ended (the writer process forks from a
        process with one thread)."""
        if self._thread is not None:
            self._thread.join()
        return self._made

    def stop(self):
        self._stopping = True
        self.made()

    def _copy(self):
        try:
            with open(self.source, "rb") as source, open(self.target, "xb") as target:
                while not self._stopping:
                    if not os.copy_file_range(source.fileno(), target.fileno(), self.CHUNK):
                        # 0 is the end of the file, or on some file systems a call that copies nothing
                        self._made = os.fstat(target.fileno()).st_size == os.fstat(source.fileno()).st_size
                        return
        except OSError:  # copied as before, which says why, if it fails again
            pass

    def __enter__(self):
        return self

    def __exit__(self, error_type, error, traceback):
        self.stop()
        if error_type is not None:
            _remove_quietly(self.target)


class RecordedFilesChanged(Exception):
    """A file the plan left unchecked was found changed: the build plans again."""


class RecordedCheck:
    """The files an earlier build recorded, checked (_check_recorded) in a child process while a build that only
    adds loads the new ones, rather than before: their stats took 0.5-0.7 s of adding a tag to the usual 100-tag
    history (benchmarks/README.md), where the writer's copy and inserts are the longer path. As a context, the
    child is stopped at its end."""

    def __init__(self, unchecked):
        self.unchecked = unchecked
        self._process = None
        if unchecked:
            context = multiprocessing.get_context(process_start_method())
            self._pipe, child_end = context.Pipe(duplex=False)
            self._process = context.Process(target=_check_in_child, args=(unchecked, child_end), daemon=True)
            self._process.start()
            child_end.close()

    def result(self):
        """(touched, relisted, unchanged) as Plan has them; raises RecordedFilesChanged when a file changed. Where
        the child failed, the files are checked here."""
        if self._process is None:
            return [], [], 0
        try:
            found = self._pipe.recv()
        except (EOFError, OSError):
            found = _check_recorded(self.unchecked)
        self.stop()
        touched, relisted, unchanged, changed = found
        if changed:
            raise RecordedFilesChanged
        return touched, relisted, unchanged

    def stop(self):
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join()
            self._pipe.close()
            self._process = None

    def __enter__(self):
        return self

    def __exit__(self, error_type, error, traceback):
        self.stop()


def _check_in_child(unchecked, pipe):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the build decides when to stop, and stops this process
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the build's handler, which it inherited
    try:
        found = _check_recorded(unchecked)
    except Exception:  # nothing sent: the build checks the files itself, and says why it cannot
        return
    pipe.send(found)


def _swap_in(temporary, output):
    """Make the new file durable, then replace output in one rename: readers see the old or the new file."""
    with open(temporary, "rb") as f:
        os.fsync(f.fileno())
    os.replace(temporary, output)
    _sync_folder(output.parent)


def _sync_folder(folder):
    """Make the rename durable. It is done by now, so a failure here must not be reported as a build that
    left the output as it was: some file systems refuse to sync a folder, and that only weakens durability."""
    try:
        directory = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(directory)
    except OSError:
        pass
    finally:
        os.close(directory)
