"""Issue 13: hostile input and a hostile file system. Nothing hangs, nothing outside the output is touched, and
every error is one line naming the file, the field and what was expected.

Command-line cases run build_db.py as a subprocess under a time limit and check its exit status, the lines it
prints, that no traceback shows, that the previous database is byte for byte as it was and that no other file
changed. Races (a file changed at the moment it is read) are staged in-process, where a hook acts at that
exact moment, under the same time limit."""

import ctypes
import errno
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pagemaker import page_text, spec, write_page
from watched import snapshot, temporaries

from spack_cache_db import build as build_module
from spack_cache_db.build import build
from spack_cache_db.read import files
from spack_cache_db.records import InputError

PROJECT = Path(__file__).resolve().parent.parent
TIME_LIMIT = 60  # seconds, for every case: a hang fails its test rather than the whole suite


def run_cli(*args, wrapper=(), **options):
    command = [*wrapper, sys.executable, str(PROJECT / "build_db.py"), *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIME_LIMIT, **options)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


class Scene:
    """A checkout with one good page, an output folder holding the previous database, and the checks of
    issue 13 around each command."""

    def __init__(self, root, previous):
        self.root = root
        self.site = root / "site"
        self.good = write_page(self.site, "bolt", "develop", [spec("good-bolt")])
        self.output = root / "out" / "cache.db"
        self.output.parent.mkdir()
        shutil.copyfile(previous, self.output)

    def page_path(self, package, tag="develop"):
        """Where _cache/<tag>/<package>/specs.md goes, its folder made."""
        path = self.site / "_cache" / tag / package / "specs.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def fails(self, *args, error, command="build", **options):
        """The command exits 1 printing 'Error: <error>' and that the output was left as it was, and
        changes nothing at all."""
        before, others = self.output.read_bytes(), snapshot(self.root, self.output)
        result = run_cli(command, *args, "-o", self.output, **options)
        assert result.returncode == 1, result.stderr
        assert result.stdout == ""
        assert result.stderr.splitlines() == [f"Error: {error}", f"{self.output} was left as it was."]
        assert self.output.read_bytes() == before
        assert snapshot(self.root, self.output) == others
        assert temporaries(self.output) == []
        return result

    def keeps_going(self, *args, rejected, **options):
        """With --keep-going the build exits 0, lists each rejected input and records it in problems,
        touching nothing but the output. rejected: ['<file>: <field>: <expected>', ...]"""
        others = snapshot(self.root, self.output)
        result = run_cli("build", *args, "-o", self.output, "--keep-going", **options)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        assert [line.strip() for line in result.stdout.splitlines() if "rejected: " in line] == [
            f"rejected: {line}" for line in rejected
        ]
        assert self.problems() == sorted(rejected)
        assert snapshot(self.root, self.output) == others
        assert temporaries(self.output) == []
        return result

    def problems(self):
        conn = sqlite3.connect(self.output)
        try:
            rows = conn.execute("SELECT path, field, message FROM problems WHERE severity = 'error'").fetchall()
        finally:
            conn.close()
        return sorted(": ".join(row) for row in rows)

    def packages(self):
        conn = sqlite3.connect(self.output)
        try:
            return [row[0] for row in conn.execute("SELECT package FROM binaries ORDER BY package")]
        finally:
            conn.close()


@pytest.fixture
def scene(tmp_path, previous):
    return Scene(tmp_path, previous)


@pytest.fixture
def time_limit():
    """In-process cases stop with an error after TIME_LIMIT seconds instead of hanging."""

    def expire(signum, frame):
        raise TimeoutError(f"still running after {TIME_LIMIT} s")

    previous_handler = signal.signal(signal.SIGALRM, expire)
    signal.alarm(TIME_LIMIT)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous_handler)


# Class 1: special files in the input tree. Only regular files are read, never past the size cap; a link out of
# the input is not followed.


def test_a_fifo_named_specs_md_is_refused_without_waiting_for_a_writer(scene):
    fifo = scene.page_path("fifo")
    os.mkfifo(fifo)
    scene.fails(scene.site, error=f"{fifo}: file: expected a regular file, found a FIFO (named pipe)")


@pytest.mark.parametrize("target", ["/dev/zero", "/etc/passwd"])
def test_a_page_that_links_out_of_the_input_is_refused_unread(scene, target):
    """Not opened at all: /dev/zero would never end, /etc/passwd would be read as a page (and said not to start
    with '---')."""
    page = scene.page_path("linked")
    page.symlink_to(target)
    scene.fails(
        scene.site,
        error=f"{page}: file: expected a file inside {scene.site}, found a link to {target}"
        " (not followed: name it as an input to read it)",
    )


def test_a_page_inside_the_input_that_links_to_a_device_is_refused_unread(scene):
    device = scene.site / "devices" / "zero"
    device.parent.mkdir()
    os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    page = scene.page_path("zero")
    page.symlink_to(device)
    scene.fails(scene.site, error=f"{page}: file: expected a regular file, found a character device")


def test_a_page_that_links_to_a_page_inside_the_input_is_read(scene):
    kept = scene.site / ".kept" / "specs.md"  # in a hidden folder, which the walk passes over
    kept.parent.mkdir()
    kept.write_text(page_text("cafe", "develop", [spec("cafe")]))
    scene.page_path("cafe").symlink_to(kept)
    result = run_cli("build", scene.site, "-o", scene.output, "--quiet")
    assert (result.returncode, result.stderr) == (0, "")
    assert scene.packages() == ["bolt", "cafe"]


def test_a_socket_named_specs_md_is_refused(scene):
    page = scene.page_path("socket")
    os.mknod(page, 0o600 | stat.S_IFSOCK)
    scene.fails(scene.site, error=f"{page}: file: expected a regular file, found a socket")


def test_a_page_over_the_size_cap_is_refused_unread(scene):
    page = scene.page_path("huge")
    with open(page, "wb") as f:
        f.truncate(files.MAX_FILE_BYTES + 1)  # sparse: costs no disk
    scene.fails(scene.site, error=f"{page}: file: expected at most 256 MiB, found {files.MAX_FILE_BYTES + 1:,} bytes")


def test_a_folder_link_to_the_root_of_the_machine_is_not_walked(scene):
    link = scene.site / "_cache" / "everything"
    link.symlink_to("/", target_is_directory=True)
    scene.fails(
        scene.site,
        error=f"{link}: folder: expected a folder inside {scene.site}, found a link to /"
        " (not followed: name it as an input to read it)",
    )


def test_a_folder_link_up_and_out_of_the_input_is_not_walked(scene):
    link = scene.site / "_cache" / "develop" / "up"
    link.symlink_to("../../..", target_is_directory=True)  # scene.root: the output's folder is in it
    scene.fails(
        scene.site,
        error=f"{link}: folder: expected a folder inside {scene.site}, found a link to {scene.root}"
        " (not followed: name it as an input to read it)",
    )


def test_a_fifo_named_as_an_input_is_refused(scene):
    fifo = scene.root / "pipe.md"
    os.mkfifo(fifo)
    scene.fails(fifo, error=f"{fifo}: path: expected a regular file or a folder, found a FIFO (named pipe)")


def test_a_tags_yaml_that_links_to_dev_zero_is_refused_unread(scene):
    tags = scene.site / "_data" / "tags.yaml"
    tags.parent.mkdir()
    tags.symlink_to("/dev/zero")
    scene.fails(scene.site, error=f"{tags}: file: expected a regular file, found a character device")


def test_special_files_where_no_page_has_to_be_are_passed_over(scene):
    os.mkfifo(scene.site / "notes")
    (scene.site / "zero.md").symlink_to("/dev/zero")
    (scene.site / "gone.md").symlink_to(scene.root / "missing")
    (scene.site / "passwd.md").symlink_to("/etc/passwd")
    outside = scene.root / "outside.md"  # a page, out of the input: not read through a link
    outside.write_text(page_text("cafe", "develop", [spec("cafe")]))
    (scene.site / "cafe.md").symlink_to(outside)
    others = snapshot(scene.root, scene.output)
    result = run_cli("build", scene.site, "-o", scene.output, "--quiet")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert scene.packages() == ["bolt"]
    assert snapshot(scene.root, scene.output) == others


@pytest.mark.parametrize("swapped_in", ["a FIFO (named pipe)", "a folder"])
@pytest.mark.parametrize(
    "read", [files.read_regular_file, lambda path: files.read_start(path, 3)], ids=["whole", "start"]
)
def test_a_file_swapped_for_another_kind_after_its_check_is_refused_once_open(
    tmp_path, monkeypatch, time_limit, swapped_in, read
):
    """Between the stat that finds a regular file and the open, something else may take its place: the open
    file is checked again, and nothing is read from it."""
    path = tmp_path / "page.md"
    path.write_text("---\n")
    checked = files._is_link_to_regular_file

    def checked_then_swapped(given):
        found = checked(given)
        path.unlink()
        os.mkfifo(path) if swapped_in.startswith("a FIFO") else path.mkdir()
        return found

    monkeypatch.setattr(files, "_is_link_to_regular_file", checked_then_swapped)
    with pytest.raises(files.FileError) as refused:
        read(str(path))
    assert refused.value.expected == f"expected a regular file, found {swapped_in}"


def hints_recorded(monkeypatch):
    """The paths the system is asked to read ahead (os.posix_fadvise), in order, and every path opened."""
    hinted, opened = [], []
    advise, open_file = os.posix_fadvise, os.open

    def recording_advise(fd, offset, length, advice):
        hinted.append(os.readlink(f"/proc/self/fd/{fd}"))
        return advise(fd, offset, length, advice)

    def recording_open(path, *args, **options):
        opened.append(os.fspath(path))
        return open_file(path, *args, **options)

    monkeypatch.setattr(os, "posix_fadvise", recording_advise)
    monkeypatch.setattr(os, "open", recording_open)
    return hinted, opened


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="the system takes no read-ahead hint")
def test_reading_ahead_opens_regular_files_only(tmp_path, monkeypatch, time_limit):
    """A FIFO, a device, a link (inside the input or out of it) and a path gone are passed over unopened:
    reading them, or refusing them, is up to read_regular_file."""
    regular = [tmp_path / f"page{n}.md" for n in range(3)]
    for path in regular:
        path.write_text("---\n")
    fifo, link, device_link, gone = (tmp_path / name for name in ("fifo", "link.md", "zero.md", "gone.md"))
    os.mkfifo(fifo)
    link.symlink_to(regular[0])
    device_link.symlink_to("/dev/zero")
    paths = [str(p) for p in (regular[0], fifo, link, device_link, "/dev/zero", gone, regular[1], regular[2])]
    hinted, opened = hints_recorded(monkeypatch)
    assert list(files.read_ahead(paths)) == paths
    assert hinted == opened == [str(p) for p in regular]


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="the system takes no read-ahead hint")
def test_reading_ahead_keeps_a_window_of_files_asked_for(tmp_path, monkeypatch):
    paths = [str(tmp_path / f"page{n}.md") for n in range(5)]
    for path in paths:
        Path(path).write_text("---\n")
    hinted, _ = hints_recorded(monkeypatch)
    asked_when_yielded = [len(hinted) for _ in files.read_ahead(paths, window=2)]
    assert hinted == paths
    assert asked_when_yielded == [3, 4, 5, 5, 5]  # the file itself and the next two


def test_reading_ahead_where_the_system_takes_no_hint(tmp_path, monkeypatch):
    paths = [str(tmp_path / "page.md"), str(tmp_path / "gone.md")]
    Path(paths[0]).write_text("---\n")
    monkeypatch.delattr(os, "posix_fadvise", raising=False)
    opened = []
    open_file = os.open
    monkeypatch.setattr(os, "open", lambda path, *args: opened.append(path) or open_file(path, *args))
    assert list(files.read_ahead(paths)) == paths
    assert opened == []


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="the system takes no read-ahead hint")
def test_the_build_asks_for_each_page_before_it_reads_it(scene, monkeypatch, time_limit):
    """So that the disk reads the next pages while the build works on one (a 30-tag history with its pages not
    in memory: 55.5 -> 48.7 s)."""
    pages = [scene.good, *(write_page(scene.site, name, "develop", [spec(name)]) for name in ("cli11", "zlib"))]
    hinted, _ = hints_recorded(monkeypatch)
    asked_before = {}
    read_source = build_module.read_source

    def noting_read(source):
        asked_before[source.path] = source.path in hinted
        return read_source(source)

    monkeypatch.setattr(build_module, "read_source", noting_read)
    build([scene.site], scene.output)
    assert asked_before == {str(page): True for page in pages}


def test_a_dangling_link_where_a_page_has_to_be_is_an_error_naming_it(scene):
    page = scene.page_path("dangling")
    page.symlink_to(scene.site / "missing.md")  # inside the input: a link out is refused unread, whatever it is
    scene.fails(scene.site, error=f"{page}: file: expected a readable file (No such file or directory)")


def test_a_page_whose_name_is_not_utf8_is_an_error_naming_it_with_escapes(scene):
    folder = os.fsencode(scene.site / "_cache" / "develop") + b"/caf\xe9"
    os.mkdir(folder)
    with open(folder + b"/specs.md", "w") as f:
        f.write(page_text("cafe", "develop", [spec("cafe")]))
    shown = f"{scene.site}/_cache/develop/caf\\xe9/specs.md"
    scene.fails(scene.site, error=f"{shown}: file: expected a file name in UTF-8 (names are stored as text)")
    scene.keeps_going(scene.site, rejected=[f"{shown}: file: expected a file name in UTF-8 (names are stored as text)"])


def test_keep_going_records_special_files_and_builds_the_rest(scene):
    fifo = scene.page_path("fifo")
    os.mkfifo(fifo)
    zero = scene.page_path("zero", tag="v0.23.1")
    zero.symlink_to("/dev/zero")
    fifo_inside = scene.site / "pipe"
    os.mkfifo(fifo_inside)
    device = scene.page_path("device", tag="v0.23.1")
    device.symlink_to(fifo_inside)
    link = scene.site / "_cache" / "elsewhere"
    link.symlink_to(scene.root / "out", target_is_directory=True)
    scene.keeps_going(
        scene.site,
        rejected=[
            f"{link}: folder: expected a folder inside {scene.site}, found a link to {scene.root / 'out'}"
            " (not followed: name it as an input to read it)",
            f"{zero}: file: expected a file inside {scene.site}, found a link to /dev/zero"
            " (not followed: name it as an input to read it)",
            f"{fifo}: file: expected a regular file, found a FIFO (named pipe)",
            f"{device}: file: expected a regular file, found a FIFO (named pipe)",
        ],
    )
    assert scene.packages() == ["bolt"]


# Class 2: files that change while being read. What is recorded of a file is what was read: its identity comes
# from the open file, before it is read.


def replace_after_reading(monkeypatch, path, new_text):
    """Replace path with a new file (new size, new modification time) the moment after it has been read."""
    read_at_most = files._read_at_most

    def read_then_replace(name, fd, size, limit):
        data = read_at_most(name, fd, size, limit)
        if name == str(path):
            path.with_name("new").write_text(new_text)
            os.replace(path.with_name("new"), path)
        return data

    monkeypatch.setattr(files, "_read_at_most", read_then_replace)


def hashes(db):
    conn = sqlite3.connect(db)
    try:
        return sorted(row[0] for row in conn.execute("SELECT hash FROM specs"))
    finally:
        conn.close()


def test_a_page_replaced_while_it_is_read_is_read_again_by_the_next_build(scene, monkeypatch, time_limit):
    page = scene.page_path("cli11")
    page.write_text(page_text("cli11", "develop", [spec("old")]))
    replace_after_reading(monkeypatch, page, page_text("cli11", "develop", [spec("new"), spec("newer")]))
    build([str(scene.site)], scene.output)
    assert hashes(scene.output) == sorted([spec("good-bolt")["hash"], spec("old")["hash"]])
    monkeypatch.undo()
    summary = build([str(scene.site)], scene.output)
    assert (summary.up_to_date, summary.pages_read) == (False, 1)
    assert hashes(scene.output) == sorted(spec(seed)["hash"] for seed in ("good-bolt", "new", "newer"))


def test_a_page_that_changes_during_the_read_is_refused(scene, monkeypatch, time_limit):
    page = scene.page_path("cli11")
    page.write_text(page_text("cli11", "develop", [spec("old")]))
    read_at_most = files._read_at_most

    def read_while_appending(name, fd, size, limit):
        data = read_at_most(name, fd, size, limit)
        if name == str(page):
            with open(page, "a") as f:
                f.write("\n")
        return data

    monkeypatch.setattr(files, "_read_at_most", read_while_appending)
    before = scene.output.read_bytes()
    with pytest.raises(InputError) as raised:
        build([str(scene.site)], scene.output)
    assert str(raised.value) == f"{page}: file: expected a file that does not change while it is read (read it again)"
    assert scene.output.read_bytes() == before
    summary = build([str(scene.site)], scene.output, keep_going=True)  # appends once more: recorded
    assert [str(error) for error in summary.rejected] == [str(raised.value)]
    monkeypatch.undo()
    summary = build([str(scene.site)], scene.output)  # a rejected page is read again
    assert (summary.pages_read, summary.rejected) == (1, [])


def delete_when_read(monkeypatch, path, before_reading):
    read_source = build_module.read_source

    def delete_then_read(source):
        if source.path == str(path) and before_reading:
            path.unlink()
        found = read_source(source)
        if source.path == str(path) and not before_reading:
            path.unlink()
        return found

    monkeypatch.setattr(build_module, "read_source", delete_then_read)


def test_a_page_deleted_before_it_is_read_is_a_recorded_problem_with_keep_going(scene, monkeypatch, time_limit):
    page = scene.page_path("cli11")
    page.write_text(page_text("cli11", "develop", [spec("cli11")]))
    delete_when_read(monkeypatch, page, before_reading=True)
    summary = build([str(scene.site)], scene.output, keep_going=True)
    assert [str(error) for error in summary.rejected] == [
        f"{page}: file: expected a readable file (No such file or directory)"
    ]
    assert scene.packages() == ["bolt"]


def test_a_page_deleted_right_after_it_is_read_is_kept_as_read(scene, monkeypatch, time_limit):
    page = scene.page_path("cli11")
    page.write_text(page_text("cli11", "develop", [spec("cli11")]))
    delete_when_read(monkeypatch, page, before_reading=False)
    summary = build([str(scene.site)], scene.output, keep_going=True)
    assert (summary.rejected, scene.packages()) == ([], ["bolt", "cli11"])
    monkeypatch.undo()
    summary = build([str(scene.site)], scene.output)
    assert (summary.pages_removed, scene.packages()) == (1, ["bolt"])


def test_a_known_page_deleted_while_the_build_plans_is_a_recorded_problem(scene, monkeypatch, time_limit):
    page = scene.page_path("cli11")
    page.write_text(page_text("cli11", "develop", [spec("cli11")]))
    build([str(scene.site)], scene.output)
    os.utime(page, ns=(1, 1))  # the plan compares its digest
    change = build_module._change

    def delete_then_compare(source, before):
        if source.path == str(page):
            page.unlink()
        return change(source, before)

    monkeypatch.setattr(build_module, "_change", delete_then_compare)
    summary = build([str(scene.site)], scene.output, keep_going=True)
    assert [str(error) for error in summary.rejected] == [
        f"{page}: file: expected a readable file (No such file or directory)"
    ]
    assert scene.packages() == ["bolt"]


# Class 3: the size-and-mtime shortcut. A file is taken as unchanged only when size, mtime, ctime and inode are
# all as recorded; otherwise its digest decides, so an edit that keeps size and mtime is read again while a
# copy or a touch costs one read and no parsing.


def edit_keeping_size_and_mtime(page, old, new):
    assert len(old) == len(new)
    before = os.stat(page)
    page.write_text(page.read_text().replace(old, new))
    os.utime(page, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(page)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_an_edit_that_keeps_size_and_mtime_is_read_again(scene, time_limit):
    build([str(scene.site)], scene.output)
    old, new = spec("good-bolt")["hash"], spec("edited-bolt")["hash"]
    edit_keeping_size_and_mtime(scene.good, old, new)
    result = run_cli("build", scene.site, "-o", scene.output)
    assert result.returncode == 0, result.stderr
    assert "(1 read, 0 unchanged, 0 removed, 0 rejected)" in result.stdout
    assert hashes(scene.output) == [new]


def test_a_page_replaced_by_one_with_the_same_size_and_mtime_is_read_again(scene, time_limit):
    build([str(scene.site)], scene.output)
    before = os.stat(scene.good)
    replacement = scene.root / "replacement.md"
    replacement.write_text(scene.good.read_text().replace(spec("good-bolt")["hash"], spec("other-bolt")["hash"]))
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, scene.good)
    summary = build([str(scene.site)], scene.output)
    assert summary.pages_read == 1
    assert hashes(scene.output) == [spec("other-bolt")["hash"]]


def test_a_copied_tree_is_compared_by_digest_and_not_parsed_again(scene, time_limit):
    write_page(scene.site, "cli11", "v0.23.1", [spec("cli11")])
    build([str(scene.site)], scene.output)
    first = hashes(scene.output)
    scene.site.rename(scene.root / "original")
    shutil.copytree(scene.root / "original", scene.site)  # copy2: the same sizes and mtimes, new inodes
    summary = build([str(scene.site)], scene.output)
    assert (summary.up_to_date, summary.pages_read, summary.pages_unchanged) == (False, 0, 0)
    assert hashes(scene.output) == first
    again = build([str(scene.site)], scene.output)
    assert (again.up_to_date, again.pages_unchanged) == (True, 2)


def test_a_permission_change_costs_a_digest_not_a_read(scene, time_limit):
    build([str(scene.site)], scene.output)
    scene.good.chmod(0o600)
    summary = build([str(scene.site)], scene.output)
    assert (summary.up_to_date, summary.pages_read) == (False, 0)
    assert build([str(scene.site)], scene.output).up_to_date


def test_modification_times_past_2262_and_large_inode_numbers_are_stored(scene, time_limit):
    os.utime(scene.good, ns=(2**63 + 5, 2**64 + 7))  # more nanoseconds than SQLite's 64-bit integers hold
    result = run_cli("build", scene.site, "-o", scene.output, "--quiet")
    assert (result.returncode, result.stderr) == (0, "")
    assert build([str(scene.site)], scene.output).up_to_date
    assert files._int64(2**64 - 1) == -1 and files._int64(2**63 - 1) == 2**63 - 1


# Class 4: values past the parser's limits. Every value is checked before it is queued for the writer process;
# one the database still refuses is named by its page, not blamed on the disk.


def raw_page(path, spec_details, meta="{}", extra_lines=""):
    """A page in the generator's form with spec_details and meta given as JSON text, for values json.dumps
    cannot write (thousands of digits, 100,000 levels)."""
    package, tag = path.parent.name, path.parent.parent.name
    path.write_text(
        f'---\ntitle: "{package}"\nlayout: cache\ncategories: [package, {tag}]\n'
        f"meta: {meta}\nspec_details: {spec_details}\n{extra_lines}---"
    )
    return path


def specs_text(**fields):
    return json.dumps([spec("hostile", **fields)])


HASH_32 = spec("hostile")["hash"]
EXPECTED_SIZE = "expected '-' (unknown) or a whole number of bytes up to 9223372036854775807"


@pytest.mark.parametrize(
    ("fields", "field", "expected"),
    [
        ({"os": "\ud800"}, "spec_details[0].os", "expected Unicode text, found '\\ud800' (a lone surrogate)"),
        (
            {"stacks": ["root", "\udfff"]},
            "spec_details[0].stacks[1]",
            "expected Unicode text, found '\\udfff' (a lone surrogate)",
        ),
        (
            {"variants": ["x=\udc80"]},
            "spec_details[0].variants[0]",
            "expected Unicode text, found 'x=\\udc80' (a lone surrogate)",
        ),
        ({"note": "\ud83d"}, "spec_details[0].note", "expected Unicode text, found '\\ud83d' (a lone surrogate)"),
        ({"size": 12345678901234567890}, "spec_details[0].size", f"{EXPECTED_SIZE}, found 12345678901234567890"),
        ({"size": "12345678901234567890"}, "spec_details[0].size", f'{EXPECTED_SIZE}, found "12345678901234567890"'),
        ({"size": -1}, "spec_details[0].size", f"{EXPECTED_SIZE}, found -1"),
        ({"size": "²"}, "spec_details[0].size", f'{EXPECTED_SIZE}, found "\\u00b2"'),
        (
            {"hash": HASH_32 + "\n"},
            "spec_details[0].hash",
            f"expected 32 characters of Spack's base32 alphabet (a-z, 2-7), found '{HASH_32}\\n'",
        ),
    ],
    ids=[
        "os",
        "stack",
        "variant",
        "extra-field",
        "size-20-digits",
        "size-20-digit-text",
        "size-negative",
        "size-superscript-digit",
        "hash-newline",
    ],
)
def test_values_that_would_break_the_writer_are_refused_by_the_reader(scene, fields, field, expected):
    page = raw_page(scene.page_path("hostile"), specs_text(**fields))
    result = scene.fails(scene.site, error=f"{page}: {field}: {expected}"[: len(f"{page}: {field}: {expected}")])
    assert result.stderr.startswith(f"Error: {page}: {field}: {expected}")


def test_an_integer_of_5000_digits_is_invalid_json(scene):
    page = raw_page(scene.page_path("hostile"), specs_text(size=123454321).replace("123454321", "9" * 5000))
    scene.fails(
        scene.site,
        error=f"{page}: spec_details: expected valid JSON (Exceeds the limit (4300 digits) for integer string"
        " conversion: value has 5000 digits)",
    )


def test_nan_is_not_json(scene):
    page = raw_page(scene.page_path("hostile"), specs_text(size=123454321).replace("123454321", "NaN"))
    scene.fails(scene.site, error=f"{page}: spec_details: expected valid JSON (NaN is not a JSON value)")


def test_json_nested_100000_deep_is_refused(scene):
    page = raw_page(scene.page_path("hostile"), specs_text(), meta='{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    scene.fails(scene.site, error=f"{page}: meta: expected JSON nested at most 32 deep")


def test_meta_nested_deeper_than_a_page_needs_is_refused(scene):
    page = raw_page(scene.page_path("hostile"), specs_text(), meta='{"x": ' + "[" * 40 + "]" * 40 + "}")
    scene.fails(scene.site, error=f"{page}: meta: expected values nested at most 32 deep")


def test_a_lone_surrogate_escaped_in_meta_is_refused(scene):
    page = raw_page(scene.page_path("hostile"), specs_text(), meta='{"x": ["\\ud800"]}')
    scene.fails(scene.site, error=f"{page}: meta: expected Unicode text, found '\\ud800' (a lone surrogate)")


def test_json_nested_deeper_than_a_page_needs_is_refused(scene):
    deep = "[" * 40 + "]" * 40
    page = raw_page(scene.page_path("hostile"), specs_text(deep=123454321).replace("123454321", deep))
    scene.fails(scene.site, error=f"{page}: spec_details[0].deep: expected values nested at most 32 deep")


def test_yaml_nested_100000_deep_is_refused(scene):
    page = scene.page_path("hostile")
    page.write_text(  # layout first: not the generator's form, so read as YAML
        '---\nlayout: cache\ntitle: "hostile"\ncategories: [package, develop]\n'
        f"meta: {'[' * 100_000}{']' * 100_000}\nspec_details: []\n---"
    )
    scene.fails(scene.site, error=f"{page}: front matter: expected YAML nested at most 32 deep (line 4, column 38)")


def test_yaml_front_matter_over_its_cap_is_refused_unparsed(scene):
    page = raw_page(scene.page_path("hostile"), specs_text(), extra_lines=f"comment: {'x' * (16 * 2**20)}\n")
    scene.fails(
        scene.site,
        error=f"{page}: front matter: expected YAML front matter of at most 16 MiB (the generator's one-line form"
        f" may be longer), found {len(page.read_text()) - 7:,} characters",
    )


def test_numbers_of_thousands_of_digits_in_versions_and_tags_are_ranked(scene):
    version, tag = "1." + "9" * 5000, "v1." + "7" * 252  # a tag is a folder on export: at most 255 bytes
    long_page = scene.root / "long.md"
    long_page.write_text(page_text("bolt", tag, [spec("long-bolt", versions=[version])]))
    write_page(scene.site, "bolt", "v0.23.1", [spec("short-bolt", versions=["1.2"])])
    result = run_cli("build", scene.site, long_page, "-o", scene.output, "--quiet")
    assert (result.returncode, result.stderr) == (0, "")
    conn = sqlite3.connect(scene.output)
    ranked = conn.execute("SELECT version FROM versions ORDER BY version_rank").fetchall()
    tags = conn.execute("SELECT name FROM tags ORDER BY sort_order").fetchall()
    assert [t for (t,) in tags] == ["develop", tag, "v0.23.1"]
    assert [v for (v,) in ranked] == ["1.0", "1.2", version]


def test_keep_going_records_every_value_past_the_limits_and_builds_the_rest(scene):
    surrogate = raw_page(scene.page_path("surrogate"), specs_text(os="\ud800"))
    digits = raw_page(scene.page_path("digits"), specs_text(size=123454321).replace("123454321", "9" * 5000))
    deep = raw_page(scene.page_path("deep"), specs_text(), meta="[" * 100_000 + "]" * 100_000)
    newline = raw_page(scene.page_path("newline"), specs_text(hash=HASH_32 + "\n"))
    scene.keeps_going(
        scene.site,
        rejected=[
            f"{deep}: meta: expected JSON nested at most 32 deep",
            f"{digits}: spec_details: expected valid JSON (Exceeds the limit (4300 digits) for integer string"
            " conversion: value has 5000 digits)",
            f"{newline}: spec_details[0].hash: expected 32 characters of Spack's base32 alphabet (a-z, 2-7), found"
            f" '{HASH_32}\\n'",
            f"{surrogate}: spec_details[0].os: expected Unicode text, found '\\ud800' (a lone surrogate)",
        ],
    )
    assert scene.packages() == ["bolt"]


def test_a_value_that_still_reaches_the_writer_is_named_by_its_page_not_blamed_on_the_disk(
    scene, monkeypatch, time_limit
):
    from spack_cache_db.read import pages as read_pages

    monkeypatch.setattr(read_pages, "MAX_SIZE", 2**70)  # a check that lets a value past
    page = raw_page(scene.page_path("huge"), specs_text(size=2**64))
    before = scene.output.read_bytes()
    with pytest.raises(InputError) as raised:
        build([str(scene.site)], scene.output, keep_going=True)
    assert str(raised.value) == (
        f"{page}: specs.size: expected a value the database can store (Python int too large to convert to SQLite"
        " INTEGER)"
    )
    assert scene.output.read_bytes() == before
    assert temporaries(scene.output) == []


# Class 5: YAML aliases. Pages never need anchors or aliases; a page or tags.yaml with one is refused before
# anything is expanded.


def yaml_page(path, meta_yaml):
    """A block-style page whose meta is the YAML given."""
    path.write_text(
        f'---\nlayout: cache\ntitle: "{path.parent.name}"\ncategories: [package, {path.parent.parent.name}]\n'
        f"meta:\n{meta_yaml}spec_details: []\n---"
    )
    return path


BILLION_LAUGHS = "".join(
    ["  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"]
    + [f"  {chr(98 + n)}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 9)}]\n" for n in range(9)]
)


def test_a_kilobyte_of_nested_aliases_is_refused_at_the_first_anchor(scene):
    assert len(BILLION_LAUGHS) < 1024
    page = yaml_page(scene.page_path("laughs"), BILLION_LAUGHS)
    scene.fails(
        scene.site,
        error=f"{page}: front matter: expected no YAML anchors or aliases (&name, *name) (line 5, column 6)",
    )


def test_one_alias_is_refused(scene):
    page = yaml_page(scene.page_path("alias"), "  oss: [ubuntu24.04]\n  platforms: *x\n")
    scene.fails(
        scene.site,
        error=f"{page}: front matter: expected no YAML anchors or aliases (&name, *name) (line 6, column 14)",
    )


def test_an_anchor_without_an_alias_is_refused(scene):
    page = yaml_page(scene.page_path("anchor"), "  oss: &x [ubuntu24.04]\n")
    scene.fails(
        scene.site,
        error=f"{page}: front matter: expected no YAML anchors or aliases (&name, *name) (line 5, column 8)",
    )


def test_aliases_in_tags_yaml_are_refused(scene):
    tags = scene.site / "_data" / "tags.yaml"
    tags.parent.mkdir()
    tags.write_text("- name: develop\n  stacks: &s [root, e4s]\n- name: v0.23.1\n  stacks: *s\n")
    scene.fails(
        scene.site,
        error=f"{tags}: tags: expected a readable YAML list of tags (expected no YAML anchors or aliases"
        " (&name, *name) (line 2, column 11))",
    )


def test_keep_going_records_pages_with_aliases_and_builds_the_rest(scene):
    laughs = yaml_page(scene.page_path("laughs"), BILLION_LAUGHS)
    scene.keeps_going(
        scene.site,
        rejected=[f"{laughs}: front matter: expected no YAML anchors or aliases (&name, *name) (line 5, column 6)"],
    )
    assert scene.packages() == ["bolt"]


# Class 6: names with control characters. Names and values are matched whole (fullmatch: '$' also matches
# before a final newline), and no text holds control characters or line breaks.

CONTROL = "expected text without control characters or line breaks, found"


@pytest.mark.parametrize(
    ("fields", "field", "expected"),
    [
        ({"compiler": "gcc@13.2.0\n"}, "compiler", f"{CONTROL} 'gcc@13.2.0\\n'"),
        ({"os": "ubuntu24.04\n"}, "os", f"{CONTROL} 'ubuntu24.04\\n'"),
        ({"target": "x86_64\t"}, "target", f"{CONTROL} 'x86_64\\t'"),
        ({"platform": "linux\x00"}, "platform", f"{CONTROL} 'linux\\x00'"),
        ({"os": "ubuntu\u2028rhel"}, "os", f"{CONTROL} 'ubuntu\\u2028rhel'"),
        ({"stacks": ["root", "e4s\n"]}, "stacks[1]", f"{CONTROL} 'e4s\\n'"),
        ({"versions": ["1.0\n"]}, "versions[0]", f"{CONTROL} '1.0\\n'"),
        ({"variants": ["+mpi\n"]}, "variants[0]", f"{CONTROL} '+mpi\\n'"),
        ({"variants": ["color=\x1b[31mred"]}, "variants[0]", f"{CONTROL} 'color=\\x1b[31mred'"),
    ],
    ids=["compiler", "os", "target", "platform", "line-separator", "stack", "version", "variant", "variant-escape"],
)
def test_spec_values_with_control_characters_are_refused(scene, fields, field, expected):
    page = raw_page(scene.page_path("hostile"), specs_text(**fields))
    scene.fails(scene.site, error=f"{page}: spec_details[0].{field}: {expected}")


NAME_RULE = "(letters, digits, '.', '_', '+', '-')"


def test_a_title_with_a_trailing_newline_is_refused(scene):
    page = scene.page_path("bolt", tag="v0.23.1")
    page.write_text(page_text("bolt", "v0.23.1", [spec("newline")]).replace('"bolt"', '"bolt\\n"'))
    scene.fails(scene.site, error=f"{page}: title: expected a package name {NAME_RULE}, found 'bolt\\n'")


def test_a_tag_with_a_trailing_newline_is_refused(scene):
    page = scene.root / "page.md"
    page.write_text(
        page_text("bolt", "develop", [spec("newline")]).replace("[package, develop]", '[package, "develop\\n"]')
    )
    scene.fails(page, error=f"{page}: categories: expected a tag name {NAME_RULE}, found 'develop\\n'")


def test_names_in_tags_yaml_with_control_characters_are_refused(scene):
    tags = scene.site / "_data" / "tags.yaml"
    tags.parent.mkdir()
    tags.write_text('- name: "develop\\n"\n  stacks: [root]\n')
    scene.fails(scene.site, error=f"{tags}: [0].name: expected a tag name {NAME_RULE}, found 'develop\\n'")
    tags.write_text('- name: develop\n  stacks: [root, "e4s\\r"]\n')
    scene.fails(scene.site, error=f"{tags}: [0].stacks[1]: expected a stack name {NAME_RULE}, found 'e4s\\r'")


def test_what_a_keep_going_build_kept_exports_to_pages_that_build_again(scene):
    bad_title = scene.root / "title.md"
    bad_title.write_text(page_text("cli11", "develop", [spec("cli11")]).replace('"cli11"', '"cli11\\n"'))
    bad_os = raw_page(scene.page_path("hdf5"), specs_text(os="rhel8\n"))
    scene.keeps_going(
        scene.site,
        bad_title,
        rejected=[
            f"{bad_os}: spec_details[0].os: {CONTROL} 'rhel8\\n'",
            f"{bad_title}: title: expected a package name {NAME_RULE}, found 'cli11\\n'",
        ],
    )
    exported = scene.root / "exported"
    result = run_cli("export", scene.output, exported, "--quiet")
    assert (result.returncode, result.stderr) == (0, "")
    again = scene.root / "again.db"
    result = run_cli("build", exported, "-o", again, "--quiet")
    assert (result.returncode, result.stderr) == (0, "")
    assert hashes(again) == hashes(scene.output) == [spec("good-bolt")["hash"]]


def test_every_pattern_matches_whole_text_not_up_to_a_final_newline():
    from spack_cache_db.normalise import NAME, classify_tag, parse_compiler, parse_variant

    assert parse_compiler("gcc@13.2.0\n") is None and parse_compiler("gcc@13.2.0") is not None
    assert parse_variant("+mpi\n") is None and parse_variant("x=1\n") is None and parse_variant("x=1") is not None
    assert classify_tag("develop-2025-01-05\n").kind == classify_tag("v0.23.1\n").kind == "other"
    assert NAME.fullmatch("bolt\n") is None


# Class 7: paths that SQLite's URI syntax reads differently. Databases are opened by URIs with the path
# percent-encoded, so '?', '#' and '%' are part of the name.


@pytest.mark.parametrize("name", ["odd?x.db", "odd#x.db", "odd%3Fx.db", "with space & more.db", "file:x.db"])
def test_an_output_with_uri_characters_builds_then_is_up_to_date(tmp_path, name):
    site = tmp_path / "site"
    write_page(site, "bolt", "develop", [spec("bolt")])
    first = run_cli("build", site, "-o", name, "--quiet", cwd=tmp_path)
    assert (first.returncode, first.stderr) == (0, "")
    again = run_cli("build", site, "-o", name, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"{name} is up to date (1 pages unchanged)")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, "site"])  # no stray file such as 'odd'
    assert hashes(tmp_path / name) == [spec("bolt")["hash"]]


def test_check_reads_the_file_it_is_given_not_the_uri_it_spells(tmp_path):
    site = tmp_path / "site"
    write_page(site, "bolt", "develop", [spec("bolt")])
    assert run_cli("build", site, "-o", tmp_path / "good", "--quiet").returncode == 0
    (tmp_path / "good#bad.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 4080)
    result = run_cli("check", "good#bad.db", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL good#bad.db: not a readable SQLite database (")
    assert run_cli("check", "good", cwd=tmp_path).returncode == 0


def test_export_reads_a_database_whose_name_has_uri_characters(tmp_path):
    site = tmp_path / "site"
    write_page(site, "bolt", "develop", [spec("bolt")])
    assert run_cli("build", site, "-o", tmp_path / "a?b#c.db", "--quiet").returncode == 0
    result = run_cli("export", tmp_path / "a?b#c.db", tmp_path / "out")
    assert (result.returncode, result.stderr) == (0, "")
    assert (tmp_path / "out" / "_cache" / "develop" / "bolt" / "specs.md").read_text() == (
        site / "_cache" / "develop" / "bolt" / "specs.md"
    ).read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a?b#c.db", "out", "site"]


def test_a_folder_with_uri_characters_holds_the_output_and_its_compacted_copy(tmp_path):
    folder = tmp_path / "file:odd?#%"
    folder.mkdir()
    site = tmp_path / "site"
    write_page(site, "bolt", "develop", [spec("bolt")])
    result = run_cli("build", "site", "-o", "file:odd?#%/cache.db", "--quiet", cwd=tmp_path)  # relative: file:...
    assert (result.returncode, result.stderr) == (0, "")
    assert sorted(p.name for p in folder.iterdir()) == ["cache.db"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file:odd?#%", "site"]


# Class 8: things that are not ours. A build replaces only a database spack-cache-db built (or, with
# --overwrite, any regular file), never an output inside its inputs; export writes only inside OUTDIR.

REFUSING = "refusing to replace it (--overwrite replaces it anyway)"


def another_applications_database(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes (text) VALUES ('precious')")
    conn.commit()
    conn.close()


def test_another_applications_database_is_not_replaced(scene):
    scene.output.unlink()
    another_applications_database(scene.output)
    scene.fails(
        scene.site,
        error=f"{scene.output}: expected a database built by spack-cache-db (no such table: build_info); {REFUSING}",
    )
    conn = sqlite3.connect(scene.output)
    conn.execute("CREATE TABLE build_info (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO build_info VALUES ('schema_version', '3')")
    conn.commit()
    conn.close()
    scene.fails(
        scene.site, error=f"{scene.output}: expected a database built by spack-cache-db, found another; {REFUSING}"
    )


def test_a_damaged_database_is_not_replaced(scene):
    scene.output.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4080)
    scene.fails(
        scene.site,
        error=f"{scene.output}: expected a database built by spack-cache-db (file is not a database); {REFUSING}",
    )


def test_a_text_file_is_not_replaced(scene):
    scene.output.write_text("precious notes")
    scene.fails(
        scene.site,
        error=f"{scene.output}: expected a SQLite database built by spack-cache-db (or a new path); {REFUSING}",
    )


@pytest.mark.parametrize("kind", ["other-database", "damaged", "text"])
def test_overwrite_replaces_a_file_that_is_not_ours(scene, kind):
    scene.output.unlink()
    if kind == "other-database":
        another_applications_database(scene.output)
    else:
        scene.output.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4080 if kind == "damaged" else b"notes")
    result = run_cli("build", scene.site, "-o", scene.output, "--overwrite", "--quiet")
    assert (result.returncode, result.stderr) == (0, "")
    assert scene.packages() == ["bolt"]


def test_an_empty_file_is_built_over(scene):
    scene.output.write_bytes(b"")
    result = run_cli("build", scene.site, "-o", scene.output, "--quiet")
    assert (result.returncode, result.stderr) == (0, "")
    assert scene.packages() == ["bolt"]


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_an_output_that_is_not_a_regular_file_is_never_replaced(tmp_path, overwrite):
    site = tmp_path / "site"
    write_page(site, "bolt", "develop", [spec("bolt")])
    fifo = tmp_path / "cache.db"
    os.mkfifo(fifo)
    for output, kind in ((fifo, "a FIFO (named pipe)"), (Path("/dev/null"), "a character device")):
        result = run_cli("build", site, "-o", output, *overwrite)
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            f"Error: {output}: file: expected a regular file, found {kind}",
            f"{output} was left as it was.",
        ]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_an_output_inside_an_inputs_cache_is_refused(scene):
    inside = scene.site / "_cache" / "cache.db"
    shutil.copyfile(scene.output, inside)
    before = inside.read_bytes()
    result = run_cli("build", scene.site / "_cache", "-o", inside)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"Error: {inside}: expected an output outside the inputs; {scene.site / '_cache'} holds it, so the next"
        " build would read it as input",
        f"{inside} was left as it was.",
    ]
    assert inside.read_bytes() == before


def test_an_output_inside_an_input_folder_is_refused_even_through_a_link(scene):
    (scene.root / "link").symlink_to(scene.site, target_is_directory=True)
    scene.output = scene.root / "link" / "cache.db"
    shutil.copyfile(scene.root / "out" / "cache.db", scene.output)
    scene.fails(
        scene.site,
        error=f"{scene.output}: expected an output outside the inputs; {scene.site} holds it, so the next build"
        " would read it as input",
    )


@pytest.fixture
def built(scene):
    result = run_cli("build", scene.site, "-o", scene.output, "--quiet")
    assert result.returncode == 0, result.stderr
    return scene


def test_export_replaces_a_page_link_in_outdir_and_leaves_its_target_alone(built):
    outside = built.root / "outside.txt"
    outside.write_text("precious")
    page = built.root / "export" / "_cache" / "develop" / "bolt" / "specs.md"
    page.parent.mkdir(parents=True)
    page.symlink_to(outside)
    result = run_cli("export", built.output, built.root / "export", "--quiet")
    assert (result.returncode, result.stderr) == (0, "")
    assert outside.read_text() == "precious"
    assert not page.is_symlink() and page.read_text() == built.good.read_text()


def test_export_refuses_a_folder_link_in_outdir(built):
    outside = built.root / "outside"
    outside.mkdir()
    cache = built.root / "export" / "_cache"
    cache.mkdir(parents=True)
    (cache / "develop").symlink_to(outside, target_is_directory=True)
    result = run_cli("export", built.output, built.root / "export")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"Error: {cache / 'develop'}: expected a folder, found a link (export writes only inside"
        f" {built.root / 'export'})"
    ]
    assert list(outside.iterdir()) == []


def test_export_refuses_a_file_where_a_folder_goes(built):
    (built.root / "export").mkdir()
    (built.root / "export" / "_cache").write_text("notes")
    result = run_cli("export", built.output, built.root / "export")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"Error: {built.root / 'export' / '_cache'}: expected a folder, found a file (export writes only inside"
        f" {built.root / 'export'})"
    ]
    assert (built.root / "export" / "_cache").read_text() == "notes"


def test_export_refuses_names_in_the_database_that_would_leave_outdir(built):
    conn = sqlite3.connect(built.output)
    conn.execute("UPDATE tags SET name = '../../escaped' WHERE name = 'develop'")
    conn.commit()
    conn.close()
    result = run_cli("export", built.output, built.root / "export")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"Error: {built.output}: tags.name: expected a name that can be a folder (letters, digits, '.', '_', '+',"
        " '-'), found '../../escaped'"
    ]
    assert not (built.root / "escaped").exists() and not (built.root / "export" / "_cache").exists()


def test_export_and_check_of_something_that_is_not_our_database_say_so_in_one_line(tmp_path):
    other = tmp_path / "other.db"
    another_applications_database(other)
    fifo = tmp_path / "fifo.db"
    os.mkfifo(fifo)
    result = run_cli("export", other, tmp_path / "out")
    assert (result.returncode, result.stderr) == (
        1,
        f"Error: {other}: expected a database built by spack-cache-db (no such table: pages)\n",
    )
    result = run_cli("export", fifo, tmp_path / "out")
    assert (result.returncode, result.stderr) == (
        1,
        f"Error: {fifo}: file: expected a regular file, found a FIFO (named pipe)\n",
    )
    result = run_cli("check", fifo)
    assert (result.returncode, result.stdout) == (
        1,
        f"FAIL {fifo}: not a readable SQLite database (expected a regular file, found a FIFO (named pipe))\n",
    )


# Class 9: unreadable folders. Run as a normal user (here: root without the capabilities that override
# permissions), a folder that cannot be read is an error naming it, or with --keep-going a recorded problem.

PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2


def as_a_normal_user():
    """preexec_fn: file permissions apply to the command as to any user. Root keeps its uid (the interpreter
    may live under /root) but loses the capabilities that override permissions."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.fixture
def normal_user(tmp_path):
    """Options for run_cli that run the command as a normal user; skips when permissions cannot be made to
    apply (the probe lists a folder of mode 000)."""
    probe = tmp_path / "probe"
    probe.mkdir(mode=0)
    try:
        listed = subprocess.run(
            [sys.executable, "-c", f"import os; os.listdir({str(probe)!r})"],
            capture_output=True,
            preexec_fn=as_a_normal_user,
            timeout=TIME_LIMIT,
        )
    except subprocess.SubprocessError as error:
        pytest.skip(f"cannot drop the capabilities that override file permissions ({error})")
    finally:
        probe.rmdir()
    if listed.returncode == 0:
        pytest.skip("file permissions do not apply to commands here, even without CAP_DAC_OVERRIDE")
    return {"preexec_fn": as_a_normal_user}


@pytest.fixture
def locked(tmp_path):
    """chmod a path for a test, restoring its mode afterwards."""
    changed = []

    def lock(path, mode=0):
        changed.append((path, stat.S_IMODE(os.lstat(path).st_mode)))
        path.chmod(mode)
        return path

    yield lock
    for path, mode in reversed(changed):
        path.chmod(mode)


def test_an_unreadable_tag_folder_is_an_error_naming_it(scene, normal_user, locked):
    folder = locked(scene.site / "_cache" / "develop")
    scene.fails(scene.site, error=f"{folder}: folder: expected a readable folder (Permission denied)", **normal_user)


def test_an_unreadable_page_is_an_error_naming_it(scene, normal_user, locked):
    page = locked(scene.good)
    scene.fails(scene.site, error=f"{page}: file: expected a readable file (Permission denied)", **normal_user)


def test_a_folder_that_can_be_listed_but_not_entered_is_an_error_naming_it(scene, normal_user, locked):
    folder = locked(scene.site / "_cache" / "develop", 0o444)
    scene.fails(
        scene.site, error=f"{folder / 'bolt'}: folder: expected a readable folder (Permission denied)", **normal_user
    )


def test_an_unreadable_data_folder_is_an_error_naming_tags_yaml(scene, normal_user, locked):
    data = scene.site / "_data"
    data.mkdir()
    (data / "tags.yaml").write_text("- name: develop\n  stacks: [root]\n")
    locked(data)
    scene.fails(
        scene.site, error=f"{data / 'tags.yaml'}: file: expected a readable file (Permission denied)", **normal_user
    )


def test_an_output_folder_that_cannot_be_written_is_an_error_naming_the_output(scene, normal_user, locked):
    locked(scene.output.parent, 0o555)
    before = scene.output.read_bytes()
    result = run_cli("build", scene.site, "-o", scene.output, **normal_user)
    assert result.returncode == 1
    first, second = result.stderr.splitlines()
    assert first.startswith(f"Error: {scene.output}: could not write the new database beside it (")
    assert "Permission denied" in first and second == f"{scene.output} was left as it was."
    assert scene.output.read_bytes() == before and temporaries(scene.output) == []


def test_keep_going_records_an_unreadable_folder_and_check_fails_until_it_is_readable(scene, normal_user, locked):
    other = write_page(scene.site, "cli11", "v0.23.1", [spec("cli11")])
    assert run_cli("build", scene.site, "-o", scene.output, "--quiet").returncode == 0
    folder = locked(scene.site / "_cache" / "develop")
    result = scene.keeps_going(
        scene.site, rejected=[f"{folder}: folder: expected a readable folder (Permission denied)"], **normal_user
    )
    assert "(0 read, 1 unchanged, 1 removed, 1 rejected)" in result.stdout
    assert scene.packages() == ["cli11"] and other.exists()
    assert run_cli("check", scene.output).returncode == 1
    again = run_cli("build", scene.site, "-o", scene.output, "--keep-going", **normal_user)
    assert again.stdout.startswith(f"{scene.output} is up to date")  # the same problem, still recorded
    assert scene.problems() == [f"{folder}: folder: expected a readable folder (Permission denied)"]
    folder.chmod(0o755)
    result = run_cli("build", scene.site, "-o", scene.output, **normal_user)
    assert result.returncode == 0, result.stderr
    assert scene.packages() == ["bolt", "cli11"] and scene.problems() == []
    assert run_cli("check", scene.output).returncode == 0


# Class 10: read-only and failing file systems. Cleanup never hides why a build stopped, and a failure after
# the output was replaced is not reported as a build that left it as it was.


def read_only_wrapper(folder):
    """A command prefix: run the command in its own mount namespace where folder is a read-only bind mount."""
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return ("unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(folder))


@pytest.fixture
def read_only(tmp_path):
    """read_only(folder): run_cli options that make folder read-only for the command; skips where mount
    namespaces are not available."""
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        made = subprocess.run(
            [*read_only_wrapper(probe), "sh", "-c", f"! touch {str(probe / 'x')!r} 2>/dev/null"],
            capture_output=True,
            timeout=TIME_LIMIT,
        )
    except OSError as error:
        pytest.skip(f"no unshare here ({error})")
    if made.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount here ({made.stderr.decode().strip()})")
    probe.rmdir()
    return lambda folder: {"wrapper": read_only_wrapper(folder)}


def test_a_build_onto_a_read_only_folder_says_so_and_keeps_the_database(scene, read_only):
    other = write_page(scene.site, "cli11", "v0.23.1", [spec("cli11")])
    before = scene.output.read_bytes()
    result = run_cli("build", scene.site, "-o", scene.output, **read_only(scene.output.parent))
    assert result.returncode == 1
    first, second = result.stderr.splitlines()
    assert first.startswith(f"Error: {scene.output}: could not write the new database beside it (")
    assert "Read-only file system" in first and second == f"{scene.output} was left as it was."
    assert scene.output.read_bytes() == before and other.exists()


def test_a_new_output_in_a_read_only_folder_says_so_and_creates_nothing(scene, read_only):
    scene.output.unlink()
    result = run_cli("build", scene.site, "-o", scene.output, **read_only(scene.output.parent))
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: {scene.output}: could not write the new database beside it (")
    assert "Read-only file system" in result.stderr
    assert list(scene.output.parent.iterdir()) == []


def test_a_stale_temporary_on_a_read_only_folder_does_not_hide_the_error(scene, read_only):
    stale = scene.output.with_name(f".{scene.output.name}.tmp-999999999")  # no such process
    stale.write_bytes(b"left by a killed build")
    result = run_cli("build", scene.site, "-o", scene.output, **read_only(scene.output.parent))
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: {scene.output}: could not write the new database beside it (")
    assert len(result.stderr.splitlines()) == 2
    assert stale.read_bytes() == b"left by a killed build"


def test_an_unchanged_build_on_a_read_only_folder_is_up_to_date(scene, read_only):
    assert run_cli("build", scene.site, "-o", scene.output, "--quiet").returncode == 0
    before = scene.output.read_bytes()
    result = run_cli("build", scene.site, "-o", scene.output, **read_only(scene.output.parent))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith(f"{scene.output} is up to date")
    assert scene.output.read_bytes() == before


def test_export_to_a_read_only_folder_is_one_line(built, read_only):
    outdir = built.root / "export"
    outdir.mkdir()
    result = run_cli("export", built.output, outdir, **read_only(outdir))
    assert result.returncode == 1
    assert (
        result.stderr == f"Error: {outdir / '_cache'}: expected a folder that can be written (Read-only file system)\n"
    )
    assert list(outdir.iterdir()) == []


def failing(error_number):
    def fail(*args, **kwargs):
        raise OSError(error_number, os.strerror(error_number))

    return fail


def test_cleanup_that_fails_too_does_not_hide_why_the_build_stopped(scene, monkeypatch, time_limit):
    write_page(scene.site, "cli11", "v0.23.1", [spec("cli11")])
    before = scene.output.read_bytes()
    monkeypatch.setattr(build_module.os, "replace", failing(errno.EIO))
    monkeypatch.setattr(Path, "unlink", failing(errno.EROFS))
    with pytest.raises(build_module.BuildError) as raised:
        build([str(scene.site)], scene.output)
    assert (
        str(raised.value)
        == f"{scene.output}: could not write the new database beside it ([Errno 5] Input/output error)"
    )
    monkeypatch.undo()
    assert scene.output.read_bytes() == before


def test_a_file_that_cannot_be_synced_stops_the_build_before_the_swap(scene, monkeypatch, time_limit):
    write_page(scene.site, "cli11", "v0.23.1", [spec("cli11")])
    before = scene.output.read_bytes()
    monkeypatch.setattr(build_module.os, "fsync", failing(errno.EIO))
    with pytest.raises(build_module.BuildError, match=r"could not write the new database beside it \(\[Errno 5\]"):
        build([str(scene.site)], scene.output)
    assert scene.output.read_bytes() == before and temporaries(scene.output) == []


def test_a_folder_that_cannot_be_synced_after_the_swap_is_not_reported_as_a_failure(scene, monkeypatch, time_limit):
    write_page(scene.site, "cli11", "v0.23.1", [spec("cli11")])
    fsync = os.fsync

    def fail_on_folders(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")
        fsync(fd)

    monkeypatch.setattr(build_module.os, "fsync", fail_on_folders)
    build([str(scene.site)], scene.output)
    assert scene.packages() == ["bolt", "cli11"]
