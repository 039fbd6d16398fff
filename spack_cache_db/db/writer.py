"""The writer process: inserts the loader's rows into the new database on another core while the build reads."""

import gc
import json
import multiprocessing
import queue
import shutil
import signal
import sqlite3
import sys
import threading
from dataclasses import dataclass

from spack_cache_db.db.connection import open_for_build
from spack_cache_db.db.maintenance import count_tags, keep_counts_as_written
from spack_cache_db.db.schema import (
    COLUMNS,
    IDENTITY,
    IDENTITY_OF,
    NUMBERED_BY_DATABASE,
    NUMBERED_REFERENCES,
    ids_by_identity,
)
from spack_cache_db.records import InputError


@dataclass
class Origin:
    """The input that queued rows from here on: source (a file or URL), where its rows start in each table's
    batch ({table: index}), and the field that names one of its binaries (Document.binary_field)."""

    source: str
    firsts: dict
    binary_field: str = "{hash}"


# Messages (batches, counts) the writer takes off the pipe before it writes them. With the pipe alone, the build
# waited while the writer counted a tag, and the writer waited while the build read the next one. Three took 6%
# off building 20 tags of either shape and added 45 MiB to the peak RSS of 20 spread tags (a batch holds the
# rows of up to build.FLUSH_EVERY binaries).
MESSAGES_AHEAD = 3
_BUILD_GONE = object()
# The writer commits once a tag is counted (the loader has it count each tag once its pages are written), and
# otherwise once it has written this many rows since it last did. Each commit writes every page the rows
# changed, and a batch changes pages all over the index of hashes (random keys): committing each batch wrote
# most of that index again each time. Building 20 tags (usual shape), the writer wrote 1.87 GB in 234,204 calls
# with a commit per batch, and 1.00 GB in 127,820 with this. The rows of a tag or of 100,000 bound how long
# another connection to the file may wait for a commit.
ROWS_PER_COMMIT = 100_000
# Listings are named by batch after batch: a tag's pages name mostly the listings of the tags before (a 100-tag
# history: 200,997 listings, named in 2.5M batches' rows). The loader queues each once, and this process
# looks each up once, until they remember this many; then they start over. Remembering them cost 44 MiB of
# peak RSS in that history's build (75 MiB in the spread shape's, which starts over); 100,000 saved 25 MiB
# there and cost 1.4 s of 80.
LISTINGS_REMEMBERED = 250_000


class BackgroundWriter:
    """Writes batches of rows in a second process with its own connection, so that SQLite's inserts run on
    another core while this one reads and checks pages. Nothing else may write to the file meanwhile; the
    build reads back what it queued only after sync(), and what the file held before at any time (SQLite's
    locks keep each read whole)."""

    def __init__(self, path, keep_going=False, keep_counts=False, copy_of=None, first=()):
        """keep_counts: keep the counts of schema.KEPT_COUNTS as rows are written (maintenance.keep_counts_as_written).
        copy_of: a file this process copies to path before it writes, while the build reads on; first:
        statements, (SQL, parameters), it runs before the batches, in a transaction of their own."""
        self.keep_going = keep_going
        self.conflicts = []  # InputError: a hash written with other facts than where it first appeared
        method = process_start_method()
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload([__name__])  # its server imports this module once, not each writer
        self.pipe, child_end = context.Pipe()
        self.process = context.Process(
            target=_write_batches,
            args=(str(path), child_end, self.pipe, keep_counts, copy_of and str(copy_of), list(first)),
            daemon=True,
        )
        self.process.start()
        child_end.close()

    def write(self, batches, origins):
        """batches: [(table, statement, rows)]; origins: [Origin] in the order the inputs queued rows, so that a
        row the database refuses is named by the input it came from. A spec whose facts differ from where its
        hash first appeared stops the build, or with keep_going is one of the conflicts, and the build goes on."""
        self._send((batches, origins))
        while self.pipe.poll():  # the writer sends nothing unasked but conflicts, and why it failed
            self._take_conflict_or_raise()

    def run(self, statements):
        """Run these statements, (SQL, parameters), once the batches sent so far are written."""
        if statements:
            self._send(("run", statements))

    def count_tags(self, tag_ids):
        """Count these tags (maintenance.count_tags) once the batches sent so far are written, while the build
        reads on: a full build's counts would otherwise be taken at its end, with one core idle."""
        self._send(("count", tuple(tag_ids)))

    def sync(self):
        """Wait until every batch sent so far is committed."""
        self._send("sync")
        self._expect_done()

    def finish(self):
        self._send("finish")
        self._expect_done()
        self.process.join()

    def stop(self):
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.pipe.close()

    def _send(self, message):
        try:
            self.pipe.send(message)
        except OSError:  # the writer has stopped; it said why before it did
            while True:
                self._take_conflict_or_raise()

    def _expect_done(self):
        while self._take_conflict_or_raise() != "done":
            pass

    def _take_conflict_or_raise(self):
        """The writer's next message: 'done', or a conflict (kept with keep_going, raised otherwise); what
        it says when it fails is raised."""
        try:
            reply = self.pipe.recv()
        except (EOFError, OSError):
            self.process.join()
            reply = f"the writer process ended unexpectedly (exit code {self.process.exitcode})"
        if type(reply) is tuple and reply[0] == "conflict":
            conflict = InputError(*reply[1:])
            if not self.keep_going:
                raise conflict
            self.conflicts.append(conflict)
            return reply
        if type(reply) is tuple:
            raise InputError(*reply)
        if reply != "done":
            raise sqlite3.OperationalError(reply)
        return reply


def process_start_method():
    """On Linux, fork from a process with one thread (the command line: 10 ms) and otherwise fork from a
    clean server process (a fork copies whatever locks other threads hold at that moment); spawn
    elsewhere, as Python does by default there."""
    if sys.platform != "linux":
        return "spawn"
    return "fork" if threading.active_count() == 1 else "forkserver"


def _write_batches(path, pipe, builds_end, keep_counts, copy_of, first):
    """The writer process: batches in transactions of up to a tag's rows (ROWS_PER_COMMIT); replies 'done' to sync
    and finish once what it wrote is committed, or says what failed and stops: (input, field, expected) for a row
    the database refuses, text otherwise."""
    builds_end.close()  # a forked writer holds a copy: closed, the build's death reaches this process as EOF
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the build decides when to stop, and stops this process
    # Rows, ids and the batches queued ahead make no cycles, and reference counting frees them; the collector
    # only scanned them, and the build's objects a forked writer inherits, again and again: 6 of this
    # process's 85 s of CPU in a 100-tag history's build, where it is the busier process.
    gc.disable()
    messages = queue.Queue(maxsize=MESSAGES_AHEAD)
    threading.Thread(target=_receive, args=(pipe, messages), daemon=True).start()
    try:
        if copy_of is not None:
            shutil.copyfile(copy_of, path)
        conn = open_for_build(path, create=False)
        # This process only inserts (but for the statements `first`), and each reference it writes was resolved
        # from a row the file has or the batch writes before it (schema.LOAD_ORDER): the loader numbers from
        # what it read and queued, and _with_ids looks numbered rows up here (a row not found is None, which
        # NOT NULL refuses). Checking each reference again cost 10-16% of this process's time;
        # tests/test_foreign_keys.py and check look at whole databases.
        conn.execute("PRAGMA foreign_keys = OFF")
        if keep_counts:
            keep_counts_as_written(conn, ["INSERT"])
        conn.execute("BEGIN")
        for statement, parameters in first:
            conn.execute(statement, parameters)
        conn.execute("COMMIT")
    except (sqlite3.Error, OSError) as error:
        pipe.send(str(error))
        return
    listing_ids = {}  # {identity: id} of the listings written or looked up, kept from batch to batch
    uncommitted = 0  # rows written since the last commit
    try:
        while True:
            message = messages.get()
            if message is _BUILD_GONE:
                return
            if message in ("sync", "finish"):
                if conn.in_transaction:
                    conn.execute("COMMIT")
                pipe.send("done")
                if message == "finish":
                    return
                continue
            if not conn.in_transaction:
                conn.execute("BEGIN")
            if message[0] == "count":
                count_tags(conn, message[1])
                conn.execute("COMMIT")
                uncommitted = 0
                continue
            if message[0] == "run":
                for statement, parameters in message[1]:
                    conn.execute(statement, parameters)
                continue
            batches, origins = message
            if len(listing_ids) > LISTINGS_REMEMBERED:
                listing_ids.clear()
            # table the database numbers -> {identity: id} of the rows this batch wrote or looked up
            written = {"listings": listing_ids}
            for table, statement, rows in batches:
                numbered = table in NUMBERED_BY_DATABASE
                rows, queued_at = _in_identity_order(table, rows) if numbered else (rows, range(len(rows)))
                last_id = _last_id(conn, table) if numbered else None
                inserted = _insert(conn, table, statement, _with_ids(conn, table, rows, written), origins, queued_at)
                if numbered:
                    ids, repeated = _written(conn, table, rows, last_id, inserted)
                    written.setdefault(table, {}).update(ids)
                    for conflict in _conflicts(conn, table, rows, repeated, batches, origins, queued_at):
                        pipe.send(("conflict", *conflict))
            uncommitted += sum(len(rows) for _, _, rows in batches)
            if uncommitted >= ROWS_PER_COMMIT:
                conn.execute("COMMIT")
                uncommitted = 0
    except RefusedRow as refused:
        pipe.send(refused.args)
    except sqlite3.OperationalError as error:  # the disk: full, read-only, failing
        pipe.send(str(error))
    except Exception as error:  # anything else, said rather than printed as a traceback by this process
        pipe.send(f"{type(error).__name__}: {error}")
    finally:
        conn.close()


def _receive(pipe, messages):
    """Take the build's messages off the pipe as they come, up to MESSAGES_AHEAD ahead of the writing: while a
    tag is counted, or a batch is slow to write, the build reads on rather than wait on a full pipe."""
    while True:
        try:
            message = pipe.recv()
        except (EOFError, OSError):  # the build is gone
            messages.put(_BUILD_GONE)
            return
        messages.put(message)


class RefusedRow(Exception):
    """A row the database refuses: (input, field, expected)."""


def _in_identity_order(table, rows):
    """rows sorted by their identity, and where the build queued each (the position in its batch that origins
    name). The identity's unique index takes rows in its order a leaf after the other, where rows in the
    order pages list them land all over it (benchmarks/insert_order.py: 3 million hashes in batches of
    20,000, 13.7 s of CPU against 17.9 s, and 2.1 s more for page_specs' index by spec). The sort is stable: of rows with one identity, the first queued is
    written, and the others are left out as repeats of it."""
    identities = list(map(IDENTITY_OF[table], rows))
    queued_at = sorted(range(len(rows)), key=identities.__getitem__)
    return list(map(rows.__getitem__, queued_at)), queued_at


_REFUSED = (sqlite3.Error, ValueError, TypeError, OverflowError)  # a value refused (not the disk's failing)


def _insert(conn, table, statement, rows, origins, queued_at):
    """Insert rows; returns how many were (ON CONFLICT DO NOTHING leaves some out). queued_at: where the build
    queued each row (_in_identity_order)."""
    written = conn.total_changes
    try:
        return conn.executemany(statement, rows).rowcount
    except sqlite3.OperationalError:
        raise
    except _REFUSED as error:
        refused = _refused(conn, table, statement, rows, conn.total_changes - written, origins, queued_at)
        raise refused or RefusedRow("an input", table, f"expected a value the database can store ({error})") from error


def _refused(conn, table, statement, rows, untried, origins, queued_at):
    """RefusedRow for the first row, in the order the build queued them, that the database refuses: values are
    checked before they are queued; should one still be refused, say which input gave it. untried: the
    position of the refused row, from which the rows are tried again one by one (those before it were
    written, and would be refused as repeats of themselves; where ON CONFLICT DO NOTHING left rows out, some
    written ones are tried again, and left out again). The build stops, and the file with it: what this
    writes does not matter."""
    for position in sorted(range(untried, len(rows)), key=queued_at.__getitem__):
        try:
            conn.execute(statement, rows[position])
        except _REFUSED as error:
            column = _refused_column(table, rows[position])
            return RefusedRow(
                _origin(origins, table, queued_at[position]).source,
                f"{table}.{column}" if column else table,
                f"expected a value the database can store ({error})",
            )
    return None


def _origin(origins, table, position):
    return next((origin for origin in reversed(origins) if origin.firsts[table] <= position), Origin("an input", {}))


def _last_id(conn, table):
    return conn.execute(f"SELECT ifnull(max(id), 0) FROM {table}").fetchone()[0]


def _written(conn, table, rows, last_id, inserted):
    """({identity: id} of the rows of a table the database numbers that were written, the positions of those
    ON CONFLICT DO NOTHING left out: their identity was there already, before this batch or earlier in it).
    The rows written (inserted of them) took the ids after last_id, in order: each the first of its identity in
    the batch. Where all were, most batches of a history, each row's id is the next: nothing is read back."""
    identity_of = IDENTITY_OF[table]
    if inserted == len(rows):
        return {identity_of(row): number for number, row in enumerate(rows, last_id + 1)}, []
    identity = IDENTITY[table]
    written = ids_by_identity(
        table, conn.execute(f"SELECT {', '.join(identity)}, id FROM {table} WHERE id > ? ORDER BY id", (last_id,))
    )
    expected = iter(written)
    next_written = next(expected, None)
    left_out = []
    for position, row in enumerate(rows):
        if identity_of(row) == next_written:
            next_written = next(expected, None)
        else:
            left_out.append(position)
    return written, left_out


def _with_ids(conn, table, rows, written):
    """rows with each reference to a row the database numbers given by that row's id rather than its identity:
    the id this batch gave it (written), or else the one the table holds; None where there is none, which
    the insert refuses."""
    references = NUMBERED_REFERENCES.get(table)
    if not references:
        return rows
    ids = [
        _ids_of(conn, parent, {row[position] for row in rows}, written.get(parent, {})).get
        for position, parent in references
    ]
    return _RESOLVERS[table](rows, *ids)


def _resolver(table):
    """A function (rows, then the get of an {identity: id} for each of the table's NUMBERED_REFERENCES) that makes
    each row again with those references' ids: one comprehension, its values named by position as the schema
    orders the columns. Each row is made once, whatever the number of its references (an edge has two, a
    page_specs row its spec and its listing); a loop over the references of each row took twice as long."""
    lookup = {position: n for n, (position, _) in enumerate(NUMBERED_REFERENCES[table])}
    values = ", ".join(
        f"id{lookup[position]}(row[{position}])" if position in lookup else f"row[{position}]"
        for position in range(len(COLUMNS[table]))
    )
    parameters = ", ".join(f"id{n}" for n in range(len(lookup)))
    namespace = {}
    exec(f"def {table}(rows, {parameters}):\n    return [({values},) for row in rows]", namespace)
    return namespace[table]


_RESOLVERS = {table: _resolver(table) for table in NUMBERED_REFERENCES}


def _ids_of(conn, table, keys, written):
    """{identity: id} of these identities of rows of a table the database numbers: those this batch wrote or
    looked up (written, to which the others, read from the table, are added)."""
    missing = keys - written.keys()
    if not missing:
        return written
    identity = IDENTITY[table]
    matches = " AND ".join(f"{table}.{column} = batch.value ->> {n}" for n, column in enumerate(identity))
    found = conn.execute(
        f"SELECT {', '.join(f'{table}.{column}' for column in identity)}, {table}.id"
        f" FROM json_each(?) AS batch CROSS JOIN {table} ON {matches}",
        (json.dumps([key if len(identity) > 1 else (key,) for key in missing]),),
    )
    written.update(ids_by_identity(table, found))
    return written


def _conflicts(conn, table, rows, positions, batches, origins, queued_at):
    """(input, field, expected) for each of these rows (at positions), just left out, whose identity the table
    already held with other facts (written earlier, or earlier in this batch): the first facts stay. In the
    order the build queued them (queued_at: _in_identity_order), so that the first said is the first listed."""
    columns = COLUMNS[table]
    facts = [column for column in columns if column not in ("id", *IDENTITY[table])]
    if not (positions and facts):  # a row that is only its identity (a listing) has no facts to differ
        return
    positions = sorted(positions, key=queued_at.__getitem__)
    (key,) = IDENTITY[table]
    differs = " OR ".join(f"{table}.{column} IS NOT batch.value ->> {columns.index(column)}" for column in facts)
    found = conn.execute(
        f"SELECT batch.key, {table}.id, {', '.join(f'{table}.{column}' for column in facts)} FROM json_each(?) AS batch"
        f" JOIN {table} ON {table}.{key} = batch.value ->> {columns.index(key)} WHERE {differs}",
        (json.dumps([rows[position] for position in positions]),),
    ).fetchall()
    for candidate, stored_id, *stored in found:
        position = positions[candidate]
        row = dict(zip(columns, rows[position], strict=True))
        origin = _origin(origins, table, queued_at[position])
        first = _first_source(conn, rows[:position], row, key, origins, table, stored_id, queued_at)
        field = origin.binary_field.format(
            hash=row[key], position=_position_in_input(batches, origins, origin, row[key])
        )
        yield (
            origin.source,
            field,
            f"expected the same facts wherever hash {row[key]} appears, but {first} lists it as"
            f" {_describe(conn, dict(zip(facts, stored, strict=True)))} and this input as {_describe(conn, row)}",
        )


def _first_source(conn, earlier_rows, row, key, origins, table, stored_id, queued_at):
    """The input that first gave the stored row: earlier in this batch, or the first page that lists it."""
    position = next((n for n, other in enumerate(earlier_rows) if other[COLUMNS[table].index(key)] == row[key]), None)
    if position is not None:
        return _origin(origins, table, queued_at[position]).source
    found = conn.execute(
        "SELECT pages.path FROM page_specs JOIN pages ON pages.id = page_specs.page_id"
        " WHERE page_specs.spec_id = ? ORDER BY pages.id LIMIT 1",
        (stored_id,),
    ).fetchone()
    return found[0] if found else "an earlier input"


def _position_in_input(batches, origins, origin, spec_hash):
    """Where an input lists a spec (page_specs.position), from the page_specs rows it queued in this batch."""
    for table, _, rows in batches:
        if table == "page_specs":
            position = COLUMNS[table].index("position")
            spec = COLUMNS[table].index("spec_id")
            start = origin.firsts.get(table, 0)
            return next((row[position] for row in rows[start:] if row[spec] == spec_hash), None)
    return None


def _describe(conn, facts):
    """A spec's facts as its spec string, and its size when the input gives one."""
    (spec,) = conn.execute(
        "SELECT spec FROM configuration_specs WHERE configuration_id = ?", (facts["configuration_id"],)
    ).fetchone()
    return spec if facts["size"] is None else f"{spec} (size {facts['size']})"


def _refused_column(table, row):
    """The column of a value SQLite cannot take: an integer past 64 bits or text that is not Unicode."""
    for column, value in zip(COLUMNS[table], row, strict=False):
        if type(value) is int and not -(2**63) <= value < 2**63:
            return column
        if type(value) is str:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return column
    return None
