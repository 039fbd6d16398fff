"""The command line run as a user runs it, watched: its exit status and what it prints, how long it took, its
peak memory (its own and its children's, from the kernel), and whether anything but its output changed."""

import hashlib
import os
import re
import signal
import stat
import subprocess
import sys
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
    peak_bytes: int  # the largest resident set of the command or of any child it waited for; 0 if it was killed


# Linux starts a child's peak resident set at the one its parent had when it forked, and keeps it across exec: a
# command started straight from the test process would count the test process's peak. So the command runs as the
# child of this small launcher, which writes the command's own peak (in KiB) to the file named first.
LAUNCHER = """
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as peak:
    peak.write(str(usage.ru_maxrss))
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.waitstatus_to_exitcode(status))
"""


def own_rise_from_now():
    """A function giving how far this process's peak resident set rose above its resident set at the call, in
    bytes. The kernel's high-water mark is reset first (writing 5 to clear_refs), so that a peak the process
    reached before cannot hide what comes after."""
    Path("/proc/self/clear_refs").write_text("5")
    start = own_status_kib("VmHWM")
    return lambda: (own_status_kib("VmHWM") - start) * 1024


def own_status_kib(field):
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB$", status, re.MULTILINE).group(1))


def kill_group(leader):
    try:
        os.killpg(leader, signal.SIGKILL)
    except ProcessLookupError:  # it ended as the time ran out
        pass


def run_watched(command, time_limit, **options):
    """Run command, killing it (and whatever it started) after time_limit seconds."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as peak:
        peak_file = Path(peak) / "peak-kib"
        launched = [sys.executable, "-c", LAUNCHER, peak_file, *command]
        started = time.monotonic()
        process = subprocess.Popen(launched, stdout=out, stderr=err, start_new_session=True, **options)
        killer = threading.Timer(time_limit, kill_group, (process.pid,))
        killer.start()
        try:
            process.wait()
        finally:
            killer.cancel()
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return Watched(
            process.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            seconds,
            int(peak_file.read_text()) * 1024 if peak_file.exists() else 0,  # Linux counts it in KiB
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
