"""The writer process: inserts the loader's rows into the new database on another core while the build reads."""

import multiprocessing
import signal
import sqlite3
import sys
import threading


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

    def write(self, batches):
        self._send(batches)
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
    what failed and stops."""
    builds_end.close()  # a forked writer holds a copy: closed, the build's death reaches this process as EOF
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the build decides when to stop, and stops this process
    conn = open_for_build(path)
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
            conn.execute("BEGIN")
            for statement, rows in message:
                conn.executemany(statement, rows)
            conn.execute("COMMIT")
    except sqlite3.Error as error:
        pipe.send(str(error))
    finally:
        conn.close()


def open_for_build(path):
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA journal_mode = OFF")  # a temporary file: a crash discards it whole
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -64000")
    return conn
