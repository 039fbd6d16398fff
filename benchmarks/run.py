"""Measure the builder and the served database against the targets of the "Scale" issue.

    python benchmarks/run.py --size small|full [--corpus PATH] [--extra-tag PATH] [--runs N] [--requests N]
                             [--work DIR] [--results DIR]

Builds the corpus with the builder and with benchmarks/lower_bound.py, alternating, one subprocess per
run; rebuilds it unchanged; adds one more tag to a copy of it and builds that tag alone; then serves
the database through Datasette in this process and times every canned query, a search and the
binaries page with its facets (whole, then filtered by a tag, an os or both). Prints a Markdown report and writes it, with every raw number as JSON,
to benchmarks/results/<size>.md and <size>.json. Everything runs from a copy of the code taken at the
start (WORK/code), so edits made meanwhile do not leak into the numbers.

Without --corpus or --extra-tag, generate_corpus.py writes them into WORK/generated (replaced on each
run). --extra-tag is a folder holding _cache/<one tag>/, as `generate_corpus.py --only-tag` writes.
"""

import argparse
import asyncio
import collections
import contextlib
import hashlib
import itertools
import json
import math
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path

import datasette
import yaml
from datasette.app import Datasette

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
# What a run uses from the repository: copied once into WORK/code, see snapshot_code.
CODE_UNDER_TEST = (
    "build_db.py",
    "spack_cache_db",
    "metadata.yml",
    "benchmarks/lower_bound.py",
    "benchmarks/generate_corpus.py",
    "benchmarks/build_cache_indexes.py",
)
EXTRA_TAG = "develop-2025-07-20"  # newer than every tag generate_corpus.py writes by default
SERVE_SETTINGS = {"suggest_facets": False}  # as docs/frontend.md serves the database

MAX_BUILD_RATIO = 2.5
MAX_PEAK_RSS_MIB = 600
MAX_DB_FRACTION = 0.30
MAX_UNCHANGED_FRACTION = 0.05
MAX_ADD_TAG_RATIO = 2.0  # the issue says "about what that tag alone costs"; we read "about" as within 2x
MAX_CANNED_P95_MS = 100
MAX_SEARCH_P95_MS = 50
MAX_BINARIES_PAGE_P95_MS = 500


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
    """(corpus, extra tag folder): the ones given, or generated into WORK/generated."""
    generated = work / "generated"
    if args.corpus is None or args.extra_tag is None:
        shutil.rmtree(generated, ignore_errors=True)
    corpus = args.corpus or generate(code, generated / "corpus", args.size)
    extra = args.extra_tag or generate(code, generated / "extra", args.size, "--only-tag", EXTRA_TAG)
    return corpus.resolve(), extra.resolve()


def generate(code, out, size, *options):
    log(f"generating {out} ({size})")
    subprocess.run(
        [sys.executable, str(code / "benchmarks" / "generate_corpus.py"), str(out), "--size", size, *options],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return out


def page_files(folder):
    return sorted(folder.glob("_cache/*/*/specs.md"))


def tags_of(folder):
    return sorted({path.parent.parent.name for path in page_files(folder)})


def check_inputs(corpus, extra):
    """The one tag of the extra folder, after checking that the corpus has pages and lacks that tag."""
    if not page_files(corpus):
        raise SystemExit(f"{corpus}: expected pages at _cache/<tag>/<package>/specs.md, found none")
    extra_tags = tags_of(extra)
    if len(extra_tags) != 1:
        raise SystemExit(f"{extra}: expected pages of exactly one tag under _cache/, found {extra_tags or 'none'}")
    if extra_tags[0] in tags_of(corpus):
        raise SystemExit(f"{extra}: tag {extra_tags[0]} is in the corpus already; adding it would change nothing")
    return extra_tags[0]


def read_corpus(folder):
    """Tags, pages and bytes of a corpus, read in full so that no timed run pays cold disk reads."""
    pages = page_files(folder)
    size = sum(len(path.read_bytes()) for path in pages)
    return {"path": str(folder), "tags": len(tags_of(folder)), "pages": len(pages), "bytes": size}


# --- builds ----------------------------------------------------------------------------------------------------


def builder_command(code, paths, db):
    return [sys.executable, str(code / "build_db.py"), "build", *map(str, paths), "-o", str(db), "--quiet"]


def lower_bound_command(code, corpus, db):
    return [sys.executable, str(code / "benchmarks" / "lower_bound.py"), str(corpus), str(db)]


def run_measured(command):
    """Run command; its wall and CPU seconds and the peak RSS of its process tree.

    os.wait4 gives the CPU of this one child and of the children it waited for (the builder's writer
    process). Their peak RSS is sampled from /proc every 20 ms and summed across the tree, since the
    builder and its writer run at the same time; where that is not available, wait4's figure (the
    largest single process) is the floor. Finding the tree means reading every process's stat, so
    that is done every 200 ms only: done every sample, it took a fifth of a core from the run it measured.
    """
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
        peak_kib, tree = 0, {process.pid}
        for sample in itertools.count():
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if sample % 10 == 0:
                tree = process_tree(process.pid)
            peak_kib = max(peak_kib, rss_kib(tree))
            time.sleep(0.02)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{errors.read().decode()}")
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


def measure_full_builds(code, corpus, db, lower_db, runs):
    builder, lower = [], []
    for number in range(1, runs + 1):
        db.unlink(missing_ok=True)
        builder.append(run_measured(builder_command(code, [corpus], db)))
        lower.append(run_measured(lower_bound_command(code, corpus, lower_db)))
        log(
            f"full build {number}/{runs}: builder {builder[-1]['wall_s']:.1f} s, lower bound {lower[-1]['wall_s']:.1f} s"
        )
    builder, lower = summarise(builder), summarise(lower)
    return {
        "builder": builder,
        "lower_bound": lower,
        "ratio_wall": builder["wall_s"] / lower["wall_s"],
        "ratio_cpu": builder["cpu_s"] / lower["cpu_s"],
    }


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


def database_facts(db, corpus_bytes):
    size = db.stat().st_size
    return {
        "bytes": size,
        "fraction_of_corpus": size / corpus_bytes,
        "counts": db_counts(db),
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


# --- serving ---------------------------------------------------------------------------------------------------

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


def nearest_rank_p95(samples):
    """The 95th percentile by nearest rank: of 20 samples, the second slowest."""
    ordered = sorted(samples)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


async def time_url(ds, path, requests, facets=()):
    """One warm-up GET, then `requests` timed ones: statuses, median and p95, and what the answers said."""
    responses, samples = [await ds.client.get(path)], []
    for _ in range(requests):
        started = time.perf_counter()
        responses.append(await ds.client.get(path))
        samples.append((time.perf_counter() - started) * 1000)
    timing = {
        "url": path,
        "statuses": sorted({response.status_code for response in responses}),
        "median_ms": statistics.median(samples),
        "p95_ms": nearest_rank_p95(samples),
        "samples_ms": samples,
    }
    answered = [response for response in responses if response.status_code == 200]
    failed = [response for response in responses if response.status_code != 200]
    if failed:
        timing["error"] = error_message(failed[0])
    if answered and path.split("?")[0].endswith(".json"):
        last = answered[-1].json()
        timing["rows"] = len(last["rows"])
        timing["row_count"] = last.get("filtered_table_rows_count")  # None: Datasette's count timed out
    if facets:
        timing["facets_timed_out"] = facet_time_outs(answered, facets)
        timing["answered"] = len(answered)
    return timing


def error_message(response):
    if "json" in response.headers.get("content-type", ""):
        return str(response.json().get("error"))[:300]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.text)).strip()[:300]


def facet_time_outs(responses, facets):
    """{facet: in how many of the responses it timed out}, for the facets that ever did.

    Datasette 0.65 leaves a facet that timed out out of the JSON's facet_results and names it in the
    HTML under "These facets timed out"; its JSON has no facets_timed_out key.
    """
    counts = collections.Counter()
    for response in responses:
        if "json" in response.headers.get("content-type", ""):
            counts.update(facet for facet in facets if facet not in response.json()["facet_results"])
        else:
            named = re.search(r'class="facets-timed-out">These facets timed out: ([^<]*)<', response.text)
            counts.update(named.group(1).split(", ") if named else [])
    return dict(counts)


def configured_facets(metadata, table_name):
    """Column names of the facets metadata.yml configures for a table ({"array": "stacks"} is stacks)."""
    facets = metadata["databases"]["cache"]["tables"][table_name].get("facets", [])
    return [facet if isinstance(facet, str) else next(iter(facet.values())) for facet in facets]


async def measure_canned_queries(ds, queries, parameters, requests):
    timings = []
    for name, query in queries.items():
        names = query.get("params", [])
        realistic = {param: parameters[param] for param in names if param in parameters}
        parameter_sets = [("empty", {}), ("realistic", realistic)] if names else [("empty", {})]
        for label, params in parameter_sets:
            timing = await time_url(ds, url(f"/cache/{name}.json", params), requests)
            unset = [param for param in names if param not in params]
            timings.append({"query": name, "parameters": label, "unset": unset, **timing})
            log(f"{name} ({label}): p95 {timing['p95_ms']:.1f} ms, status {timing['statuses']}")
    return timings


async def measure_search(ds, parameters, requests):
    search = {"_search": parameters["q"]}
    canned = {"q": parameters["q"], "tag": parameters["tag"]}
    return [
        {"name": "binaries table search", **await time_url(ds, url("/cache/binaries.json", search), requests)},
        {"name": "search_specs canned query", **await time_url(ds, url("/cache/search_specs.json", canned), requests)},
    ]


async def measure_binaries_page(ds, facets, requests):
    return [
        {"name": "HTML", **await time_url(ds, "/cache/binaries", requests, facets)},
        {"name": "JSON", **await time_url(ds, "/cache/binaries.json", requests, facets)},
    ]


async def measure_filtered_pages(ds, facets, parameters, requests):
    """The pages a click on a facet of the whole view leads to (no target: the issue sets none)."""
    pages = [
        ("one tag", {"tag": parameters["tag"]}),
        ("one tag and os", {"tag": parameters["tag"], "os": parameters["os"]}),
        ("one os", {"os": parameters["os"]}),
        ("one compiler", {"compiler": parameters["compiler"]}),
        ("one target", {"target": parameters["target"]}),
        ("one stack", {"stacks__arraycontains": parameters["stack"]}),
    ]
    return [
        {"name": name, **await time_url(ds, url("/cache/binaries.json", filters), requests, facets)}
        for name, filters in pages
    ]


async def measure_serving(db, metadata, parameters, requests):
    # Only immutables=: a path given in files= too would be opened a second time as cache_2.
    ds = Datasette(immutables=[str(db)], metadata=metadata, settings=SERVE_SETTINGS)
    await ds.invoke_startup()
    queries = metadata["databases"]["cache"]["queries"]
    return {
        "settings": SERVE_SETTINGS,
        "requests": requests,
        "parameters": parameters,
        "canned_queries": await measure_canned_queries(ds, queries, parameters, requests),
        "search": await measure_search(ds, parameters, requests),
        "binaries_page": await measure_binaries_page(ds, configured_facets(metadata, "binaries"), requests),
        "filtered_pages": await measure_filtered_pages(
            ds, configured_facets(metadata, "binaries"), parameters, requests
        ),
    }


# --- targets and report ----------------------------------------------------------------------------------------


def target(name, value, limit, met):
    return {"name": name, "value": value, "limit": limit, "met": bool(met)}


def evaluate_targets(results):
    full, unchanged, added = results["full_build"], results["unchanged_rebuild"], results["add_tag"]
    serving = results["serving"]
    canned_p95 = max(timing["p95_ms"] for timing in serving["canned_queries"])
    search_p95 = max(timing["p95_ms"] for timing in serving["search"])
    page_p95 = max(timing["p95_ms"] for timing in serving["binaries_page"])
    every_timing = serving["canned_queries"] + serving["search"] + serving["binaries_page"]
    not_ok = [timing["url"] for timing in every_timing if timing["statuses"] != [200]]
    facets_timed_out = sorted(
        {facet for timing in serving["binaries_page"] for facet in timing.get("facets_timed_out", [])}
    )
    return [
        target("Full build, builder / lower bound (wall)", f"{full['ratio_wall']:.2f}x", f"<= {MAX_BUILD_RATIO}x",
               full["ratio_wall"] <= MAX_BUILD_RATIO),
        target("Peak RSS of the builder", f"{full['builder']['peak_rss_mib']:.0f} MiB", f"<= {MAX_PEAK_RSS_MIB} MiB",
               full["builder"]["peak_rss_mib"] <= MAX_PEAK_RSS_MIB),
        target("Database size / corpus size", f"{results['database']['fraction_of_corpus']:.1%}", f"<= {MAX_DB_FRACTION:.0%}",
               results["database"]["fraction_of_corpus"] <= MAX_DB_FRACTION),
        target("Unchanged rebuild / full build", f"{unchanged['fraction_of_full']:.1%}", f"<= {MAX_UNCHANGED_FRACTION:.0%}",
               unchanged["fraction_of_full"] <= MAX_UNCHANGED_FRACTION),
        target("Unchanged rebuild writes nothing", "yes" if unchanged["wrote_nothing"] else "no", "yes",
               unchanged["wrote_nothing"]),
        target("Add a tag / that tag alone", f"{added['ratio_wall']:.2f}x", f"about 1x (<= {MAX_ADD_TAG_RATIO}x)",
               added["ratio_wall"] <= MAX_ADD_TAG_RATIO),
        target("Canned queries, slowest p95", f"{canned_p95:.0f} ms", f"<= {MAX_CANNED_P95_MS} ms",
               canned_p95 <= MAX_CANNED_P95_MS),
        target("Search, slowest p95", f"{search_p95:.0f} ms", f"<= {MAX_SEARCH_P95_MS} ms", search_p95 <= MAX_SEARCH_P95_MS),
        target("Binaries page with facets, slowest p95", f"{page_p95:.0f} ms", f"<= {MAX_BINARIES_PAGE_P95_MS} ms",
               page_p95 <= MAX_BINARIES_PAGE_P95_MS),
        target("Responses other than 200", ", ".join(not_ok) or "none", "none", not not_ok),
        target("Facets timed out on the binaries page", ", ".join(facets_timed_out) or "none", "none", not facets_timed_out),
    ]  # fmt: skip


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def verdict(met):
    return "met" if met else "**missed**"


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
    m = results["machine"]
    rows = [
        ["CPU", m["cpu"]], ["cores", m["cores"]], ["RAM", f"{m['ram_gib']:.1f} GiB"], ["OS", m["os"]],
        ["Python", m["python"]], ["SQLite", m["sqlite"]], ["Datasette", m["datasette"]],
        ["load average at start / end", f"{m['load_start']} / {m['load_end']}"],
        ["code", results["code"]], ["date", results["date"]], ["benchmark took", f"{results['seconds']:.0f} s"],
    ]  # fmt: skip
    return ["## Machine", "", *table(["", ""], rows)]


def render_corpus(results):
    rows = [
        [name, c["path"], c["tags"], c["pages"], f"{c['bytes'] / 1e6:.1f} MB"]
        for name, c in (("corpus", results["corpus"]), ("extra tag", results["extra"]))
    ]
    return ["## Corpus", "", *table(["", "path", "tags", "pages", "page bytes"], rows)]


def render_full_build(results):
    full = results["full_build"]
    return [
        "## Full build",
        "",
        (
            f"{results['runs']} runs each, builder and lower bound alternating, one subprocess per run "
            "(wall time includes Python start-up). Peak RSS is the sum over the subprocess and its children (the builder's writer process), sampled every 20 ms."
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
            f"{db['bytes'] / 1e6:.1f} MB, **{db['fraction_of_corpus']:.1%}** of the corpus's "
            f"{results['corpus']['bytes'] / 1e6:.1f} MB of pages. Rows: {counts}."
        ),
        "",
        "The largest tables and indexes (SQLite's dbstat):",
        "",
        *table(
            ["", "MB", "of the corpus"],
            [
                [f"`{name}`", f"{size / 1e6:.1f}", f"{size / results['corpus']['bytes']:.1%}"]
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


def latency_cells(timing):
    return [
        status_text(timing["statuses"]),
        timing.get("rows", ""),
        f"{timing['median_ms']:.1f}",
        f"{timing['p95_ms']:.1f}",
    ]


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
        "## Canned queries",
        "",
        (
            f"Datasette {results['machine']['datasette']} in process, database immutable, settings {serving['settings']}; "
            f"`/cache/<query>.json`, one warm-up then {serving['requests']} requests each. "
            f"Realistic parameters (each query takes those it has): {parameters}."
        ),
        "",
        *table(
            ["query", "parameters", "status", "rows", "median ms", "p95 ms", f"p95 <= {MAX_CANNED_P95_MS} ms"], rows
        ),
    ]


def render_search(results):
    rows = [
        [
            t["name"],
            f"`{t['url']}`",
            *latency_cells(t),
            verdict(t["p95_ms"] <= MAX_SEARCH_P95_MS and t["statuses"] == [200]),
        ]
        for t in results["serving"]["search"]
    ]
    return [
        "## Search",
        "",
        *table(["", "url", "status", "rows", "median ms", "p95 ms", f"p95 <= {MAX_SEARCH_P95_MS} ms"], rows),
    ]


def render_binaries_page(results):
    rows = []
    for t in results["serving"]["binaries_page"]:
        timed_out = (
            ", ".join(f"{facet} ({n} of {t['answered']})" for facet, n in t["facets_timed_out"].items()) or "none"
        )
        met = verdict(t["p95_ms"] <= MAX_BINARIES_PAGE_P95_MS and t["statuses"] == [200])
        rows.append([t["name"], f"`{t['url']}`", *latency_cells(t), timed_out, met])
    header = [
        "",
        "url",
        "status",
        "rows",
        "median ms",
        "p95 ms",
        "facets timed out",
        f"p95 <= {MAX_BINARIES_PAGE_P95_MS} ms",
    ]
    intro = (
        "With the facets metadata.yml configures; a facet that timed out is named with the answers it was missing from."
    )
    return ["## Binaries page with facets", "", intro, "", *table(header, rows)]


def render_filtered_pages(results):
    rows = [
        [
            t["name"], f"`{t['url']}`", *latency_cells(t),
            "timed out" if t.get("row_count") is None else f"{t['row_count']:,}", ", ".join(t["facets_timed_out"]) or "none",
        ]
        for t in results["serving"]["filtered_pages"]
    ]  # fmt: skip
    intro = (
        "Where a click on a facet of the whole view leads, for information (no target). Facets come from the"
        " build's cube on these pages; the row count is Datasette's own, counted live within its time limit"
        " (sql_time_limit_ms), or missing from the page when that ran out."
    )
    header = ["", "url", "status", "rows", "median ms", "p95 ms", "row count", "facets timed out"]
    return ["## Filtered binaries pages", "", intro, "", *table(header, rows)]


def render_report(results):
    parts = [
        render_targets, render_machine, render_corpus, render_full_build, render_database,
        render_incremental, render_canned_queries, render_search, render_binaries_page, render_filtered_pages,
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
        "datasette": datasette.__version__,
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
    corpus, extra = prepare_inputs(args, code, work)
    results["extra_tag"] = check_inputs(corpus, extra)
    results |= {"corpus": read_corpus(corpus), "extra": read_corpus(extra)}
    db = work / "cache.db"  # Datasette names the database after the file; metadata.yml describes "cache"
    full_build = results["full_build"] = measure_full_builds(code, corpus, db, work / "lower_bound.db", args.runs)
    results["database"] = database_facts(db, results["corpus"]["bytes"])
    results["unchanged_rebuild"] = measure_unchanged_rebuilds(
        code, corpus, db, args.runs, full_build["builder"]["wall_s"]
    )
    results["add_tag"] = measure_add_tag(code, corpus, extra, db, work, args.runs)
    metadata = yaml.safe_load((code / "metadata.yml").read_text())
    results["serving"] = asyncio.run(measure_serving(db, metadata, realistic_parameters(db), args.requests))
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
    parser.add_argument(
        "--size", choices=("small", "full"), default="small", help="corpus size to generate, and the results' name"
    )
    parser.add_argument(
        "--corpus", type=Path, help="existing corpus (folder holding _cache/) instead of a generated one"
    )
    parser.add_argument("--extra-tag", type=Path, help="folder holding _cache/<tag>/ of one tag the corpus lacks")
    parser.add_argument("--runs", type=int, default=3, help="runs of each build (default 3)")
    parser.add_argument(
        "--requests", type=int, default=20, help="timed requests per URL, after one warm-up (default 20)"
    )
    parser.add_argument(
        "--work", type=Path, help="folder for the databases (default: a temporary folder, removed after)"
    )
    parser.add_argument(
        "--results", type=Path, default=BENCHMARKS / "results", help="folder for <size>.md and <size>.json"
    )
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
