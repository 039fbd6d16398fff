"""The writer process: inserts the loader's rows into the new database on another core while the build reads."""

import multiprocessing
import signal
import sqlite3
import sys
import threading

from spack_cache_db.db.connection import open_for_build
from spack_cache_db.db.schema import INSERTED_COLUMNS
from spack_cache_db.records import InputError


class BackgroundWriter:
    """Writes batches of rows in a second process with its own connection, so that SQLite's inserts run on
    another core while this one reads and checks pages. Nothing else may write to the file meanwhile; the
    build reads back what it queued only after sync(), and what the file held before at any time (SQLite's
    locks keep each read whole)."""

    def __init__(self, path):
        method = _start_method()
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload([__name__])  # its server imports this module once, not each writer
        self.pipe, child_end = context.Pipe()
        self.process = context.Process(target=_write_batches, args=(str(path), child_end, self.pipe), daemon=True)
        self.process.start()
        child_end.close()

    def write(self, batches, origins):
        """batches: [(table, statement, rows)]; origins: [(input, {table: index of its first row})] in the
        order the inputs queued rows, so that a row the database refuses is named by the input it came from."""
        self._send((batches, origins))
        if self.pipe.poll():  # the writer sends nothing unasked but why it failed
            self._raise_failure()

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
            self._raise_failure()

    def _expect_done(self):
        try:
            reply = self.pipe.recv()
        except (EOFError, OSError):
            self.process.join()
            reply = f"the writer process ended unexpectedly (exit code {self.process.exitcode})"
        if type(reply) is tuple:
            raise InputError(*reply)
        if reply != "done":
            raise sqlite3.OperationalError(reply)

    def _raise_failure(self):
        self._expect_done()
        raise sqlite3.OperationalError("the writer process stopped without saying why")


def _start_method():
    """On Linux, fork from a process with one thread (the command line: 10 ms) and otherwise fork from a
    clean server process (a fork copies whatever locks other threads hold at that moment); spawn
    elsewhere, as Python does by default there."""
    if sys.platform != "linux":
        return "spawn"
    return "fork" if threading.active_count() == 1 else "forkserver"


def _write_batches(path, pipe, builds_end):
    """The writer process: each batch in its own transaction; replies 'done' to sync and finish, or says
    what failed and stops: (input, field, expected) for a row the database refuses, text otherwise."""
    builds_end.close()  # a forked writer holds a copy: closed, the build's death reaches this process as EOF
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the build decides when to stop, and stops this process
    try:
        conn = open_for_build(path, create=False)
    except sqlite3.Error as error:
        pipe.send(str(error))
        return
    try:
        while True:
            try:
                message = pipe.recv()
            except EOFError:  # the build is gone
                return
            if message in ("sync", "finish"):
                pipe.send("done")
                if message == "finish":
                    return
                continue
            batches, origins = message
            conn.execute("BEGIN")
            for table, statement, rows in batches:
                _insert(conn, table, statement, rows, origins)
            conn.execute("COMMIT")
    except RefusedRow as refused:
        pipe.send(refused.args)
    except sqlite3.OperationalError as error:  # the disk: full, read-only, failing
        pipe.send(str(error))
    except Exception as error:  # anything else, said rather than printed as a traceback by this process
        pipe.send(f"{type(error).__name__}: {error}")
    finally:
        conn.close()


class RefusedRow(Exception):
    """A row the database refuses: (input, field, expected)."""


def _insert(conn, table, statement, rows, origins):
    written = conn.total_changes
    try:
        conn.executemany(statement, rows)
    except sqlite3.OperationalError:
        raise
    except (sqlite3.Error, ValueError, TypeError, OverflowError) as error:
        # Values are checked before they are queued; should one still be refused, say which input gave it.
        position = conn.total_changes - written  # the rows before it were inserted
        source = next((name for name, first in reversed(origins) if first[table] <= position), "an input")
        column = _refused_column(table, rows[position]) if position < len(rows) else None
        field = f"{table}.{column}" if column else table
        raise RefusedRow(source, field, f"expected a value the database can store ({error})") from error


def _refused_column(table, row):
    """The column of a value SQLite cannot take: an integer past 64 bits or text that is not Unicode."""
    for column, value in zip(INSERTED_COLUMNS[table], row, strict=False):
        if type(value) is int and not -(2**63) <= value < 2**63:
            return column
        if type(value) is str:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return column
    return None
