"""Running a build (or a lower bound) as a subprocess and measuring it: wall and CPU seconds, and the peak RSS
of its process tree; builder and lower bound alternating; a file's identity before and after a build."""

import contextlib
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

STARTED = time.monotonic()


def log(message):
    """A line of progress on stderr, with the time since the benchmark started."""
    elapsed = int(time.monotonic() - STARTED)
    print(f"[{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}] {message}", file=sys.stderr, flush=True)


def run_measured(command, check=True):
    """Run command; its wall and CPU seconds and the peak RSS of its process tree.

    os.wait4 gives the CPU of this one child and of the children it waited for (the builder's writer
    process). Their peak RSS is sampled from /proc every 20 ms and summed across the tree, since the
    builder and its writer run at the same time; where that is not available, wait4's figure (the
    largest single process) is the floor. Finding the tree means reading every process's stat, so
    that is done every 200 ms only: done every sample, it took a fifth of a core from the run it measured.
    With check=False a failed command gives its exit status and the end of its error output instead of
    stopping the benchmark. It starts once what earlier steps wrote is on disk (os.sync, not timed): writing
    that back would otherwise slow whatever is timed next, a build's own fsync most (adding a tag: 8.6 s
    in one run, 6.1 s by hand).
    """
    os.sync()
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
        peak_kib, tree, sample = 0, {process.pid}, 0
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if sample % 10 == 0:
                tree = process_tree(process.pid)
            peak_kib = max(peak_kib, rss_kib(tree))
            sample += 1
            time.sleep(0.02)
        wall = time.perf_counter() - started
        returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        error_text = errors.read().decode(errors="replace")
    if returncode != 0:
        if check:
            raise SystemExit(f"{' '.join(command)} failed ({returncode}):\n{error_text}")
        return {"returncode": returncode, "error": error_text.strip()[-2000:]}
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_kib": max(peak_kib, usage.ru_maxrss)}


def process_tree(root):
    """The pids of a process and all its descendants now (just root where /proc is not there)."""
    parents = {}
    with contextlib.suppress(OSError), os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError), open(f"/proc/{entry.name}/stat") as stat:
                    parents[int(entry.name)] = int(stat.read().rsplit(")", 1)[1].split()[1])
    tree, grown = {root}, True
    while grown:
        descendants = {pid for pid, parent in parents.items() if parent in tree}
        grown = not descendants <= tree
        tree |= descendants
    return tree


def rss_kib(pids):
    """Resident KiB of these processes together now (0 for those gone, or where /proc is not there)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
            total += next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
    return total


def summarise(runs):
    """Medians of a list of run_measured results, and the largest peak RSS."""
    return {
        "wall_s": statistics.median(run["wall_s"] for run in runs),
        "cpu_s": statistics.median(run["cpu_s"] for run in runs),
        "peak_rss_mib": max(run["peak_rss_kib"] for run in runs) / 1024,
        "runs": runs,
    }


def compare_alternating(name, builder, lower_bound, runs, after_build=None):
    """Run the builder and its lower bound in turn (each a function giving the command), `runs` times
    each: medians and their ratios. after_build, when given, measures what each build made before the next
    one replaces it (run after the lower bound, so that it alternates with both): its results in order."""
    built, bound, after = [], [], []
    for number in range(1, runs + 1):
        built.append(run_measured(builder()))
        bound.append(run_measured(lower_bound()))
        log(f"{name} {number}/{runs}: builder {built[-1]['wall_s']:.1f} s, lower bound {bound[-1]['wall_s']:.1f} s")
        if after_build is not None:
            after.append(after_build())
    built, bound = summarise(built), summarise(bound)
    return {
        "builder": built,
        "lower_bound": bound,
        "ratio_wall": built["wall_s"] / bound["wall_s"],
        "ratio_cpu": built["cpu_s"] / bound["cpu_s"],
        **({"after_build": after} if after_build is not None else {}),
    }


def file_state(path):
    """What must not change when a build writes nothing: inode, size, modification time and content."""
    stat = path.stat()
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as file:
        while chunk := file.read(1 << 24):
            digest.update(chunk)
    return {"inode": stat.st_ino, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "blake2b": digest.hexdigest()}


def timed_copy(source, copy):
    """Seconds to copy a file as a builder that builds onto a copy of its output does: shutil.copyfile, then
    the copy synced to disk before it could be swapped in. Like a build, it starts once earlier writes are on
    disk."""
    os.sync()
    started = time.perf_counter()
    shutil.copyfile(source, copy)
    with open(copy, "rb") as written:
        os.fsync(written.fileno())
    return time.perf_counter() - started
