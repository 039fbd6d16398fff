"""Which binaries run on which CPU: archspec's microarchitecture graph, as rows."""

import archspec
import archspec.cpu


def rows():
    """(microarchitectures, runs_on) rows: a host runs binaries built for itself and for its ancestors."""
    targets = archspec.cpu.TARGETS
    microarchitectures = sorted(
        (name, target.vendor, str(target.family), int(target.generation)) for name, target in targets.items()
    )
    runs_on = sorted(
        (name, runnable)
        for name, target in targets.items()
        for runnable in {name, *(ancestor.name for ancestor in target.ancestors)}
    )
    return microarchitectures, runs_on


def load(conn):
    microarchitectures, runs_on = rows()
    conn.execute("DELETE FROM runs_on")
    conn.execute("DELETE FROM microarchitectures")
    conn.executemany(
        "INSERT INTO microarchitectures (name, vendor, family, generation) VALUES (?, ?, ?, ?)", microarchitectures
    )
    conn.executemany("INSERT INTO runs_on (host, target) VALUES (?, ?)", runs_on)


def archspec_version():
    return archspec.__version__
