"""The command line run as a user runs it, watched: its exit status and what it prints, how long it took, its
peak memory (its own and its children's, from the kernel), and whether anything but its output changed."""

import hashlib
import os
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Watched:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_bytes: int  # the largest resident set of the process or of any child it waited for


def run_watched(command, time_limit, **options):
    """Run command, killing it after time_limit seconds."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=out, stderr=err, **options)
        killer = threading.Timer(time_limit, process.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            killer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return Watched(
            process.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            seconds,
            usage.ru_maxrss * 1024,  # Linux counts it in KiB
        )


def snapshot(root, output):
    """Every file, folder and link under root but the output (and its temporary files), with whatever would
    show that it changed. Links are not followed; only regular files are read."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path == output or name.startswith(f".{output.name}.tmp-"):
                continue
            info = os.lstat(path)
            content = None
            if stat.S_ISREG(info.st_mode) and info.st_size < 16 * 2**20:
                content = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            if stat.S_ISDIR(info.st_mode):  # what it holds is compared: its times change with a temporary file
                found[str(path)] = (info.st_mode, None, None, None)
            else:
                found[str(path)] = (info.st_mode, info.st_size, info.st_mtime_ns, content)
    return found


def temporaries(output):
    return sorted(p.name for p in output.parent.glob(f".{output.name}.tmp-*"))
