"""Measure the builder and the served databases against the targets of issue 19 (scale on any data shape).

    python benchmarks/run.py --size small|full|history [--name NAME] [--shape usual|spread ...] [--no-indexes]
                             [--corpus PATH] [--corpus-spread PATH] [--extra-tag PATH] [--extra-tag-spread PATH]
                             [--index-listing PATH] [--big-tag PATH] [--runs N] [--index-runs N] [--incremental-runs N]
                             [--requests N] [--work DIR] [--results DIR]
    python benchmarks/run.py --render RESULTS_JSON [--results DIR]

In one run, side by side (benchmarks/README.md explains each measure):
- for each page shape (usual, spread): a full build from the pages against benchmarks/lower_bound.py
  (orjson parse, flat inserts) and the write floor (benchmarks/floors.py: the built database's rows written
  into an empty file with its schema), alternating, one subprocess per run; peak RSS of the builder's
  process tree (the builder and its writer process); the database's bytes per binary; an unchanged
  rebuild; adding one tag to a copy, and removing it again, against building that tag alone, the plain
  copy on its own and the floor of finding the corpus's files unchanged (floors.py);
- the history built from its build-cache indexes (a cache_spack_io_index.json) against
  benchmarks/lower_bound_indexes.py, alternating; its peak RSS; the bytes per dependency edge; an unchanged
  rebuild; and the peak RSS of building one busy tag whose root index is about 170 MB;
- each database served as the README says (serve.SERVE_COMMAND) in a subprocess, timed over HTTP: the
  binaries page, a click on the top value of each facet, two searches and each facet clicked after the broader
  (each with whether Datasette gave the exact row count; for a search, also the rows of the full-text index
  it matches, listed with SQL), every
  canned query; and on the history built from indexes the dependency questions: dependents of the most
  depended-on packages and external, and of the slowest to answer among the next 37 most depended-on (with
  and without a tag), the largest dependency tree, find_binaries for a ^dependency (of the most depended-on
  package and external, and of the package with the most binaries) (each also as JSON: the query without its
  page), the dependencies view filtered by dependency and by hash.
Prints a Markdown report and writes it, with every raw number as JSON, to benchmarks/results/<name>.md and
<name>.json. Everything runs from a copy of the code taken at the start (WORK/code, also first on the
served Datasette's PYTHONPATH for the plugin), so edits made meanwhile do not leak into the numbers.
--render measures nothing: it renders a run's saved JSON again with this code's report, its targets
evaluated again (after a change to the report, so that the saved report stays what its code writes).

Inputs not given are generated into WORK/generated (replaced on each run): the usual-shape corpus with its
indexes (their cache_spack_io_index.json is the default --index-listing), the spread-shape corpus as pages,
an extra tag of each shape (a folder holding _cache/<one tag>/, as `generate_corpus.py --only-tag` writes)
and the busy tag (a folder holding the cache_spack_io_index.json of one tag).
"""

import argparse
import contextlib
import hashlib
import json
import os
import platform
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

from datasette.app import DEFAULT_SETTINGS
from generate_corpus import EXTRA_TAG
from inspect_db import (
    database_facts,
    db_counts,
    edge_storage,
    full_text_matches,
    largest_tree,
    most_depended_on,
    realistic_parameters,
    stack_and_os_pairs,
)
from lower_bound import page_paths
from lower_bound_indexes import local_path, read_index
from measure import compare_alternating, file_state, log, run_measured, summarise, timed_copy
from report import render_report, targets
from serve import SERVE_COMMAND, served, time_url, url

from spack_cache_db.web.counts import live_count_limit_ms

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
# What a run uses from the repository: copied once into WORK/code, see snapshot_code.
CODE_UNDER_TEST = (
    "build_db.py",
    "spack_cache_db",
    "benchmarks/lower_bound.py",
    "benchmarks/lower_bound_indexes.py",
    "benchmarks/floors.py",
    "benchmarks/generate_corpus.py",
    "benchmarks/build_cache_indexes.py",
)
SIZES = ("small", "full", "history")
SHAPES = ("usual", "spread")
# A busy tag for the memory of an index build: develop (its pages hold rebuilds) with more packages than
# the corpus, so that its root index is about 170 MB. The small size keeps the smoke test quick.
BIG_TAG = "develop"
BIG_TAG_PACKAGES = {"small": 30, "full": 1175, "history": 1175}
LISTING = "cache_spack_io_index.json"
DEPENDENTS_CANDIDATES = 40  # the most depended-on packages; after the first three, the slowest dependents
# Three questions for each of the connections Datasette serves with (num_sql_threads), whichever answers.
DEPENDENTS_WARM_UPS = 3 * DEFAULT_SETTINGS["num_sql_threads"]


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


def wanted_inputs(args):
    """{input: (the folder given or None, generator options)} of what this run measures."""
    wanted = {}
    shapes = set(args.shape) | ({"usual"} if args.indexes and args.index_listing is None else set())
    for shape in sorted(shapes, key=SHAPES.index):
        with_indexes = shape == "usual" and args.indexes and args.index_listing is None
        wanted[f"corpus-{shape}"] = (
            args.corpus if shape == "usual" else args.corpus_spread,
            ("--shape", shape) + (() if with_indexes else ("--no-indexes",)),
        )
    for shape in args.shape:
        wanted[f"extra-{shape}"] = (
            args.extra_tag if shape == "usual" else args.extra_tag_spread,
            ("--shape", shape, "--only-tag", EXTRA_TAG, "--no-indexes"),
        )
    if args.indexes:
        packages = str(BIG_TAG_PACKAGES[args.size])
        wanted["big-tag"] = (args.big_tag, ("--shape", "usual", "--only-tag", BIG_TAG, "--packages", packages))
    return wanted


def prepare_inputs(args, code, work):
    """{input: folder} (the ones given, or generated into WORK/generated), and the seconds each generation
    took; the index listing is the --index-listing given or the usual corpus's."""
    wanted = wanted_inputs(args)
    generated = work / "generated"
    if any(given is None for given, _ in wanted.values()):
        shutil.rmtree(generated, ignore_errors=True)
    inputs, seconds = {}, {}
    for name, (given, options) in wanted.items():
        if given is None:
            given, seconds[name] = generate(code, generated / name, args.size, *options)
        inputs[name] = given.resolve()
    if args.indexes:
        inputs["listing"] = (args.index_listing or inputs["corpus-usual"] / LISTING).resolve()
    check_inputs(inputs, args.shape)
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


def check_inputs(inputs, shapes):
    """One line naming what is wrong with a corpus, an extra tag, the listing or the busy tag."""
    for shape in shapes:
        corpus, extra = inputs[f"corpus-{shape}"], inputs[f"extra-{shape}"]
        if not page_files(corpus):
            raise SystemExit(f"{corpus}: expected pages at _cache/<tag>/<package>/specs.md, found none")
        extra_tags = tags_of(extra)
        if len(extra_tags) != 1:
            raise SystemExit(f"{extra}: expected pages of exactly one tag under _cache/, found {extra_tags or 'none'}")
        if extra_tags[0] in tags_of(corpus):
            raise SystemExit(f"{extra}: tag {extra_tags[0]} is in the corpus already; adding it would change nothing")
    if "listing" in inputs:
        if not inputs["listing"].is_file():
            raise SystemExit(f"{inputs['listing']}: expected a {LISTING} (generate the corpus with its indexes)")
        big_listing = inputs["big-tag"] / LISTING
        if not big_listing.is_file() or len(json.loads(big_listing.read_text())) != 1:
            raise SystemExit(f"{big_listing}: expected the indexes of exactly one tag")


def describe_input(folder):
    """Tags, pages and bytes of a corpus; its pages are read in full so that no timed run pays cold disk
    reads (its indexes, many gigabytes at history size, are only counted)."""
    pages, indexes = page_files(folder), index_files(folder)
    return {
        "path": str(folder),
        "tags": len(tags_of(folder)),
        "pages": len(pages),
        "bytes": sum(read_size(path) for path in pages),
        "index_files": len(indexes),
        "index_bytes": sum(path.stat().st_size for path in indexes),
    }


def read_size(path):
    size = 0
    with open(path, "rb") as file:
        while chunk := file.read(1 << 24):
            size += len(chunk)
    return size


def root_index_bytes(folder):
    """Bytes of the JSON of the root index of the one tag of folder/cache_spack_io_index.json."""
    listing_path = folder / LISTING
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


def measure_full_builds(code, source, db, lower_bound, runs, write_floor=False):
    """A full build of source (pages or a listing) into a new db, alternating with its lower bound and, with
    write_floor, with the floor of writing the database each build made."""

    def builder():
        db.unlink(missing_ok=True)
        return builder_command(code, [source], db)

    lower_db, floor_db = db.with_name("lower_bound.db"), db.with_name("write_floor.db")
    after_build = (lambda: measure_floor(code, "write", db, floor_db)) if write_floor else None
    results = compare_alternating(f"full build of {source}", builder, lambda: lower_bound(lower_db), runs, after_build)
    lower_db.unlink()  # gigabytes at history size
    if write_floor:
        floor_db.unlink()
        floor = median_floor(results.pop("after_build"))
        results["write_floor"] = floor | {"ratio_wall": floor["seconds"] / results["lower_bound"]["wall_s"]}
    return results


def measure_floor(code, *arguments):
    """Run benchmarks/floors.py of the code under test: its seconds, in all and per part."""
    command = [sys.executable, str(code / "benchmarks" / "floors.py"), *map(str, arguments)]
    environment = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, (str(code), os.environ.get("PYTHONPATH"))))}
    finished = subprocess.run(command, check=False, capture_output=True, text=True, env=environment)
    if finished.returncode != 0:
        raise SystemExit(finished.stderr.strip() or f"{' '.join(command)} failed ({finished.returncode})")
    floor = json.loads(finished.stdout)
    log(f"floor ({arguments[0]}): {floor['seconds']:.2f} s")
    return floor


def median_floor(floors):
    """The median seconds of a floor's runs, and the parts of the run closest to it (parts_of_s: its seconds)."""
    seconds = statistics.median(floor["seconds"] for floor in floors)
    closest = min(floors, key=lambda floor: abs(floor["seconds"] - seconds))
    return closest | {"seconds": seconds, "parts_of_s": closest["seconds"], "runs_s": [f["seconds"] for f in floors]}


def measure_unchanged_rebuilds(code, sources, db, runs, full_build_s):
    """The same build again over the finished db: its time, and whether db is byte for byte as it was."""
    before = file_state(db)
    rebuilds = []
    for number in range(1, runs + 1):
        rebuilds.append(run_measured(builder_command(code, sources, db)))
        log(f"unchanged rebuild {number}/{runs}: {rebuilds[-1]['wall_s']:.2f} s")
    rebuilds = summarise(rebuilds)
    after = file_state(db)
    return {
        **rebuilds,
        "fraction_of_full": rebuilds["wall_s"] / full_build_s,
        "before": before,
        "after": after,
        "wrote_nothing": after == before,
    }


def measure_add_tag(code, corpus, extra, db, folder, runs):
    """Add the extra tag to a copy of db, then remove it again (the same build without it), alternating with a
    build of that tag alone into a new file, with a plain copy of a fresh copy of db (what the builder must at
    least do to build onto a copy of its output) and with the floor of finding the corpus's files unchanged (what it must
    at least do to know it need not read them).

    The plain copy copies a file made as the addition's is, just before, by copying db: on this VM a file whose
    pages are in the page cache as they were written copied 5-10 times slower than db, whose pages were read
    (by hand: 1.5-2.1 s against 0.2-0.3 s for the usual history's 0.9 GB, alternating), though not always (both
    took 0.2 s once the kernel's caches were dropped). The addition copies such a file.

    The corpus is passed as the same path the full build had, so its pages are recognised as
    unchanged and only the new tag's pages are read. One addition runs first, untimed: the first after a full
    build ran slower than the next ones (by hand, 8.0 s, then 4.9 s; the report at 37c965b: 7.6 s, then down
    to 6.4 s), so the median was of a machine still settling.
    """
    added_db, alone_db = folder / "add_tag.db", folder / "tag_alone.db"
    as_found, copied = folder / "copy_source.db", folder / "plain_copy.db"
    shutil.copyfile(db, added_db)
    warm_up = run_measured(builder_command(code, [corpus, extra], added_db))
    log(f"add a tag first, untimed: {warm_up['wall_s']:.2f} s")
    added, removed, alone, copies, floors = [], [], [], [], []
    for number in range(1, runs + 1):
        shutil.copyfile(db, added_db)
        added.append(run_measured(builder_command(code, [corpus, extra], added_db)))
        grown = db_counts(added_db)
        removed.append(run_measured(builder_command(code, [corpus], added_db)))
        alone_db.unlink(missing_ok=True)
        alone.append(run_measured(builder_command(code, [extra], alone_db)))
        shutil.copyfile(db, as_found)  # as added_db is made before each addition
        copies.append(timed_copy(as_found, copied))
        copied.unlink()
        as_found.unlink()
        floors.append(measure_floor(code, "unchanged", db, corpus))
        log(
            f"add a tag {number}/{runs}: {added[-1]['wall_s']:.2f} s, remove it {removed[-1]['wall_s']:.2f} s, "
            f"that tag alone {alone[-1]['wall_s']:.2f} s, a plain copy {copies[-1]:.2f} s, "
            f"the corpus found unchanged {floors[-1]['seconds']:.2f} s"
        )
    added, removed, alone, floor = summarise(added), summarise(removed), summarise(alone), median_floor(floors)
    copy_s = sorted(copies)[len(copies) // 2]
    counts = counts_add_up(grown, db_counts(db), db_counts(alone_db))
    as_before = db_counts(added_db) == db_counts(db)
    added_db.unlink()
    beyond_copy_s = added["wall_s"] - copy_s
    return {
        "warm_up_s": warm_up["wall_s"],
        "add_tag": added,
        "tag_alone": alone,
        "copy_s": copy_s,
        "copies_s": copies,
        "beyond_copy_s": beyond_copy_s,
        "ratio_wall": beyond_copy_s / alone["wall_s"],
        "unchanged_floor": floor,
        "floor_ratio": floor["seconds"] / alone["wall_s"],
        "counts_add_up": counts,
        "remove_tag": removed,
        "remove_beyond_copy_s": removed["wall_s"] - copy_s,
        "remove_ratio_wall": (removed["wall_s"] - copy_s) / alone["wall_s"],
        "removed_as_before": as_before,
    }


def counts_add_up(added, base, alone):
    """Pages and binaries of the grown database are those of the base plus those of the new tag."""
    return all(added[key] == base[key] + alone[key] for key in ("pages", "binaries"))


def measure_pages(code, inputs, shape, folder, args):
    """Builds of one shape's pages, then its database served."""
    log(f"== pages, {shape} shape")
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "cache.db"  # Datasette names the database after the file; the plugin describes "cache"
    corpus, extra = inputs[f"corpus-{shape}"], inputs[f"extra-{shape}"]
    warmed = read_pages(corpus)
    full = measure_full_builds(
        code, corpus, db, lambda lower_db: lower_bound_command(code, corpus, lower_db), args.runs, write_floor=True
    )
    full["warmed"] = warmed
    results = {"full_build": full, "database": database_facts(db)}
    results["unchanged_rebuild"] = measure_unchanged_rebuilds(
        code, [corpus], db, args.incremental_runs, full["builder"]["wall_s"]
    )
    results["add_tag"] = measure_add_tag(code, corpus, extra, db, folder, args.incremental_runs)
    results["extra_tag"] = tags_of(extra)[0]
    results["serving"] = measure_serving(db, code, folder, args.requests)
    return results


def read_pages(corpus):
    """Read every page of the corpus once, untimed, so that the builder and its lower bound, which read the same
    files, both find them in the page cache: the first to run would otherwise read them from the disk (with one
    run each, always the builder). An index corpus is larger than the memory and is not read ahead."""
    started, total = time.perf_counter(), 0
    for page in page_paths(corpus):  # those the lower bound reads
        total += len(page.read_bytes())
    seconds = time.perf_counter() - started
    log(f"read the pages of {corpus} once ({total / 1e6:.0f} MB in {seconds:.1f} s)")
    return {"bytes": total, "seconds": seconds}


def measure_indexes(code, inputs, folder, args, page_binaries):
    """The history built from its indexes, the busy tag's peak RSS, then the database served with the
    dependency questions."""
    log("== the history built from its indexes")
    folder.mkdir(parents=True, exist_ok=True)
    db, listing = folder / "cache.db", inputs["listing"]
    full = measure_full_builds(
        code, listing, db, lambda lower_db: index_lower_bound_command(code, listing, lower_db), args.index_runs
    )
    results = {"full_build": full, "database": database_facts(db), "edges": edge_storage(db)}
    results["binaries"] = results["database"]["counts"]["binaries"]
    results["page_binaries"] = page_binaries  # of the usual corpus's pages, when the listing is its own
    results["unchanged_rebuild"] = measure_unchanged_rebuilds(
        code, [listing], db, args.incremental_runs, full["builder"]["wall_s"]
    )
    results["big_tag"] = measure_big_tag(code, inputs["big-tag"], folder, args.index_runs)
    results["serving"] = measure_serving(db, code, folder, args.requests, with_dependencies=True)
    return results


def measure_big_tag(code, big_tag, folder, runs):
    big_db, big_runs = folder / "big_tag.db", []
    for number in range(1, runs + 1):
        big_db.unlink(missing_ok=True)
        big_runs.append(run_measured(builder_command(code, [big_tag / LISTING], big_db)))
        log(f"busy tag from its indexes {number}/{runs}: peak RSS {big_runs[-1]['peak_rss_kib'] / 1024:.0f} MiB")
    binaries = db_counts(big_db)["binaries"]
    big_db.unlink()
    return summarise(big_runs) | {"root_index_bytes": root_index_bytes(big_tag), "binaries": binaries}


# --- serving -----------------------------------------------------------------------------------------------------


FACETS = ("tag", "os", "target", "compiler", "stacks")


def realistic_facet_values(parameters):
    """{facet: value} of each facet in the realistic parameters: what a click falls back to."""
    return {facet: parameters["stack" if facet == "stacks" else facet] for facet in FACETS}


def argument(facet):
    """The argument a click on a facet's value filters by."""
    return "stacks__arraycontains" if facet == "stacks" else facet


def top_facet_values(client, arguments, fallback):
    """{facet: the value with the most binaries} of each facet the binaries page with these arguments shows
    (not root, which every binary has): what a click on the first value of each facet filters by. Falls back to
    fallback's value for a facet that the answer lacks (say, when it timed out)."""
    status, body, _ = client.get(url("/cache/binaries.json", {**arguments, "_size": 1}))
    facets = json.loads(body)["facet_results"] if status == 200 else {}
    top, fallen_back = {}, []
    for facet in FACETS:
        results = [r["value"] for r in facets.get(facet, {}).get("results", []) if r["value"] != "root"]
        top[facet] = results[0] if results else fallback[facet]
        if not results:
            fallen_back.append(facet)
    return top, fallen_back


def fewest_facet_values(client):
    """{facet: the value with the fewest binaries} of each facet of the whole binaries page (all its values, not
    root): a click on it filters by what may lie anywhere in the view, all of it in a few late tags, say."""
    status, body, _ = client.get(url("/cache/binaries.json", {"_size": 1, "_facet_size": "max"}))
    facets = json.loads(body)["facet_results"] if status == 200 else {}
    fewest = {}
    for facet in FACETS:
        results = [r for r in facets.get(facet, {}).get("results", []) if r["value"] != "root"]
        if results:
            fewest[facet] = min(results, key=lambda r: (r["count"], r["value"]))["value"]
    return fewest


def arguments_of(path):
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query))


def broad_search(top):
    """The arguments of a search as broad as the os with the most binaries, which matches a large share of the
    listings."""
    return {"_search": top["os"]}


def facet_clicks(top, fewest, searched_top, parameters):
    """[(name, url)] of the pages the facet clicks (on the first value of each facet, then on the one with the
    fewest binaries, then on the first stack, os and compiler together) and two searches lead to: a narrow one
    (a package and an os), and a broad one; then a click on the first value of each facet of the broad search's
    page (searched_top)."""
    clicks = [(facet, url("/cache/binaries", {argument(facet): value})) for facet, value in top.items()]
    clicks += [(f"{facet}, fewest", url("/cache/binaries", {argument(facet): v})) for facet, v in fewest.items()]
    three = {argument(facet): top[facet] for facet in ("stacks", "os", "compiler")}
    clicks.append(("stack, os and compiler", url("/cache/binaries", three)))
    clicks.append(("package", url("/cache/binaries", {"package": parameters["package"]})))
    clicks.append(("search", url("/cache/binaries", {"_search": parameters["q"]})))
    clicks.append(("broad search", url("/cache/binaries", broad_search(top))))
    clicks.extend(
        (f"broad search, {facet}", url("/cache/binaries", {**broad_search(top), argument(facet): value}))
        for facet, value in searched_top.items()
    )
    return clicks


def measure_canned_queries(client, queries, parameters, requests, stack_and_os):
    """Every canned query as HTML, with empty parameters and with realistic ones; find_binaries also in every
    tag for each (stack, os) of stack_and_os ({label: pair}, inspect_db.stack_and_os_pairs), and for the
    realistic package alone."""
    timings = []
    for name, names in queries.items():
        realistic = {param: parameters[param] for param in names if param in parameters}
        parameter_sets = [("empty", {}), ("realistic", realistic)] if names else [("empty", {})]
        if name == "find_binaries":
            parameter_sets += [
                (f"tag=*, stack={stack}, os={os_name}: {label}", {"tag": "*", "stack": stack, "os": os_name})
                for label, (stack, os_name) in stack_and_os.items()
            ]
            parameter_sets.append(
                (f"tag=*, package={parameters['package']}: realistic", {"tag": "*", "package": parameters["package"]})
            )
        for label, params in parameter_sets:
            timing = time_url(client, url(f"/cache/{name}", params), requests)
            unset = [param for param in names if param not in params]
            timings.append({"query": name, "parameters": label, "unset": unset, **timing})
            log(f"{name} ({label}): p95 {timing['p95_ms']:.1f} ms, status {timing['statuses']}")
    return timings


def dependency_subjects(db):
    """What the dependency questions ask about, found with SQL: the most depended-on packages and external
    of the whole history, the next most depended-on packages up to DEPENDENTS_CANDIDATES (among which the
    slowest is found once served: never one already asked about), and the binary of the newest tag with the
    largest dependency tree."""
    log("finding the most depended-on packages and the largest dependency tree")
    packages, external, counted_s = most_depended_on(db, DEPENDENTS_CANDIDATES)
    return {
        "packages": packages[:3],
        "candidates": [name for name, _ in packages[3:]],
        "external": external,
        "counted_s": counted_s,
        "tree": largest_tree(db),
    }


def slowest_dependents(client, candidates):
    """Of the candidates, the package whose dependents (as JSON: the query alone) take longest, each asked
    twice, the faster counting: the most depended-on packages are not the slowest to answer, since the
    query's cost follows how its dependents spread through the order it lists them in. The query is asked
    DEPENDENTS_WARM_UPS times first: the first question on each of Datasette's connections prepares it
    (tens of milliseconds), which would otherwise decide which candidate looks slowest."""
    log(f"finding the slowest dependents of {len(candidates)} packages")
    for _ in range(DEPENDENTS_WARM_UPS):
        client.get(url("/cache/dependents.json", {"package": candidates[0]}))
    json_ms = {}
    for name in candidates:
        path = url("/cache/dependents.json", {"package": name})
        json_ms[name] = min(client.get(path)[2] for _ in range(2))
    return {"package": max(json_ms, key=json_ms.get), "json_ms": json_ms, "warm_ups": DEPENDENTS_WARM_UPS}


def dependency_questions(subjects, parameters):
    """[(question, subject, url, kind)]: kind 'canned' (a canned query's target) or 'table' (a table page's).
    find_binaries asks for a ^dependency anywhere in the DAG: of the most depended-on package and external,
    and of the package with the most binaries in the newest tag (few depend on it, over many specs)."""
    tag = parameters["tag"]
    asked = [(name, "package") for name, _ in subjects["packages"]]
    if subjects["external"]:
        asked.append((subjects["external"][0], "external"))
    asked.append((subjects["slowest"]["package"], f"slowest of the next {len(subjects['candidates'])}"))
    questions = []
    for name, subject in asked:
        for params in ({"package": name}, {"package": name, "tag": tag}):
            questions.append(("dependents", subject, url("/cache/dependents", params), "canned"))
    tree = subjects["tree"]["hash"]
    questions.append(("dependency_tree", "largest tree", url("/cache/dependency_tree", {"hash": tree}), "canned"))
    if subjects["packages"]:
        top = subjects["packages"][0][0]
        questions.append(("dependencies", "most depended on", url("/cache/dependencies", {"dependency": top}), "table"))
    questions.append(("dependencies", "largest tree", url("/cache/dependencies", {"hash": tree}), "table"))
    wanted = [(name, "most depended on") for name, _ in subjects["packages"][:1]]
    if subjects["external"]:
        wanted.append((subjects["external"][0], "external"))
    wanted.append((parameters["package"], "most binaries"))
    for name, subject in wanted:
        questions.append(("find_binaries", f"^ {subject}", url("/cache/find_binaries", {"spec": f"^{name}"}), "canned"))
    return questions


def as_json(path):
    """The address of a page's JSON: .json after its path."""
    address, _, query = path.partition("?")
    return f"{address}.json" + (f"?{query}" if query else "")


def measure_serving(db, code, folder, requests, with_dependencies=False):
    """The database served: its binaries page, facet clicks, canned queries and (with_dependencies) the
    dependency questions."""
    parameters = realistic_parameters(db)
    subjects = dependency_subjects(db) if with_dependencies else None
    with served(db, code, folder / "datasette.log") as client:
        if subjects:
            subjects["slowest"] = slowest_dependents(client, subjects["candidates"])
        questions = dependency_questions(subjects, parameters) if subjects else []
        versions = json.loads(client.get("/-/versions.json")[1])
        settings = json.loads(client.get("/-/settings.json")[1])
        queries = {query["name"]: query["params"] for query in json.loads(client.get("/cache.json")[1])["queries"]}
        binaries_page = time_url(client, "/cache/binaries", requests)
        log(f"/cache/binaries: p95 {binaries_page['p95_ms']:.0f} ms, row count {binaries_page['row_count']}")
        top, fallen_back = top_facet_values(client, {}, realistic_facet_values(parameters))
        searched_top, searched_fallen_back = top_facet_values(client, broad_search(top), top)
        fts_table = json.loads(client.get("/-/metadata.json")[1])["databases"]["cache"]["tables"]["binaries"][
            "fts_table"
        ]
        clicks, matched = [], {}  # matched: what each search finds in the full-text index, measured once
        for name, path in facet_clicks(top, fewest_facet_values(client), searched_top, parameters):
            clicks.append({"name": name, **time_url(client, path, requests)})
            log(f"{path}: p95 {clicks[-1]['p95_ms']:.0f} ms, row count {clicks[-1]['row_count']}")
            search = arguments_of(path).get("_search")
            if search:
                if search not in matched:
                    matched[search] = full_text_matches(db, fts_table, search)
                clicks[-1]["full_text"] = matched[search]
        canned = measure_canned_queries(client, queries, parameters, requests, stack_and_os_pairs(db))
        asked = []
        for question, subject, path, kind in questions:
            asked.append({"question": question, "subject": subject, "kind": kind, **time_url(client, path, requests)})
            if kind == "canned":  # the query alone: the same answer as JSON, no page to render
                asked[-1]["as_json"] = time_url(client, as_json(path), requests)
            log(f"{path}: p95 {asked[-1]['p95_ms']:.0f} ms, status {asked[-1]['statuses']}")
    return {
        "command": " ".join(SERVE_COMMAND),
        "requests": requests,
        "parameters": parameters,
        "facet_values_fallen_back": fallen_back,
        "searched_facet_values_fallen_back": searched_fallen_back,
        "datasette": versions["datasette"]["version"],
        "sqlite": versions["sqlite"]["version"],
        "count_time_limit_ms": live_count_limit_ms(settings),  # the most a live row count may take
        "binaries_page": binaries_page,
        "facet_clicks": clicks,
        "canned_queries": canned,
        "dependency_subjects": subjects,
        "dependency_questions": asked,
    }


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
        "name": platform.node(),
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
    results = {
        "name": args.name,
        "size": args.size,
        "runs": args.runs,
        "index_runs": args.index_runs,
        "incremental_runs": args.incremental_runs,
        "requests": args.requests,
    }
    results |= {"date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(), "code": version}
    inputs, results["generated_s"] = prepare_inputs(args, code, work)
    results["inputs"] = {name: describe_input(folder) for name, folder in inputs.items() if name != "listing"}
    results["pages"] = {
        shape: measure_pages(code, inputs, shape, work / f"pages-{shape}", args) for shape in args.shape
    }
    if args.indexes:
        own_listing = inputs["listing"] == inputs.get("corpus-usual", Path()) / LISTING
        results["inputs"]["listing"] = {"path": str(inputs["listing"]), "own": own_listing}
        page_binaries = results["pages"].get("usual", {}).get("database", {}).get("counts", {}).get("binaries")
        results["indexes"] = measure_indexes(
            code, inputs, work / "indexes", args, page_binaries if own_listing else None
        )
    results["machine"]["load_end"] = load_average()
    results["seconds"] = time.monotonic() - started
    return results


def reported(results):
    """(results with their targets evaluated, the report)."""
    results["targets"] = targets(results)
    return results, render_report(results)


def reported_again(path):
    """reported() of a run's results as write_results saved them; exits with one line naming path when it holds
    none, or lacks what this report reads."""
    try:
        return reported(json.loads(path.read_text()))
    except (OSError, ValueError) as error:
        sys.exit(f"{path}: expected a run's results JSON ({error})")
    except (KeyError, TypeError, AttributeError) as error:
        sys.exit(f"{path}: expected a run's results JSON as run.py writes it ({type(error).__name__}: {error})")


def write_results(results, report, folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{results['name']}.md").write_text(report)
    (folder / f"{results['name']}.json").write_text(json.dumps(results, indent=2) + "\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--size", choices=SIZES, default="small", help="size of the corpora to generate (default small)")
    add("--name", help="the report's name: results/<name>.md and .json (default: the size)")
    add("--shape", choices=SHAPES, action="append", help="page shapes to measure (repeatable; default both)")
    add("--no-indexes", dest="indexes", action="store_false", help="leave out the history built from indexes")
    add("--corpus", type=Path, help="usual-shape corpus (folder holding _cache/, and mirrors/ for the indexes)")
    add("--corpus-spread", type=Path, help="spread-shape corpus (folder holding _cache/)")
    add("--extra-tag", type=Path, help="folder holding _cache/<tag>/ of one usual-shape tag the corpus lacks")
    add("--extra-tag-spread", type=Path, help="the same for the spread-shape corpus")
    add("--index-listing", type=Path, help=f"{LISTING} to build from (default: the usual corpus's)")
    add("--big-tag", type=Path, help=f"folder holding the {LISTING} of one busy tag")
    add("--runs", type=int, default=3, help="runs of each full build (default 3)")
    add(
        "--index-runs",
        type=int,
        help="runs of each full build from indexes and of the busy tag, whose lower bound alone takes minutes at"
        " history size (default: --runs)",
    )
    add(
        "--incremental-runs",
        type=int,
        help="runs of each build onto a database (unchanged, adding and removing a tag), seconds each but more at"
        " the mercy of the disk (default: --runs)",
    )
    add("--requests", type=int, default=20, help="timed requests per URL, after one warm-up (default 20)")
    add("--work", type=Path, help="folder for the databases (default: a temporary folder, removed after)")
    add("--results", type=Path, default=BENCHMARKS / "results", help="folder for <name>.md and <name>.json")
    add("--render", type=Path, metavar="RESULTS_JSON", help="measure nothing: report a run's saved results again")
    args = parser.parse_args(argv)
    args.index_runs = args.index_runs or args.runs
    args.incremental_runs = args.incremental_runs or args.runs
    if min(args.runs, args.index_runs, args.incremental_runs, args.requests) < 1:
        parser.error("--runs, --index-runs, --incremental-runs and --requests must be at least 1")
    args.shape = sorted(set(args.shape or SHAPES), key=SHAPES.index)
    args.name = args.name or args.size
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.render:
        results, report = reported_again(args.render)
    else:
        with work_folder(args.work) as work:
            results, report = reported(run_benchmark(args, work))
    print(report)
    write_results(results, report, args.results)


if __name__ == "__main__":
    sys.exit(main())
