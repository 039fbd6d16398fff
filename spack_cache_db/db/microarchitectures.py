"""Which binaries run on which CPU: archspec's microarchitecture graph, as rows."""

import archspec
import archspec.cpu
import sqlite_utils


def rows():
    """(microarchitectures, runs_on) rows: a host runs binaries built for itself and for its ancestors."""
    targets = archspec.cpu.TARGETS
    microarchitectures = [
        {"name": name, "vendor": target.vendor, "family": str(target.family), "generation": int(target.generation)}
        for name, target in sorted(targets.items())
    ]
    runs_on = [
        {"host": name, "target": runnable}
        for name, target in sorted(targets.items())
        for runnable in sorted({name, *(ancestor.name for ancestor in target.ancestors)})
    ]
    return microarchitectures, runs_on


def load(conn):
    """Replace the two small lookup tables (inside the caller's transaction: sqlite-utils uses a savepoint)."""
    db = sqlite_utils.Database(conn)
    microarchitectures, runs_on = rows()
    db["runs_on"].delete_where()
    db["microarchitectures"].delete_where()
    db["microarchitectures"].insert_all(microarchitectures)
    db["runs_on"].insert_all(runs_on)


def archspec_version():
    return archspec.__version__
