"""Running the command line as a person at a terminal does."""

import os
import pty
import select
import subprocess
import sys
import time

from paths import ROOT


def run_in_terminal(*args, timeout=120):
    """Run the builder with stderr on a pseudo-terminal, as a person at a terminal would: (stdout, stderr).
    A run that outlasts timeout is killed and fails the test."""
    main, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "build_db.py"), *args], stdout=subprocess.PIPE, stderr=secondary
    )
    os.close(secondary)
    deadline, seen = time.monotonic() + timeout, b""
    try:
        while True:
            ready, _, _ = select.select([main], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                process.kill()
                raise AssertionError(f"build_db.py {' '.join(args)} did not finish within {timeout} s")
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal closed: the builder is done
                break
            if not chunk:
                break
            seen += chunk
        stdout = process.communicate(timeout=max(deadline - time.monotonic(), 1))[0]
    finally:
        os.close(main)
    return stdout.decode(), seen.decode()
