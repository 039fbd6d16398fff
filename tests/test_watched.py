"""The watch the command-line tests keep: a peak is the command's own, whatever the test process held before."""

import sys
import time
from pathlib import Path

from watched import own_rise_from_now, run_watched

MIB = 2**20


def resident(mib):
    """A block of mib MiB, every page of it touched."""
    block = bytearray(mib * MIB)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    return block


def python(code):
    return [sys.executable, "-c", code]


def test_a_small_command_has_a_small_peak_after_the_test_process_grew():
    block = resident(400)
    result = run_watched(python("pass"), 30)
    del block
    assert result.returncode == 0, result.stderr
    assert 0 < result.peak_bytes < 100 * MIB


def test_the_peak_counts_the_command_and_the_children_it_waited_for():
    grow = "block = bytearray(300 * 2**20)\nfor i in range(0, len(block), 4096): block[i] = 1"
    alone = run_watched(python(grow), 30)
    child = run_watched(python(f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grow!r}])"), 30)
    for result in (alone, child):
        assert result.returncode == 0, result.stderr
        assert result.peak_bytes > 300 * MIB


def test_a_command_past_its_time_is_killed_with_what_it_started():
    started = "import subprocess, sys; print(subprocess.Popen(['sleep', '30']).pid, flush=True); subprocess.run(['sleep', '30'])"
    result = run_watched(python(started), 1)
    assert result.returncode == -9 and result.seconds < 10
    sleeper = int(result.stdout)
    deadline = time.monotonic() + 5  # the signal is sent; the process ends when it next runs
    while process_state(sleeper) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_state(sleeper) in (None, "Z")  # gone, or a zombie that only waits to be reaped


def process_state(pid):
    """The state letter Linux gives the process (S sleeping, Z zombie...), or None when there is none."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except FileNotFoundError:
        return None


def test_the_rise_of_the_test_process_is_counted_from_the_call():
    earlier = resident(300)
    del earlier
    rise = own_rise_from_now()
    assert rise() < 50 * MIB
    block = resident(200)
    # Not counted from the earlier, higher peak (that would give 0). Not quite 200 either: the process may give
    # a few pages back while it fills the block (CI once saw 4 KiB less).
    assert rise() > 190 * MIB
    del block
