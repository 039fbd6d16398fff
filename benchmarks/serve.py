"""Serving a built database as the README says and timing pages over HTTP.

Datasette runs in a subprocess with the code under test first on its PYTHONPATH (so the plugin is that
code's), and its start-up hooks run as they do for a user. Requests go over one kept-alive connection; a
page is timed from sending the request to the end of its body. Nothing here waits without a limit: a
request that takes longer than REQUEST_TIMEOUT_S is recorded as timed out, and a page stops being asked
again once URL_BUDGET_S have gone on it.
"""

import collections
import contextlib
import html
import http.client
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

# As a user serves the database (the README: plain `datasette -i cache.db` gives what `-m metadata.yml`
# does); run with this interpreter's datasette and --host/--port added. tests/test_benchmarks.py checks
# that the README still says this.
SERVE_COMMAND = ("datasette", "-i", "cache.db", "--setting", "suggest_facets", "off")
STARTUP_TIMEOUT_S = 600  # the plugin hashes the file at start-up: seconds for a history's gigabytes
REQUEST_TIMEOUT_S = 60  # far past every target: a page slower than this is recorded as timed out
URL_BUDGET_S = 60  # timed requests of one page stop once this much time has gone on them
TIMED_OUT = None  # the status of a request that got no answer within REQUEST_TIMEOUT_S

ROW_COUNT = re.compile(r"<title>[^<]*?: ([\d,]+) rows?\b")
FACETS_TIMED_OUT = re.compile(r'class="facets-timed-out">These facets timed out: ([^<]*)<')


def url(path, params=None):
    return f"{path}?{urllib.parse.urlencode(params)}" if params else path


class Client:
    """GET over one kept-alive HTTP connection to the served Datasette (opened again if it drops)."""

    def __init__(self, port, timeout=REQUEST_TIMEOUT_S):
        self.port, self.timeout = port, timeout
        self.connection = None

    def get(self, path):
        """(status, body, milliseconds from sending the request to the end of the body); status TIMED_OUT
        when no answer came within the client's timeout."""
        for attempt in range(2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            started = time.perf_counter()
            try:
                self.connection.request("GET", path)
                response = self.connection.getresponse()
                body = response.read().decode(errors="replace")
                return response.status, body, (time.perf_counter() - started) * 1000
            except TimeoutError:
                self.close()
                return TIMED_OUT, "", (time.perf_counter() - started) * 1000
            except (http.client.HTTPException, OSError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve_command(port):
    """SERVE_COMMAND with this interpreter's datasette, and where to listen."""
    executable = str(Path(sys.executable).parent / "datasette")
    return [executable, *SERVE_COMMAND[1:], "--host", "127.0.0.1", "--port", str(port)]


@contextlib.contextmanager
def served(db, code, log_path):
    """Datasette serving db (which must be called cache.db) as the README does, in a subprocess; a Client."""
    port = free_port()
    environment = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, (str(code), os.environ.get("PYTHONPATH"))))}
    with open(log_path, "wb") as output:
        process = subprocess.Popen(
            serve_command(port), cwd=db.parent, env=environment, stdout=output, stderr=subprocess.STDOUT
        )
        client = Client(port)
        try:
            wait_until_serving(process, port, log_path)
            yield client
        finally:
            client.close()
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_until_serving(process, port, log_path):
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    probe = Client(port, timeout=5)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"datasette exited ({process.returncode}) before serving:\n{log_path.read_text()[-3000:]}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            if probe.get("/-/versions.json")[0] == 200:
                probe.close()
                return
        time.sleep(0.2)
    raise SystemExit(f"datasette did not answer within {STARTUP_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}")


def nearest_rank_p95(samples):
    """The 95th percentile by nearest rank: of 20 samples, the second slowest."""
    ordered = sorted(samples)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


def time_url(client, path, requests):
    """One warm-up GET, then up to `requests` timed ones: statuses, median and p95, and what the pages
    showed: the row count in the title of a table page (None when Datasette's count ran out of time) and
    the facets it names as timed out. A warm-up that fails (an error, Datasette's time limit, no answer in
    REQUEST_TIMEOUT_S) is the only sample: the page misses its target however often it is asked again.
    Timed requests stop once URL_BUDGET_S have gone on them."""
    answers = [client.get(path)]
    samples, started = [], time.monotonic()
    while answers[0][0] == 200 and len(samples) < requests:
        if samples and time.monotonic() - started > URL_BUDGET_S:
            break
        answers.append(client.get(path))
        samples.append(answers[-1][2])
    samples = samples or [answers[0][2]]
    timing = {
        "url": path,
        "statuses": sorted({status for status, _, _ in answers}, key=lambda status: status or 0),
        "requests": len(samples),
        "median_ms": statistics.median(samples),
        "p95_ms": nearest_rank_p95(samples),
        "samples_ms": samples,
    }
    failed = [body for status, body, _ in answers if status not in (200, TIMED_OUT)]
    if failed:
        timing["error"] = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", failed[0])).strip()[:300]
    answered = [body for status, body, _ in answers if status == 200]
    counts = {match.group(1) if (match := ROW_COUNT.search(body)) else None for body in answered}
    timing["row_count"] = int(counts.pop().replace(",", "")) if len(counts) == 1 and None not in counts else None
    timing["counted"] = f"{sum(ROW_COUNT.search(body) is not None for body in answered)} of {len(answered)}"
    timed_out = collections.Counter()
    for body in answered:
        if named := FACETS_TIMED_OUT.search(body):
            timed_out.update(html.unescape(named.group(1)).split(", "))
    timing["facets_timed_out"] = dict(timed_out)
    return timing


def answered_in_time(timing, limit_ms, with_count):
    """A page's target: every answer 200 and the p95 within the limit (and, for a table page, its row count)."""
    return (
        timing["statuses"] == [200]
        and timing["p95_ms"] <= limit_ms
        and (not with_count or timing["row_count"] is not None)
    )
