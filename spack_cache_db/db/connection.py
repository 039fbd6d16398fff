"""Opening databases: by URIs that cannot be read as anything but their path, and with the settings a build
writes with."""

import os
import sqlite3
import urllib.parse


def database_uri(path, mode="ro"):
    """An SQLite URI for the file at path: '?', '#' and '%' in a name are part of the name, not the URI's."""
    return f"file:{urllib.parse.quote(os.fsencode(os.path.abspath(path)))}?mode={mode}"


def open_for_build(path, create=True):
    """A connection for the build's temporary file; without create, a file that is gone stays gone."""
    conn = sqlite3.connect(database_uri(path, "rwc" if create else "rw"), uri=True, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA journal_mode = OFF")  # a temporary file: a crash discards it whole
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -64000")
    return conn


def sort_on_spare_cores(conn):
    """Let this connection's sorts (CREATE INDEX, GROUP BY) run on every core the process may use: for what the
    build does once the writer process has finished, which would otherwise leave that process's core idle.
    SQLite's sorter then sorts its runs in helper threads (PRAGMA threads: how many besides this one)."""
    conn.execute(f"PRAGMA threads = {usable_cores() - 1}")


def usable_cores():
    """How many cores this process may run on (its CPU affinity, where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
