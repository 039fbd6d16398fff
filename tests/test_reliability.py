"""Interrupted, killed and failing builds lose nothing; a database being served is swapped safely."""

import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from dump import every_row
from pagemaker import write_corpus
from paths import SEEDS

PROJECT = Path(__file__).parent.parent


def builder(*args, **popen):
    command = [sys.executable, str(PROJECT / "build_db.py"), "build", *map(str, args), "--quiet"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def sound(db):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def temporaries(db):
    return sorted(p.name for p in db.parent.glob(f".{db.name}.tmp-*"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    write_corpus(root / "site", ["develop", "develop-2025-05-04", "v0.23.1"], 120, 40)
    write_corpus(root / "newtag", ["develop-2025-05-11"], 120, 40)
    return root


def timed_build(*args):
    started = time.monotonic()
    process = builder(*args)
    assert process.wait() == 0, process.stderr.read()
    return time.monotonic() - started


def kill_at_fractions(args, db, before, duration, complete):
    """Whether each build, killed at a fraction of its duration, had finished: db is then the database that
    complete (built whole from the same inputs) holds, row for row; otherwise it is before, byte for byte."""
    outcomes = []
    for fraction in (0.1, 0.25, 0.4, 0.55, 0.75):  # mostly early: a build can run twice as fast as its timing
        process = builder(*args)
        time.sleep(duration * fraction)
        process.send_signal(signal.SIGKILL)
        process.wait()
        finished = db.read_bytes() != before
        outcomes.append(finished)
        sound(db)
        if finished:  # the build had swapped its complete file in
            assert every_row(db) == every_row(complete)
            db.write_bytes(before)
    return outcomes


def test_kill_9_during_a_full_build_leaves_the_previous_database(corpus, tmp_path):
    db = tmp_path / "cache.db"
    assert builder(SEEDS, "-o", db).wait() == 0
    before = db.read_bytes()
    duration = timed_build(corpus / "site", "-o", tmp_path / "timing.db")
    outcomes = kill_at_fractions([corpus / "site", "-o", db], db, before, duration, tmp_path / "timing.db")
    assert outcomes.count(False) >= 3, outcomes
    assert db.read_bytes() == before


def test_kill_9_during_an_incremental_update_leaves_the_previous_database(corpus, tmp_path):
    db = tmp_path / "cache.db"
    assert builder(corpus / "site", "-o", db).wait() == 0
    before = db.read_bytes()
    timing = tmp_path / "timing.db"
    timing.write_bytes(before)
    duration = timed_build(corpus / "site", corpus / "newtag", "-o", timing)
    outcomes = kill_at_fractions([corpus / "site", corpus / "newtag", "-o", db], db, before, duration, timing)
    assert outcomes.count(False) >= 3, outcomes


def child_pids(pid):
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def wait_while_building(process, condition, what):
    """Poll until condition() holds, failing if the build ends first: the signal then lands mid-build."""
    deadline = time.monotonic() + 60
    while not condition():
        assert process.poll() is None, f"the build ended before {what}"
        assert time.monotonic() < deadline, f"still no sign that {what} after 60 s"
        time.sleep(0.005)


def test_the_writer_process_ends_with_a_killed_build(corpus, tmp_path):
    process = builder(corpus / "site", "-o", tmp_path / "cache.db")
    wait_while_building(process, lambda: child_pids(process.pid), "its writer process started")
    writers = child_pids(process.pid)
    process.kill()
    process.wait()
    deadline = time.monotonic() + 10
    while any(map(running, writers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(running, writers))


def running(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")  # a zombie has ended; whoever adopted it may not have reaped it yet


def test_the_next_build_removes_what_a_killed_build_left(corpus, tmp_path):
    db = tmp_path / "cache.db"
    process = builder(corpus / "site", "-o", db)
    wait_while_building(process, lambda: temporaries(db), "it created its temporary file")
    process.kill()
    process.wait()
    left = temporaries(db)
    assert left
    assert builder(SEEDS, "-o", db).wait() == 0
    assert temporaries(db) == []


def answer_ctrl_c():
    """As a program started from a terminal does: a shell runs background jobs (CI's, say) with SIGINT ignored,
    and children inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_cleanly_with_a_message(corpus, tmp_path):
    db = tmp_path / "cache.db"
    assert builder(SEEDS, "-o", db).wait() == 0
    before = db.read_bytes()
    process = builder(corpus / "site", "-o", db, preexec_fn=answer_ctrl_c)
    wait_while_building(process, lambda: temporaries(db), "it created its temporary file")
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate()
    assert process.returncode == 130
    assert stderr.strip() == f"Interrupted: {db} was left as it was."
    assert db.read_bytes() == before
    assert temporaries(db) == []


@pytest.mark.parametrize("moment", ["before", "after"])
def test_an_interrupt_as_the_new_database_is_renamed_into_place_says_which_file_is_there(tmp_path, moment):
    """Ctrl-C just before or just after the rename (forced there: a real signal lands there seldom): before,
    the output was left as it was; after, the output is the new database, and the message says so."""
    db = tmp_path / "cache.db"
    assert builder(SEEDS, "-o", db, "--tag", "develop").wait() == 0
    before = db.read_bytes()
    interrupt = "raise KeyboardInterrupt" if moment == "before" else "os_replace(*args); raise KeyboardInterrupt"
    script = (
        "import os, sys\n"
        "os_replace = os.replace\n"
        f"def replace(*args):\n    {interrupt}\n"
        "os.replace = replace\n"
        "from spack_cache_db.cli import cli\n"
        "cli(sys.argv[1:])\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", script, "build", str(SEEDS), "-o", str(db), "--quiet"],
        capture_output=True,
        text=True,
        cwd=PROJECT,
    )
    assert process.returncode == 130
    fresh = tmp_path / "fresh.db"
    assert builder(SEEDS, "-o", fresh).wait() == 0
    if moment == "before":
        assert process.stderr == f"Interrupted: {db} was left as it was.\n"
        assert db.read_bytes() == before
    else:
        assert process.stderr == (
            f"Interrupted: {db} is the new database: it was in place when the build was interrupted.\n"
        )
        assert every_row(db) == every_row(fresh)
    assert temporaries(db) == []


def test_a_build_that_fails_without_an_output_before_it_says_that_none_was_created(tmp_path):
    broken = tmp_path / "site" / "_cache" / "develop" / "bolt"
    broken.mkdir(parents=True)
    (broken / "specs.md").write_text("---\ntitle: bolt\n---\n")
    db = tmp_path / "cache.db"
    _, stderr = builder(tmp_path / "site", "-o", db).communicate()
    assert stderr.splitlines()[1:] == [f"{db} was not created."]
    assert not db.exists()


def limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))


def test_a_full_disk_gives_a_clear_error_and_changes_nothing(corpus, tmp_path):
    db = tmp_path / "cache.db"
    assert builder(SEEDS, "-o", db).wait() == 0
    before = db.read_bytes()
    process = builder(corpus / "site", "-o", db, preexec_fn=limit_file_size)
    _, stderr = process.communicate()
    assert process.returncode == 1
    assert stderr.startswith(f"Error: {db}: could not write the new database beside it (")
    assert stderr.endswith(f"{db} was left as it was.\n")
    assert db.read_bytes() == before
    assert temporaries(db) == []


def test_a_full_disk_while_the_writer_copies_the_database_gives_a_clear_error_and_changes_nothing(corpus, tmp_path):
    """A build that only adds pages (nothing to delete first: build._deleted_first) has its writer process copy
    the database: the copy fails half-way."""
    db = tmp_path / "cache.db"
    assert builder(corpus / "site", "-o", db).wait() == 0
    before = db.read_bytes()
    half = len(before) // 2

    def limit_to_half():
        resource.setrlimit(resource.RLIMIT_FSIZE, (half, half))

    process = builder(corpus / "site", corpus / "newtag", "-o", db, preexec_fn=limit_to_half)
    _, stderr = process.communicate()
    assert process.returncode == 1
    assert stderr.startswith(f"Error: {db}: could not write the new database beside it ([Errno 27] File too large"), (
        stderr
    )
    assert stderr.endswith(f"{db} was left as it was.\n")
    assert db.read_bytes() == before
    assert temporaries(db) == []


def test_an_unwritable_folder_gives_a_clear_error(tmp_path):
    for output in ("/proc/cache.db", tmp_path / "missing" / "cache.db"):
        process = builder(SEEDS, "-o", output)
        _, stderr = process.communicate()
        assert process.returncode == 1
        assert stderr.startswith(f"Error: {output}: could not write the new database beside it ("), stderr


def test_refuses_to_replace_a_file_that_is_not_our_database(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("precious")
    process = builder(SEEDS, "-o", notes)
    _, stderr = process.communicate()
    assert process.returncode == 1
    assert "expected a SQLite database built by spack-cache-db" in stderr
    assert notes.read_text() == "precious"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_rebuilding_while_datasette_serves_the_file(corpus, tmp_path):
    db = tmp_path / "cache.db"
    assert builder(SEEDS, "-o", db).wait() == 0
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "datasette", "-i", str(db), "-p", str(port), "-h", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if get(f"{base}/-/versions.json") == 200:
                    break
            except OSError:
                time.sleep(0.2)
        urls = [
            f"{base}/cache/binaries.json?_size=5",
            f"{base}/cache.json?sql=select+count(*)+from+specs",
            f"{base}/cache/binaries?_search=mpi",
        ]
        statuses = []
        rebuilds = [builder(corpus / "site" if n % 2 == 0 else SEEDS, "-o", db) for n in range(1)]
        for n in range(4):
            while rebuilds[-1].poll() is None and len(statuses) < 600:
                statuses.append(get(urls[len(statuses) % len(urls)]))
            assert rebuilds[-1].returncode == 0
            rebuilds.append(builder(corpus / "site" if n % 2 else SEEDS, "-o", db))
        rebuilds[-1].wait()
        statuses.extend(get(url) for url in urls)
        assert len(statuses) > 20
        assert set(statuses) == {200}
    finally:
        server.terminate()
        server.wait(timeout=10)
