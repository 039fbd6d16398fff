"""Caps on what one SQL statement may do on a connection Datasette serves, far above what any page needs.

Without them select printf('%.*c', 2000000000, 'x') fills 2 GB of memory before the time limit can stop
it. SQLITE_LIMIT_LENGTH caps every string and blob; printf and format, which SQLite 3.40 still runs to
the end of a width or precision past that cap (seconds of CPU for a NULL), fail at once instead.
"""

import math
import re
import sqlite3
import threading

from datasette import hookimpl

MAX_LENGTH = 16 * 1024 * 1024  # bytes in one string or blob
# One conversion of SQLite's printf: flags, width, precision, length modifier, type.
_CONVERSION = re.compile(r"%[-+ #!0,]*(\*|\d*)(?:\.(\*|\d*))?l{0,2}(.)", re.S)
_LEADING_INTEGER = re.compile(r"\s*([-+]?\d+)")
_builtin = threading.local()


@hookimpl
def prepare_connection(conn):
    cap(conn)


def cap(conn):
    """Cap the strings and blobs of a connection and guard its printf."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_LENGTH)
    for name in ("printf", "format"):
        conn.create_function(name, -1, _guarded_printf, deterministic=True)


def _guarded_printf(*args):
    if args and args[0] is not None and any(size > MAX_LENGTH for size in _printf_sizes(args[0], args[1:])):
        # A result past SQLITE_LIMIT_LENGTH makes SQLite fail the statement with "string or blob too big".
        return "x" * (MAX_LENGTH + 1)
    return _builtin_printf(args)


def _builtin_printf(args):
    """SQLite's own printf, from a connection of this thread that has not replaced it."""
    if not hasattr(_builtin, "conn"):
        _builtin.conn = sqlite3.connect(":memory:")
        _builtin.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_LENGTH)
    placeholders = ", ".join("?" * len(args))
    return _builtin.conn.execute(f"SELECT printf({placeholders})", args).fetchone()[0]


def _printf_sizes(template, args):
    """The widths and precisions printf(template, *args) asks for, as SQLite reads them ('*' takes the next
    argument; every conversion but %% and %n takes one)."""
    if isinstance(template, bytes):
        template = template.decode("utf-8", "replace")
    position = 0
    for width, precision, kind in _CONVERSION.findall(str(template)):
        for size in (width, precision):
            if size == "*":
                yield abs(_as_integer(args[position] if position < len(args) else None))
                position += 1
            elif size:
                yield int(size)
        if kind not in "%n":
            position += 1


def _as_integer(value):
    """The integer SQLite reads from a value (text by its leading digits, anything else as 0)."""
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else MAX_LENGTH + 1
    match = _LEADING_INTEGER.match(value) if isinstance(value, str) else None
    return int(match.group(1)) if match else 0
