"""Measure the builder and the served database against the targets of issues 14 (scale) and 12 (indexes).

    python benchmarks/run.py --size small|full|history [--corpus PATH] [--extra-tag PATH] [--big-tag PATH]
                             [--runs N] [--requests N] [--work DIR] [--results DIR]

In one run, on one corpus (benchmarks/README.md explains each measure):
- a full build from the pages against benchmarks/lower_bound.py (orjson parse, flat inserts), alternating,
  one subprocess per run; peak RSS of the builder's process tree (the builder and its writer process);
  the database's bytes per binary; an unchanged rebuild; adding one tag against building that tag alone;
- a full build from the corpus's build-cache indexes (its cache_spack_io_index.json) against
  benchmarks/lower_bound_indexes.py, alternating, and the peak RSS of building one busy tag whose root
  index is about 150 MB; reported as not measured while the builder does not read indexes;
- the database served with the README's command (SERVE_COMMAND) in a subprocess, timed over HTTP: the
  binaries page, a click on the top value of each facet and a search (each with whether Datasette gave
  the exact row count), and every canned query, all as HTML.
Prints a Markdown report and writes it, with every raw number as JSON, to benchmarks/results/<size>.md
and <size>.json. Everything runs from a copy of the code taken at the start (WORK/code, also first on the
served Datasette's PYTHONPATH for the plugin), so edits made meanwhile do not leak into the numbers.

Without --corpus, --extra-tag or --big-tag, generate_corpus.py writes them into WORK/generated (replaced on
each run). --extra-tag is a folder holding _cache/<one tag>/, as `generate_corpus.py --only-tag` writes;
--big-tag a folder holding the cache_spack_io_index.json of one tag.
"""

import argparse
import collections
import contextlib
import hashlib
import html
import http.client
import json
import math
import os
import platform
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path

import yaml
from generate_corpus import EXTRA_TAG
from lower_bound_indexes import local_path, read_index

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
# What a run uses from the repository: copied once into WORK/code, see snapshot_code.
CODE_UNDER_TEST = (
    "build_db.py",
    "spack_cache_db",
    "metadata.yml",
    "benchmarks/lower_bound.py",
    "benchmarks/lower_bound_indexes.py",
    "benchmarks/generate_corpus.py",
    "benchmarks/build_cache_indexes.py",
)
SIZES = ("small", "full", "history")
# A busy tag for the memory of an index build: develop (its pages hold rebuilds) with more packages than
# the corpus, so that its root index is about BIG_INDEX_MB. The small size keeps the smoke test quick.
BIG_TAG = "develop"
BIG_TAG_PACKAGES = {"small": 30, "full": 1175, "history": 1175}
BIG_INDEX_MB = 150
# As the README serves the database ("Serve it"); run with this interpreter's datasette, the code's
# metadata.yml, and --host/--port added. tests/test_benchmarks.py checks that the README still says this.
SERVE_COMMAND = ("datasette", "-i", "cache.db", "-m", "metadata.yml", "--setting", "suggest_facets", "off")
STARTUP_TIMEOUT_S = 600  # the plugin hashes the file at start-up: seconds for the history's gigabyte
REQUEST_TIMEOUT_S = 120

# Targets (issue 14 on the 100-tag history, issue 12 for indexes).
MAX_BUILD_RATIO = 2.0  # full build / lower bound with orjson, wall
MAX_PEAK_RSS_MIB = 1024  # builder and writer together
MAX_UNCHANGED_FRACTION = 0.05  # unchanged rebuild / full build
MAX_ADD_TAG_RATIO = 1.5  # adding one tag / that tag alone
MAX_BYTES_PER_BINARY = 160  # cache.db bytes / binaries
MAX_BINARIES_PAGE_P95_MS = 500  # /cache/binaries, with its row count
MAX_FACET_CLICK_P95_MS = 1000  # each facet click and a search, with exact row counts
MAX_CANNED_P95_MS = 200  # every canned query as HTML
MAX_INDEX_BUILD_RATIO = 2.0  # build from indexes / lower bound over the same files
MAX_INDEX_PEAK_RSS_MIB = 1024  # building one tag whose root index is about BIG_INDEX_MB

NO_INDEX_READER = "the builder does not read indexes yet"


def log(message):
    print(message, file=sys.stderr, flush=True)


# --- inputs ----------------------------------------------------------------------------------------------------


def snapshot_code(work):
    """Copy the code under test into WORK/code, and say which version it is.

    Others may commit or edit in the repository while a benchmark runs for minutes; running the copy
    keeps every number of one report on one version of the code.
    """
    version = code_version()
    code = work / "code"
    shutil.rmtree(code, ignore_errors=True)
    for name in CODE_UNDER_TEST:
        source, copy = ROOT / name, code / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, copy)
    return code, version


def prepare_inputs(args, code, work):
    """{corpus, extra, big_tag: folder} (the ones given, or generated into WORK/generated), and the seconds
    each generation took."""
    generated = work / "generated"
    if None in (args.corpus, args.extra_tag, args.big_tag):
        shutil.rmtree(generated, ignore_errors=True)
    inputs, seconds = {}, {}
    wanted = {
        "corpus": (args.corpus, ()),
        "extra": (args.extra_tag, ("--only-tag", EXTRA_TAG, "--no-indexes")),
        "big_tag": (args.big_tag, ("--only-tag", BIG_TAG, "--packages", str(BIG_TAG_PACKAGES[args.size]))),
    }
    for name, (given, options) in wanted.items():
        if given is None:
            given, seconds[name] = generate(code, generated / name, args.size, *options)
        inputs[name] = given.resolve()
    return inputs, seconds


def generate(code, out, size, *options):
    log(f"generating {out} ({size} {' '.join(options)})")
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, str(code / "benchmarks" / "generate_corpus.py"), str(out), "--size", size, *options],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return out, time.perf_counter() - started


def page_files(folder):
    return sorted(folder.glob("_cache/*/*/specs.md"))


def index_files(folder):
    """The index files of a corpus's mirrors (v2 index.json, v3 blobs)."""
    return sorted([*folder.glob("mirrors/**/build_cache/index.json"), *folder.glob("mirrors/**/blobs/*/*/*")])


def tags_of(folder):
    return sorted({path.parent.parent.name for path in page_files(folder)})


def check_inputs(inputs):
    """The one tag of the extra folder, after checking that the corpus has pages and lacks that tag."""
    corpus, extra = inputs["corpus"], inputs["extra"]
    if not page_files(corpus):
        raise SystemExit(f"{corpus}: expected pages at _cache/<tag>/<package>/specs.md, found none")
    extra_tags = tags_of(extra)
    if len(extra_tags) != 1:
        raise SystemExit(f"{extra}: expected pages of exactly one tag under _cache/, found {extra_tags or 'none'}")
    if extra_tags[0] in tags_of(corpus):
        raise SystemExit(f"{extra}: tag {extra_tags[0]} is in the corpus already; adding it would change nothing")
    listing = inputs["big_tag"] / "cache_spack_io_index.json"
    if listing.exists() and len(json.loads(listing.read_text())) != 1:
        raise SystemExit(f"{listing}: expected the indexes of exactly one tag")
    return extra_tags[0]


def read_corpus(folder):
    """Tags, pages and bytes of a corpus, read in full so that no timed run pays cold disk reads."""
    pages, indexes = page_files(folder), index_files(folder)
    return {
        "path": str(folder),
        "tags": len(tags_of(folder)),
        "pages": len(pages),
        "bytes": sum(read_size(path) for path in pages),
        "index_files": len(indexes),
        "index_bytes": sum(read_size(path) for path in indexes),
    }


def read_size(path):
    size = 0
    with open(path, "rb") as file:
        while chunk := file.read(1 << 24):
            size += len(chunk)
    return size


def root_index_bytes(folder):
    """Bytes of the JSON of the root index of the one tag of folder/cache_spack_io_index.json."""
    listing_path = folder / "cache_spack_io_index.json"
    ((_, entries),) = json.loads(listing_path.read_text()).items()
    root = next(entry for entry in entries if entry["label"] == "root")
    return len(read_index(local_path(root["url"], folder)))


# --- builds ----------------------------------------------------------------------------------------------------


def builder_command(code, paths, db):
    return [sys.executable, str(code / "build_db.py"), "build", *map(str, paths), "-o", str(db), "--quiet"]


def lower_bound_command(code, corpus, db):
    return [sys.executable, str(code / "benchmarks" / "lower_bound.py"), str(corpus), str(db)]


def index_lower_bound_command(code, listing, db):
    return [sys.executable, str(code / "benchmarks" / "lower_bound_indexes.py"), str(listing), str(db)]


def run_measured(command, check=True):
    """Run command; its wall and CPU seconds and the peak RSS of its process tree.

    os.wait4 gives the CPU of this one child and of the children it waited for (the builder's writer
    process). Their peak RSS is sampled from /proc every 20 ms and summed across the tree, since the
    builder and its writer run at the same time; where that is not available, wait4's figure (the
    largest single process) is the floor. Finding the tree means reading every process's stat, so
    that is done every 200 ms only: done every sample, it took a fifth of a core from the run it measured.
    With check=False a failed command gives its exit status and the end of its error output instead of
    stopping the benchmark.
    """
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


def compare_alternating(name, builder, lower_bound, runs):
    """Run the builder and its lower bound in turn, `runs` times each: medians and their ratios."""
    built, bound = [], []
    for number in range(1, runs + 1):
        built.append(run_measured(builder()))
        bound.append(run_measured(lower_bound()))
        log(f"{name} {number}/{runs}: builder {built[-1]['wall_s']:.1f} s, lower bound {bound[-1]['wall_s']:.1f} s")
    built, bound = summarise(built), summarise(bound)
    return {
        "builder": built,
        "lower_bound": bound,
        "ratio_wall": built["wall_s"] / bound["wall_s"],
        "ratio_cpu": built["cpu_s"] / bound["cpu_s"],
    }


def measure_full_builds(code, corpus, db, lower_db, runs):
    def builder():
        db.unlink(missing_ok=True)
        return builder_command(code, [corpus], db)

    return compare_alternating("full build", builder, lambda: lower_bound_command(code, corpus, lower_db), runs)


def file_identity(path):
    stat = path.stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def measure_unchanged_rebuilds(code, corpus, db, runs, full_build_s):
    before = file_identity(db)
    rebuilds = []
    for number in range(1, runs + 1):
        rebuilds.append(run_measured(builder_command(code, [corpus], db)))
        log(f"unchanged rebuild {number}/{runs}: {rebuilds[-1]['wall_s']:.2f} s")
    rebuilds = summarise(rebuilds)
    return {
        **rebuilds,
        "fraction_of_full": rebuilds["wall_s"] / full_build_s,
        "wrote_nothing": file_identity(db) == before,
    }


def measure_add_tag(code, corpus, extra, db, work, runs):
    """Add the extra tag to a copy of db, alternating with a build of that tag alone into a new file.

    The corpus is passed as the same path the full build had, so its pages are recognised as
    unchanged and only the new tag's pages are read.
    """
    added_db, alone_db = work / "add_tag.db", work / "tag_alone.db"
    added, alone = [], []
    for number in range(1, runs + 1):
        shutil.copyfile(db, added_db)
        added.append(run_measured(builder_command(code, [corpus, extra], added_db)))
        alone_db.unlink(missing_ok=True)
        alone.append(run_measured(builder_command(code, [extra], alone_db)))
        log(f"add a tag {number}/{runs}: {added[-1]['wall_s']:.2f} s, that tag alone {alone[-1]['wall_s']:.2f} s")
    added, alone = summarise(added), summarise(alone)
    return {
        "add_tag": added,
        "tag_alone": alone,
        "ratio_wall": added["wall_s"] / alone["wall_s"],
        "counts_add_up": counts_add_up(db_counts(added_db), db_counts(db), db_counts(alone_db)),
    }


def db_counts(db):
    """The row counts the builder recorded in row_counts, of what the report names."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(
            conn.execute(
                "SELECT name, count FROM row_counts WHERE name IN ('binaries', 'packages', 'pages', 'problems', 'specs', 'tags')"
                " ORDER BY name"
            )
        )
    finally:
        conn.close()


def counts_add_up(added, base, alone):
    """Pages and binaries of the grown database are those of the base plus those of the new tag."""
    return all(added[key] == base[key] + alone[key] for key in ("pages", "binaries"))


def database_facts(db):
    size = db.stat().st_size
    counts = db_counts(db)
    return {
        "bytes": size,
        "bytes_per_binary": size / max(counts["binaries"], 1),
        "counts": counts,
        "largest": largest_objects(db),
    }


def largest_objects(db, most=10):
    """[(table or index, bytes)] of the biggest objects in the file, from SQLite's dbstat (empty where
    this SQLite lacks it)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT ?", (most,)
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


# --- builds from indexes -----------------------------------------------------------------------------------------


def builder_reads_indexes(code):
    """Whether the builder's help mentions indexes: tells a builder without an index reader (its failure
    on an index file is expected) from one whose reader failed (a failure of the benchmark)."""
    shown = subprocess.run(
        [sys.executable, str(code / "build_db.py"), "build", "--help"], capture_output=True, text=True, check=False
    )
    return "index" in shown.stdout.lower()


def not_measured(reason, said=None):
    return {"measured": False, "reason": reason, "builder_said": said}


def measure_index_builds(code, inputs, work, runs, page_binaries):
    """The corpus built from its indexes against the index lower bound, and the peak RSS of the big tag."""
    listing = inputs["corpus"] / "cache_spack_io_index.json"
    big_listing = inputs["big_tag"] / "cache_spack_io_index.json"
    if not listing.exists() or not big_listing.exists():
        return not_measured(f"no index of mirrors ({listing if not listing.exists() else big_listing} is missing)")
    db, lower_db = work / "from_indexes.db", work / "lower_bound_indexes.db"
    db.unlink(missing_ok=True)
    probe = run_measured(builder_command(code, [listing], db), check=False)
    if "returncode" in probe:
        said = probe["error"].splitlines()[0] if probe["error"] else f"exit status {probe['returncode']}"
        if builder_reads_indexes(code):
            raise SystemExit(f"the build from {listing} failed ({probe['returncode']}):\n{probe['error']}")
        log(f"builds from indexes: not measured, {NO_INDEX_READER} ({said})")
        return not_measured(NO_INDEX_READER, said)

    def builder():
        db.unlink(missing_ok=True)
        return builder_command(code, [listing], db)

    results = compare_alternating(
        "build from indexes", builder, lambda: index_lower_bound_command(code, listing, lower_db), runs
    )
    results |= {"measured": True, "binaries": db_counts(db)["binaries"], "page_binaries": page_binaries}
    big_db, big_runs = work / "big_tag.db", []
    for number in range(1, runs + 1):
        big_db.unlink(missing_ok=True)
        big_runs.append(run_measured(builder_command(code, [big_listing], big_db)))
        log(f"busy tag from its indexes {number}/{runs}: peak RSS {big_runs[-1]['peak_rss_kib'] / 1024:.0f} MiB")
    results["big_tag"] = summarise(big_runs) | {
        "root_index_bytes": root_index_bytes(inputs["big_tag"]),
        "binaries": db_counts(big_db)["binaries"],
    }
    return results


# --- serving -----------------------------------------------------------------------------------------------------

BINARY_OF_PAGE = """
SELECT versions.version, specs.hash, compilers.label, oss.name, targets.name, variant_sets.variants, stack_sets.stacks
FROM page_specs
JOIN specs ON specs.id = page_specs.spec_id
JOIN configurations ON configurations.id = specs.configuration_id
JOIN versions ON versions.id = configurations.version_id
JOIN compilers ON compilers.id = configurations.compiler_id
JOIN oss ON oss.id = configurations.os_id
JOIN targets ON targets.id = configurations.target_id
JOIN variant_sets ON variant_sets.id = configurations.variant_set_id
JOIN listings ON listings.id = page_specs.listing_id
JOIN stack_sets ON stack_sets.id = listings.stack_set_id
WHERE page_specs.page_id = ?
ORDER BY versions.version_rank DESC, page_specs.position
LIMIT 1
"""

BIGGEST_PAGE = """
SELECT packages.name, pages.id
FROM pages
JOIN packages ON packages.id = pages.package_id
JOIN tags ON tags.id = pages.tag_id
WHERE tags.name = ?
ORDER BY pages.num_specs DESC, packages.name
LIMIT 1
"""


def realistic_parameters(db):
    """What a user would fill in: the newest tag, its package with the most binaries, and that package's
    newest binary (its version, os, target as the host, compiler, a variant, a stack, a hash prefix)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tags = [name for (name,) in conn.execute(
            "SELECT name FROM tags WHERE EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id) ORDER BY sort_order"
        )]  # fmt: skip
        package, page_id = conn.execute(BIGGEST_PAGE, (tags[0],)).fetchone()
        version, spec_hash, compiler, os_name, target, variants, stacks = conn.execute(
            BINARY_OF_PAGE, (page_id,)
        ).fetchone()
    finally:
        conn.close()
    return {
        "package": package,
        "version": version,
        "os": os_name,
        "target": target,
        "host": target,
        "compiler": compiler,
        "variant": preferred_variant(json.loads(variants)),
        "stack": next((stack for stack in json.loads(stacks) if stack != "root"), "root"),
        "tag": tags[0],
        "to_tag": tags[0],
        "from_tag": tags[1] if len(tags) > 1 else tags[0],
        "hash": spec_hash[:7],  # as people type it: spack install /abc1234
        "q": f"{package} {os_name}",
        "severity": "warning",
    }


def preferred_variant(variants):
    """A '+feature' variant when the binary has one: what people filter on most."""
    return next((v for v in variants if v.startswith("+")), variants[0] if variants else "")


def url(path, params=None):
    return f"{path}?{urllib.parse.urlencode(params)}" if params else path


class Client:
    """GET over one kept-alive HTTP connection to the served Datasette (opened again if it drops)."""

    def __init__(self, port):
        self.port = port
        self.connection = None

    def get(self, path):
        """(status, body, milliseconds from sending the request to the end of the body)."""
        for attempt in range(2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT_S)
            try:
                started = time.perf_counter()
                self.connection.request("GET", path)
                response = self.connection.getresponse()
                body = response.read().decode(errors="replace")
                return response.status, body, (time.perf_counter() - started) * 1000
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


def serve_command(code, port):
    """SERVE_COMMAND with this interpreter's datasette, the code's metadata.yml, and where to listen."""
    executable = Path(sys.executable).parent / "datasette"
    replaced = {"datasette": str(executable), "metadata.yml": str(code / "metadata.yml")}
    return [replaced.get(part, part) for part in SERVE_COMMAND] + ["--host", "127.0.0.1", "--port", str(port)]


@contextlib.contextmanager
def served(db, code, work):
    """Datasette serving db (which must be called cache.db) as the README does, in a subprocess; a Client."""
    port = free_port()
    log_path = work / "datasette.log"
    environment = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, (str(code), os.environ.get("PYTHONPATH"))))}
    with open(log_path, "wb") as output:
        process = subprocess.Popen(
            serve_command(code, port), cwd=db.parent, env=environment, stdout=output, stderr=subprocess.STDOUT
        )
        client = Client(port)
        try:
            wait_until_serving(process, client, log_path)
            yield client
        finally:
            client.close()
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_until_serving(process, client, log_path):
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"datasette exited ({process.returncode}) before serving:\n{log_path.read_text()[-3000:]}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            if client.get("/-/versions.json")[0] == 200:
                return
        time.sleep(0.2)
    raise SystemExit(f"datasette did not answer within {STARTUP_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}")


def nearest_rank_p95(samples):
    """The 95th percentile by nearest rank: of 20 samples, the second slowest."""
    ordered = sorted(samples)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


ROW_COUNT = re.compile(r"<title>[^<]*?: ([\d,]+) rows?\b")
FACETS_TIMED_OUT = re.compile(r'class="facets-timed-out">These facets timed out: ([^<]*)<')


def time_url(client, path, requests):
    """One warm-up GET, then `requests` timed ones: statuses, median and p95, and what the pages showed:
    the row count in the title of a table page (None when Datasette's count ran out of time) and the
    facets it names as timed out."""
    answers, samples = [client.get(path)], []
    for _ in range(requests):
        answers.append(client.get(path))
        samples.append(answers[-1][2])
    timing = {
        "url": path,
        "statuses": sorted({status for status, _, _ in answers}),
        "median_ms": statistics.median(samples),
        "p95_ms": nearest_rank_p95(samples),
        "samples_ms": samples,
    }
    failed = [body for status, body, _ in answers if status != 200]
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


def top_facet_values(client, parameters):
    """The value with the most binaries of each facet the binaries page shows (not root, which every
    binary has): what a click on the first value of each facet filters by. Falls back to the realistic
    parameters for a facet that the answer lacks."""
    status, body, _ = client.get("/cache/binaries.json?_size=1")
    facets = json.loads(body)["facet_results"] if status == 200 else {}
    top = {}
    for column, fallback in (("tag", "tag"), ("os", "os"), ("target", "target"), ("compiler", "compiler")):
        results = facets.get(column, {}).get("results", [])
        top[column] = results[0]["value"] if results else parameters[fallback]
    stacks = [r["value"] for r in facets.get("stacks", {}).get("results", []) if r["value"] != "root"]
    top["stacks__arraycontains"] = stacks[0] if stacks else parameters["stack"]
    return top


def facet_clicks(top, parameters):
    """[(name, url)] of the pages the facet clicks and a search lead to."""
    clicks = [(column.split("__")[0], url("/cache/binaries", {column: value})) for column, value in top.items()]
    clicks.append(("package", url("/cache/binaries", {"package": parameters["package"]})))
    clicks.append(("search", url("/cache/binaries", {"_search": parameters["q"]})))
    return clicks


def measure_canned_queries(client, queries, parameters, requests):
    timings = []
    for name, query in queries.items():
        names = query.get("params", [])
        realistic = {param: parameters[param] for param in names if param in parameters}
        parameter_sets = [("empty", {}), ("realistic", realistic)] if names else [("empty", {})]
        for label, params in parameter_sets:
            timing = time_url(client, url(f"/cache/{name}", params), requests)
            del timing["row_count"], timing["counted"], timing["facets_timed_out"]
            unset = [param for param in names if param not in params]
            timings.append({"query": name, "parameters": label, "unset": unset, **timing})
            log(f"{name} ({label}): p95 {timing['p95_ms']:.1f} ms, status {timing['statuses']}")
    return timings


def measure_serving(db, code, work, parameters, requests):
    metadata = yaml.safe_load((code / "metadata.yml").read_text())
    with served(db, code, work) as client:
        versions = json.loads(client.get("/-/versions.json")[1])
        binaries_page = time_url(client, "/cache/binaries", requests)
        log(f"/cache/binaries: p95 {binaries_page['p95_ms']:.0f} ms, row count {binaries_page['row_count']}")
        clicks = []
        for name, path in facet_clicks(top_facet_values(client, parameters), parameters):
            clicks.append({"name": name, **time_url(client, path, requests)})
            log(f"{path}: p95 {clicks[-1]['p95_ms']:.0f} ms, row count {clicks[-1]['row_count']}")
        canned = measure_canned_queries(client, metadata["databases"]["cache"]["queries"], parameters, requests)
    return {
        "command": " ".join(SERVE_COMMAND),
        "requests": requests,
        "parameters": parameters,
        "datasette": versions["datasette"]["version"],
        "sqlite": versions["sqlite"]["version"],
        "binaries_page": binaries_page,
        "facet_clicks": clicks,
        "canned_queries": canned,
    }


# --- targets and report ----------------------------------------------------------------------------------------


def target(name, value, limit, met):
    """met: True, False, or None when not measured."""
    return {"name": name, "value": value, "limit": limit, "met": met if met is None else bool(met)}


def page_target(name, timing, limit_ms):
    """A served page's target: answered 200 within the limit at p95, with its exact row count."""
    count = "no row count" if timing["row_count"] is None else f"{timing['row_count']:,} rows"
    status = "" if timing["statuses"] == [200] else f", status {', '.join(map(str, timing['statuses']))}"
    met = timing["p95_ms"] <= limit_ms and timing["statuses"] == [200] and timing["row_count"] is not None
    return target(name, f"{timing['p95_ms']:.0f} ms, {count}{status}", f"<= {limit_ms} ms with its row count", met)


def evaluate_targets(results):
    full, unchanged, added = results["full_build"], results["unchanged_rebuild"], results["add_tag"]
    database, serving, indexes = results["database"], results["serving"], results["index_builds"]
    canned = serving["canned_queries"]
    slowest = max(canned, key=lambda timing: timing["p95_ms"])
    not_ok = [f"{timing['query']} ({timing['parameters']})" for timing in canned if timing["statuses"] != [200]]
    targets = [
        target("Full build from pages / lower bound (orjson), wall", f"{full['ratio_wall']:.2f}x",
               f"<= {MAX_BUILD_RATIO}x", full["ratio_wall"] <= MAX_BUILD_RATIO),
        target("Peak RSS of a full build (builder and writer)", f"{full['builder']['peak_rss_mib']:.0f} MiB",
               f"<= {MAX_PEAK_RSS_MIB} MiB", full["builder"]["peak_rss_mib"] <= MAX_PEAK_RSS_MIB),
        target("Unchanged rebuild / full build", f"{unchanged['fraction_of_full']:.1%}",
               f"<= {MAX_UNCHANGED_FRACTION:.0%}", unchanged["fraction_of_full"] <= MAX_UNCHANGED_FRACTION),
        target("Unchanged rebuild writes nothing", "yes" if unchanged["wrote_nothing"] else "no", "yes",
               unchanged["wrote_nothing"]),
        target("Add a tag / that tag alone", f"{added['ratio_wall']:.2f}x", f"<= {MAX_ADD_TAG_RATIO}x",
               added["ratio_wall"] <= MAX_ADD_TAG_RATIO),
        target("Size per binary (cache.db bytes / binaries)", f"{database['bytes_per_binary']:.0f} bytes",
               f"<= {MAX_BYTES_PER_BINARY} bytes", database["bytes_per_binary"] <= MAX_BYTES_PER_BINARY),
        page_target("`/cache/binaries`, p95", serving["binaries_page"], MAX_BINARIES_PAGE_P95_MS),
        *(page_target(f"Click `{shown_url(click['url']).removeprefix('/cache/binaries')}`, p95", click,
                      MAX_FACET_CLICK_P95_MS) for click in serving["facet_clicks"]),
        target("Canned queries as HTML, slowest p95",
               f"{slowest['p95_ms']:.0f} ms ({slowest['query']}, {slowest['parameters']})"
               + (f"; not 200: {', '.join(not_ok)}" if not_ok else ""),
               f"<= {MAX_CANNED_P95_MS} ms, all 200", slowest["p95_ms"] <= MAX_CANNED_P95_MS and not not_ok),
    ]  # fmt: skip
    return targets + index_targets(indexes)


def shown_url(path):
    """A URL as a browser's address bar shows it (gcc@13.2.0, not gcc%4013.2.0)."""
    return urllib.parse.unquote_plus(path)


def index_targets(indexes):
    names = (
        "Full build from indexes / lower bound (orjson), wall",
        "Peak RSS building one busy tag from its indexes",
        "Binaries from indexes = binaries from pages",
    )
    if not indexes["measured"]:
        return [target(name, f"not measured: {indexes['reason']}", "", None) for name in names]
    big = indexes["big_tag"]
    return [
        target(names[0], f"{indexes['ratio_wall']:.2f}x", f"<= {MAX_INDEX_BUILD_RATIO}x",
               indexes["ratio_wall"] <= MAX_INDEX_BUILD_RATIO),
        target(names[1], f"{big['peak_rss_mib']:.0f} MiB (root index {big['root_index_bytes'] / 1e6:.0f} MB)",
               f"<= {MAX_INDEX_PEAK_RSS_MIB} MiB (root index about {BIG_INDEX_MB} MB)",
               big["peak_rss_mib"] <= MAX_INDEX_PEAK_RSS_MIB),
        target(names[2], f"{indexes['binaries']:,} / {indexes['page_binaries']:,}", "equal",
               indexes["binaries"] == indexes["page_binaries"]),
    ]  # fmt: skip


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def verdict(met):
    return {True: "met", False: "**missed**", None: "not measured"}[met]


def status_text(statuses):
    text = ", ".join(map(str, statuses))
    return text if statuses == [200] else f"**{text}**"


def run_row(name, summary):
    runs = ", ".join(f"{run['wall_s']:.2f}" for run in summary["runs"])
    return [name, f"{summary['wall_s']:.2f} s", f"{summary['cpu_s']:.2f} s", f"{summary['peak_rss_mib']:.0f} MiB", runs]


RUN_HEADER = ["", "median wall", "median CPU", "peak RSS (max)", "wall of each run (s)"]


def render_targets(results):
    rows = [[t["name"], t["value"], t["limit"], verdict(t["met"])] for t in results["targets"]]
    return ["## Targets", "", *table(["target", "measured", "limit", ""], rows)]


def render_machine(results):
    m, serving = results["machine"], results["serving"]
    rows = [
        ["CPU", m["cpu"]], ["cores", m["cores"]], ["RAM", f"{m['ram_gib']:.1f} GiB"], ["OS", m["os"]],
        ["Python", m["python"]], ["SQLite (builder)", m["sqlite"]], ["SQLite (served)", serving["sqlite"]],
        ["Datasette", serving["datasette"]],
        ["load average at start / end", f"{m['load_start']} / {m['load_end']}"],
        ["code", results["code"]], ["date", results["date"]], ["benchmark took", f"{results['seconds']:.0f} s"],
    ]  # fmt: skip
    return ["## Machine", "", *table(["", ""], rows)]


def render_corpus(results):
    rows = []
    for name, key in (("corpus", "corpus"), ("extra tag", "extra"), ("busy tag", "big_tag")):
        c = results[key]
        generated = results["generated_s"].get(key)
        rows.append([
            name, c["path"], c["tags"], c["pages"], f"{c['bytes'] / 1e6:.1f} MB", c["index_files"],
            f"{c['index_bytes'] / 1e6:.1f} MB", "given" if generated is None else f"{generated:.0f} s",
        ])  # fmt: skip
    header = ["", "path", "tags", "pages", "page bytes", "index files", "index bytes (stored)", "generated in"]
    return ["## Corpus", "", *table(header, rows)]


def render_full_build(results):
    full = results["full_build"]
    return [
        "## Full build from pages",
        "",
        (
            f"{results['runs']} runs each, builder and lower bound (benchmarks/lower_bound.py: orjson, flat "
            "executemany in one transaction, no indexes) alternating, one subprocess per run (wall time "
            "includes Python start-up). Peak RSS is the sum over the subprocess and its children (the "
            "builder's writer process), sampled every 20 ms."
        ),
        "",
        *table(RUN_HEADER, [run_row("builder", full["builder"]), run_row("lower bound", full["lower_bound"])]),
        "",
        f"Builder / lower bound: **{full['ratio_wall']:.2f}x** wall, {full['ratio_cpu']:.2f}x CPU.",
    ]


def render_database(results):
    db = results["database"]
    counts = ", ".join(f"{key} {value:,}" for key, value in db["counts"].items())
    return [
        "## Database size",
        "",
        (
            f"{db['bytes'] / 1e6:.1f} MB for {db['counts']['binaries']:,} binaries: "
            f"**{db['bytes_per_binary']:.0f} bytes per binary**. Rows: {counts}."
        ),
        "",
        "The largest tables and indexes (SQLite's dbstat):",
        "",
        *table(
            ["", "MB", "bytes per binary"],
            [
                [f"`{name}`", f"{size / 1e6:.1f}", f"{size / max(db['counts']['binaries'], 1):.1f}"]
                for name, size in db["largest"]
            ],
        ),
    ]


def render_incremental(results):
    unchanged, added = results["unchanged_rebuild"], results["add_tag"]
    return [
        "## Incremental builds",
        "",
        *table(
            RUN_HEADER,
            [
                run_row("unchanged rebuild", unchanged),
                run_row(f"add tag {results['extra_tag']} to a copy", added["add_tag"]),
                run_row("that tag alone, new file", added["tag_alone"]),
            ],
        ),
        "",
        (
            f"Unchanged rebuild: **{unchanged['fraction_of_full']:.1%}** of the full build; "
            f"database file untouched: {'yes' if unchanged['wrote_nothing'] else '**no**'}."
        ),
        (
            f"Adding a tag costs **{added['ratio_wall']:.2f}x** building that tag alone; "
            f"pages and binaries of the result = base + tag alone: {'yes' if added['counts_add_up'] else '**no**'}."
        ),
    ]


def render_index_builds(results):
    indexes = results["index_builds"]
    lines = ["## Builds from indexes", ""]
    if not indexes["measured"]:
        said = f" The builder answered: `{indexes['builder_said']}`." if indexes["builder_said"] else ""
        return lines + [f"Not measured: {indexes['reason']}.{said}"]
    big = indexes["big_tag"]
    return lines + [
        (
            f"The corpus built from its cache_spack_io_index.json, {results['runs']} runs each, alternating with "
            "benchmarks/lower_bound_indexes.py (checksums, orjson, flat executemany of binaries, labels and "
            f"edges in one transaction). The busy tag: {BIG_TAG} with {BIG_TAG_PACKAGES[results['size']]} "
            f"packages, {big['binaries']:,} binaries, root index {big['root_index_bytes'] / 1e6:.0f} MB of JSON."
        ),
        "",
        *table(
            RUN_HEADER,
            [
                run_row("builder, corpus", indexes["builder"]),
                run_row("lower bound, corpus", indexes["lower_bound"]),
                run_row("builder, busy tag", big),
            ],
        ),
        "",
        f"Builder / lower bound: **{indexes['ratio_wall']:.2f}x** wall, {indexes['ratio_cpu']:.2f}x CPU. "
        f"Binaries from indexes {indexes['binaries']:,}, from pages {indexes['page_binaries']:,}.",
    ]


def latency_cells(timing):
    return [status_text(timing["statuses"]), f"{timing['median_ms']:.1f}", f"{timing['p95_ms']:.1f}"]


def count_cell(timing):
    return "timed out" if timing["row_count"] is None else f"{timing['row_count']:,}"


def facets_cell(timing):
    return ", ".join(f"{facet} ({n})" for facet, n in timing["facets_timed_out"].items()) or "none"


def render_served_intro(results):
    serving = results["serving"]
    return [
        "## Served pages",
        "",
        (
            f"`{serving['command']}` (with `--host 127.0.0.1 --port N`) in a subprocess, requests over one "
            f"kept-alive HTTP connection, HTML pages, one warm-up then {serving['requests']} timed requests "
            "each, from the request to the end of the body. A row count is the one the page's title shows; "
            '"timed out" means Datasette gave none (its count ran out of time). Facets timed out are named '
            "with the number of answers they were missing from."
        ),
    ]


def render_binaries_page(results):
    t = results["serving"]["binaries_page"]
    met = verdict(t["p95_ms"] <= MAX_BINARIES_PAGE_P95_MS and t["statuses"] == [200] and t["row_count"] is not None)
    header = ["url", "status", "median ms", "p95 ms", "row count", "facets timed out", "target"]
    return [
        "### The binaries page",
        "",
        *table(header, [[f"`{t['url']}`", *latency_cells(t), count_cell(t), facets_cell(t), met]]),
    ]


def render_facet_clicks(results):
    rows = []
    for t in results["serving"]["facet_clicks"]:
        met = t["p95_ms"] <= MAX_FACET_CLICK_P95_MS and t["statuses"] == [200] and t["row_count"] is not None
        rows.append(
            [t["name"], f"`{shown_url(t['url'])}`", *latency_cells(t), count_cell(t), facets_cell(t), verdict(met)]
        )
    intro = (
        "The first value (most binaries, root left out) of each facet the page shows, the package with the "
        "most binaries in the newest tag, and a search."
    )
    header = ["", "url", "status", "median ms", "p95 ms", "row count", "facets timed out", "target"]
    return ["### Facet clicks and search", "", intro, "", *table(header, rows)]


def render_canned_queries(results):
    serving = results["serving"]
    parameters = ", ".join(f"{key}={value}" for key, value in serving["parameters"].items())
    rows = []
    for timing in serving["canned_queries"]:
        unset = (
            f" ({', '.join(timing['unset'])} empty)" if timing["parameters"] == "realistic" and timing["unset"] else ""
        )
        met = verdict(timing["p95_ms"] <= MAX_CANNED_P95_MS and timing["statuses"] == [200])
        rows.append([timing["query"], timing["parameters"] + unset, *latency_cells(timing), met])
    return [
        "### Canned queries",
        "",
        f"`/cache/<query>` as HTML. Realistic parameters (each query takes those it has): {parameters}.",
        "",
        *table(["query", "parameters", "status", "median ms", "p95 ms", f"p95 <= {MAX_CANNED_P95_MS} ms"], rows),
    ]


def render_report(results):
    parts = [
        render_targets, render_machine, render_corpus, render_full_build, render_database, render_incremental,
        render_index_builds, render_served_intro, render_binaries_page, render_facet_clicks, render_canned_queries,
    ]  # fmt: skip
    lines = [f"# Benchmark: {results['size']} corpus", ""]
    for render in parts:
        lines += render(results) + [""]
    return "\n".join(lines)


# --- machine and main ------------------------------------------------------------------------------------------


def cpu_model():
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    return next(
        (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor()
    )


def machine():
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": ram / 2**30,
        "os": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "load_start": load_average(),
    }


def load_average():
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def git(*arguments):
    return subprocess.run(["git", *arguments], check=False, cwd=ROOT, capture_output=True, text=True).stdout.strip()


def code_version():
    """The commit, and when tracked files differ from it a digest of the difference."""
    described = git("describe", "--always", "--dirty") or "unknown"
    if described.endswith("-dirty"):
        described += "-" + hashlib.blake2b(git("diff", "HEAD").encode(), digest_size=4).hexdigest()
    return described


@contextlib.contextmanager
def work_folder(given):
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="spack-cache-db-bench-") as temporary:
        yield Path(temporary)


def run_benchmark(args, work):
    started = time.monotonic()
    code, version = snapshot_code(work)
    results = {"size": args.size, "runs": args.runs, "date": datetime.now(UTC).isoformat(timespec="seconds")}
    results |= {"machine": machine(), "code": version}
    inputs, results["generated_s"] = prepare_inputs(args, code, work)
    results["extra_tag"] = check_inputs(inputs)
    results |= {name: read_corpus(folder) for name, folder in inputs.items()}
    db = work / "cache.db"  # Datasette names the database after the file; metadata.yml describes "cache"
    corpus = inputs["corpus"]
    full_build = results["full_build"] = measure_full_builds(code, corpus, db, work / "lower_bound.db", args.runs)
    results["database"] = database_facts(db)
    results["unchanged_rebuild"] = measure_unchanged_rebuilds(
        code, corpus, db, args.runs, full_build["builder"]["wall_s"]
    )
    results["add_tag"] = measure_add_tag(code, corpus, inputs["extra"], db, work, args.runs)
    results["index_builds"] = measure_index_builds(
        code, inputs, work, args.runs, results["database"]["counts"]["binaries"]
    )
    results["serving"] = measure_serving(db, code, work, realistic_parameters(db), args.requests)
    results["machine"]["load_end"] = load_average()
    results["seconds"] = time.monotonic() - started
    results["targets"] = evaluate_targets(results)
    return results


def write_results(results, report, folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{results['size']}.md").write_text(report)
    (folder / f"{results['size']}.json").write_text(json.dumps(results, indent=2) + "\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="corpus size to generate, and the results' name")
    parser.add_argument(
        "--corpus", type=Path, help="existing corpus (folder holding _cache/) instead of a generated one"
    )
    parser.add_argument("--extra-tag", type=Path, help="folder holding _cache/<tag>/ of one tag the corpus lacks")
    parser.add_argument("--big-tag", type=Path, help="folder holding the cache_spack_io_index.json of one busy tag")
    parser.add_argument("--runs", type=int, default=3, help="runs of each build (default 3)")
    parser.add_argument(
        "--requests", type=int, default=20, help="timed requests per URL, after one warm-up (default 20)"
    )
    parser.add_argument(
        "--work", type=Path, help="folder for the databases (default: a temporary folder, removed after)"
    )
    parser.add_argument(
        "--results", type=Path, default=BENCHMARKS / "results", help="folder for <size>.md and <size>.json"
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.runs < 1 or args.requests < 1:
        parser.error("--runs and --requests must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    with work_folder(args.work) as work:
        results = run_benchmark(args, work)
    report = render_report(results)
    print(report)
    write_results(results, report, args.results)


if __name__ == "__main__":
    sys.exit(main())
