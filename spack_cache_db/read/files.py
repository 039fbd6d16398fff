"""Safe access to the files a build is given: input files are read only when they are regular files, never
past a size cap, with their identity taken from the open file that was read; databases are opened by URIs
that cannot be read as anything but their path."""

import os
import stat
from typing import NamedTuple

from spack_cache_db.records import InputError

MAX_FILE_BYTES = 256 * 1024 * 1024  # per file: a page of 20,000 specs is about 6 MB
_READ_CHUNK = 1024 * 1024
# How an input is opened: never waiting (a FIFO), never becoming a terminal's, never inherited by a child.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class FileError(InputError):
    """A file that cannot be read: names it, the field 'file' and what was expected."""


def _file_error(path, expected):
    return FileError(display_path(path), "file", expected)


class Identity(NamedTuple):
    """What says that a file is still the one an earlier build read. An edit that keeps size and
    modification time still changes the inode's change time (ctime), which no program can set back; a
    file replaced by another has another inode. Each as SQLite's 64-bit integers store it."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int


def identity(stat_result):
    found = Identity(stat_result.st_size, stat_result.st_mtime_ns, stat_result.st_ctime_ns, stat_result.st_ino)
    if max(found) < 2**63 and min(found) >= -(2**63):
        return found
    return Identity(*map(_int64, found))


def same_identity(stat_result, recorded):
    """Whether a stat result is the recorded Identity (or a plain tuple of its fields): compared as a plain tuple
    first, a fifth faster over a history's files than making an Identity of each; then as identity() stores
    values past 64 bits."""
    found = (stat_result.st_size, stat_result.st_mtime_ns, stat_result.st_ctime_ns, stat_result.st_ino)
    return found == recorded or identity(stat_result) == recorded


class FolderListing(NamedTuple):
    """What says that a folder still holds the entries an earlier build listed: adding, removing or renaming an
    entry changes the folder's change time (ctime), and a folder put in its place has another inode. With the
    number of entries listed, so that a build which recorded fewer files of the folder than that lists it again."""

    ctime_ns: int
    inode: int
    entries: int


def folder_listing(stat_result, entries):
    """The FolderListing of a folder's stat result and the number of its entries, as SQLite stores it."""
    found = identity(stat_result)
    return FolderListing(found.ctime_ns, found.inode, entries)


def same_listing(stat_result, recorded):
    """Whether a folder's stat result is the one recorded in a FolderListing: compared as it is first, as
    same_identity does; then as folder_listing stores values past 64 bits."""
    found = (stat_result.st_ctime_ns, stat_result.st_ino)
    return found == (recorded.ctime_ns, recorded.inode) or folder_listing(stat_result, recorded.entries) == recorded


def _int64(number):
    """number as a signed 64-bit integer: an inode number can use all 64 bits, and a modification time
    past 2262 is more nanoseconds than 2**63."""
    return (number + 2**63) % 2**64 - 2**63


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode):
    """'a FIFO (named pipe)', 'a folder', ...: what a file that is not a regular file is."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular_file(path, limit=MAX_FILE_BYTES, starts_with=None):
    """(the bytes of path, its Identity): only a regular file, at most limit bytes. Raises FileError. With
    starts_with (a tuple of prefixes), a file that starts with none of them is not read past its first bytes,
    which are returned instead: a folder's other files cost a few bytes each, whatever their size.

    A FIFO or a device is never opened (opening one can block or act on a device): stat decides first,
    and the open file is checked again, so a file swapped in between is refused too. The identity is the
    open file's before it is read: a file changed while being read differs from it, so the next build
    reads it again; one that changes during the read itself is refused."""
    fd, opened = _open_regular(path)
    try:
        if starts_with:
            start = _read_start(path, fd, max(map(len, starts_with)))
            if not start.startswith(starts_with):
                return start, identity(opened)
            os.lseek(fd, 0, os.SEEK_SET)
        if opened.st_size > limit:
            raise _file_error(path, f"expected at most {_size_text(limit)}, found {opened.st_size:,} bytes")
        data = _read_at_most(path, fd, opened.st_size, limit)
        after = os.fstat(fd)
        if (after.st_size, after.st_mtime_ns) != (opened.st_size, opened.st_mtime_ns):  # ctime: also unlinked
            raise _file_error(path, "expected a file that does not change while it is read (read it again)")
    finally:
        os.close(fd)
    return data, identity(opened)


def read_start(path, count):
    """The first count bytes of the regular file at path (fewer if it is shorter), or None when nothing is
    there; raises FileError for anything else (a FIFO, a device, a folder) or a file that cannot be read."""
    if not os.path.lexists(path):
        return None
    fd, _ = _open_regular(path)
    try:
        return os.read(fd, count)
    except OSError as error:
        raise _file_error(path, f"expected a readable file ({error.strerror})") from error
    finally:
        os.close(fd)


# How many files ahead of the one being read the system is asked to read (read_ahead): about 2 MB of pages of the
# usual shape. Reading 27,000 of them from the disk took 13.5 s one after the other, 6.2 s two at a time and 5.5 s
# eight at a time (benchmarks/README.md, "Pages not in memory"); the window is not tuned beyond that.
READ_AHEAD_FILES = 64


def read_ahead(files, path_of=os.fspath, window=READ_AHEAD_FILES):
    """Yields each of files (a list) in turn, once the system has been asked to start reading the regular files
    among the next window of them into memory (posix_fadvise WILLNEED), so that the disk reads them while the
    caller works on the one before. path_of: a file's path. Only a hint: reading a file is still up to
    read_regular_file, which says what is wrong with it. Where the system takes no such hint, files as they are."""
    if not hasattr(os, "posix_fadvise"):
        yield from files
        return
    for file in files[:window]:
        _ask_to_read(path_of(file))
    for number, file in enumerate(files):
        if number + window < len(files):
            _ask_to_read(path_of(files[number + window]))
        yield file


def _ask_to_read(path):
    """Start reading a regular file into memory, if it is one (no link followed, nothing else opened)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return
        fd = os.open(path, _OPEN_FLAGS | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    finally:
        os.close(fd)


def _open_regular(path):
    """(a descriptor of the regular file at path, its fstat): stat decides first, so that nothing else is
    opened, and the open file is checked again; raises FileError."""
    flags = _OPEN_FLAGS
    if not _is_link_to_regular_file(path):
        flags |= os.O_NOFOLLOW  # it was no link when checked: a link put there since is refused
    try:
        fd = os.open(path, flags)
    except OSError as error:
        raise _file_error(path, f"expected a readable file ({error.strerror})") from error
    try:
        opened = os.fstat(fd)
        _require_regular(path, opened.st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd, opened


def _is_link_to_regular_file(path):
    """Whether path is a link (to a regular file); raises FileError when it is neither a regular file nor a
    link to one."""
    try:
        link = os.lstat(path)
        target = os.stat(path) if stat.S_ISLNK(link.st_mode) else link
    except OSError as error:
        raise _file_error(path, f"expected a readable file ({error.strerror})") from error
    _require_regular(path, target.st_mode)
    return stat.S_ISLNK(link.st_mode)


def _require_regular(path, mode):
    if not stat.S_ISREG(mode):
        raise _file_error(path, f"expected a regular file, found {kind_of(mode)}")


def _read_start(path, fd, count):
    try:
        return os.read(fd, count)
    except OSError as error:
        raise _file_error(path, f"expected a readable file ({error.strerror})") from error


def _read_at_most(path, fd, expected_size, limit):
    chunks, total = [], 0
    wanted = min(expected_size + 1, limit + 1)  # one read for the usual file, one more to see its end
    while True:
        try:
            chunk = os.read(fd, wanted)
        except OSError as error:
            raise _file_error(path, f"expected a readable file ({error.strerror})") from error
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _file_error(path, f"expected at most {_size_text(limit)}, found more (it grew while read)")
        wanted = min(_READ_CHUNK, limit + 1 - total)


def _size_text(size):
    return f"{size // (1024 * 1024)} MiB" if size >= 1024 * 1024 else f"{size:,} bytes"


def display_path(path):
    """path as it can be printed and stored: bytes that are not UTF-8 written as \\xNN."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
