"""A real datasette server, started the way the README says (its start-up hooks run), for the crawler and
the browser tests."""

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request

from pagemaker import spec, write_page

from spack_cache_db.build import build


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(url, process, deadline_seconds=60):
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = process.stderr.read().decode()[-2000:] if process.stderr else "(see its log)"
            raise RuntimeError(f"datasette exited with {process.returncode}: {log}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"datasette did not answer {url} within {deadline_seconds} s")


@contextlib.contextmanager
def datasette(*arguments, log=None):
    """`datasette serve ARGUMENTS` on a free port: yields its base URL, and stops it after. log: a file for what
    it writes to stderr (its log)."""
    port = free_port()
    command = [sys.executable, "-m", "datasette", "serve", *map(str, arguments), "-h", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log or subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(base + "/-/versions.json", process)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()


def readme_command(db_path, metadata_path):
    """The README's: datasette -i cache.db -m metadata.yml --setting suggest_facets off."""
    return ["-i", db_path, "-m", metadata_path, "--setting", "suggest_facets", "off"]


PY_NUMPY_STACKS = {"ml-linux-x86_64-cpu": 3, "ml-linux-aarch64-cpu": 2, "e4s": 1}


def write_py_numpy(root):
    """py-numpy in the snapshot develop-2025-04-20, built by three stacks (PY_NUMPY_STACKS binaries each);
    the samples have no py-numpy."""
    specs = [
        spec(
            f"py-numpy/{stack}/{n}",
            stacks=[stack, "root"],
            versions=["2.2.4" if n % 2 else "1.26.4"],
            compiler="gcc@13.2.0",
            target="aarch64" if "aarch64" in stack else "x86_64_v3",
            variants=["build_system=python_pip", "+blas"],
        )
        for stack, count in PY_NUMPY_STACKS.items()
        for n in range(count)
    ]
    write_page(root, "py-numpy", "develop-2025-04-20", specs)
    return root


def build_with_py_numpy(samples, folder):
    """cache.db of the samples and py-numpy, in folder."""
    path = folder / "cache.db"
    build([*samples, str(write_py_numpy(folder / "extra"))], path)
    return path
