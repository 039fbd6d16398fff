"""The benchmark's synthetic corpus and its runner.

The generator's build-cache indexes are checked as files (hashes, manifests, blobs, the index of mirrors)
and as data, in both shapes: each record is rendered back with a re-implementation, here, of the rules
the builder's index reader follows (the lead's INDEX_RULES), and must give exactly its page's spec; the
dependencies form one DAG per hash, closed in every index, with the shape of Spack's (a few packages most
binaries need, build-only edges, externals, chains ten deep). benchmarks/run.py runs on the small corpora
as a smoke test: every section is there and every URL answered 200. No timing is asserted: CI machines
are too noisy for that.
"""

import collections
import contextlib
import functools
import gzip
import hashlib
import http.server
import importlib
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml
from datasette.utils import escape_fts
from dump import check_full_text
from pagemaker import spack_hash
from paths import SITE

from spack_cache_db.build import build
from spack_cache_db.db.schema import LOAD_ORDER, RECOUNT_TAGS, create_schema
from spack_cache_db.read.pages import find_inputs

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "benchmarks" / "generate_corpus.py"
FLAG_PARAMETERS = {"cflags", "cppflags", "cxxflags", "fflags", "ldflags", "ldlibs"}
MIRROR_PARTS = {"build_cache", "v3", "blobs"}  # folders of a mirror's layout, not stack mirrors
SHAPES = ("usual", "spread")
# The small corpus's pages in the usual shape, as the generator wrote them before it had shapes: reports
# taken since stay comparable with earlier ones.
USUAL_SMALL_PAGES_SHA256 = "8397054720bf23f3c6668d225c8b0fba9a52ffdad220828d468438a73624ab6d"


def generate(out, *options):
    subprocess.run([sys.executable, str(GENERATOR), str(out), *options], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module", params=SHAPES)
def small_corpus(request, tmp_path_factory):
    return generate(tmp_path_factory.mktemp("corpus") / request.param, "--size", "small", "--shape", request.param)


def pages_digest(corpus):
    """sha256 of every file under _cache/ and _data/, with its path."""
    digest = hashlib.sha256()
    files = sorted(
        p for p in corpus.rglob("*") if p.is_file() and p.relative_to(corpus).parts[0] in ("_cache", "_data")
    )
    for path in files:
        digest.update(path.relative_to(corpus).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def page_specs(corpus):
    """{tag: {hash: (package, spec)}} of every page."""
    pages = {}
    for path in sorted(corpus.glob("_cache/*/*/specs.md")):
        fields = dict(line.split(": ", 1) for line in path.read_text().split("\n")[1:-1])
        tag, package = path.parent.parent.name, path.parent.name
        pages.setdefault(tag, {}).update((spec["hash"], (package, spec)) for spec in json.loads(fields["spec_details"]))
    return pages


def tag_stacks(corpus):
    """{tag: [stacks]} as _data/tags.yaml declares them."""
    return {entry["name"]: entry["stacks"] for entry in yaml.safe_load((corpus / "_data" / "tags.yaml").read_text())}


def mirrors(corpus):
    """[(tag, label, mirror folder)]: each tag's root mirror and its stack mirrors."""
    found = []
    for tag_mirror in sorted((corpus / "mirrors").iterdir()):
        found.append((tag_mirror.name, "root", tag_mirror))
        found += [(tag_mirror.name, p.name, p) for p in sorted(tag_mirror.iterdir()) if p.name not in MIRROR_PARTS]
    return found


def v3_manifest_entry(mirror):
    manifest = json.loads((mirror / "v3" / "manifests" / "index" / "index.manifest.json").read_text())
    assert manifest["version"] == 3 and len(manifest["data"]) == 1
    return manifest["data"][0]


def read_index(mirror):
    """The JSON of the mirror's index as Spack's reader would find it: through the v2 or the v3 layout."""
    v2 = mirror / "build_cache" / "index.json"
    if v2.exists():
        return v2.read_bytes()
    entry = v3_manifest_entry(mirror)
    stored = (mirror / "blobs" / "sha256" / entry["checksum"][:2] / entry["checksum"]).read_bytes()
    return gzip.decompress(stored) if entry["compression"] == "gzip" else stored


@pytest.fixture(scope="module")
def indexes(small_corpus):
    """{(tag, label): database} of every index of the small corpus."""
    return {(tag, label): json.loads(read_index(mirror))["database"] for tag, label, mirror in mirrors(small_corpus)}


def test_v2_index_hash_files_hold_the_sha256_of_their_index(small_corpus):
    v2 = sorted(small_corpus.glob("mirrors/**/build_cache/index.json"))
    assert v2, "the small corpus has tags in layout v2"
    for index in v2:
        assert (index.parent / "index.json.hash").read_text() == hashlib.sha256(index.read_bytes()).hexdigest(), index


def test_v3_manifests_describe_the_stored_bytes_of_their_blobs(small_corpus):
    compressions = set()
    v3 = [mirror for _, _, mirror in mirrors(small_corpus) if (mirror / "v3").exists()]
    assert v3, "the small corpus has tags in layout v3"
    for mirror in v3:
        assert json.loads((mirror / "v3" / "layout.json").read_text()) == {"signing": "gpg"}
        entry = v3_manifest_entry(mirror)
        assert entry["mediaType"] == "application/vnd.spack.db.v8+json" and entry["checksumAlgorithm"] == "sha256"
        blobs = list(mirror.glob("blobs/*/*/*"))
        assert [blob.relative_to(mirror).as_posix() for blob in blobs] == [
            f"blobs/sha256/{entry['checksum'][:2]}/{entry['checksum']}"
        ]
        stored = blobs[0].read_bytes()
        assert hashlib.sha256(stored).hexdigest() == entry["checksum"] and len(stored) == entry["contentLength"]
        assert stored.startswith(b"\x1f\x8b") == (entry["compression"] == "gzip"), mirror
        compressions.add(entry["compression"])
    assert compressions == {"gzip", "none"}


def test_the_index_of_mirrors_lists_every_tag_and_stack_with_urls_relative_to_it(small_corpus):
    listing = json.loads((small_corpus / "cache_spack_io_index.json").read_text())
    stacks = tag_stacks(small_corpus)
    assert sorted(listing) == sorted(stacks)
    found = {(tag, label): mirror for tag, label, mirror in mirrors(small_corpus)}
    for tag, entries in listing.items():
        labels = [entry["label"] for entry in entries]
        assert labels == ["root", *sorted(set(stacks[tag]) - {"root"})]
        for entry in entries:
            target = small_corpus / entry["url"]
            if target.name == "index.json":  # v2: the index itself
                document = target.read_bytes()
            elif target.parent.parent.parent.name == "blobs":  # v3: straight at an uncompressed blob
                assert v3_manifest_entry(target.parents[3])["compression"] == "none"
                document = target.read_bytes()
            else:  # a mirror folder, for a gzip-compressed blob
                assert v3_manifest_entry(target)["compression"] == "gzip"
                document = read_index(target)
            assert document == read_index(found[(tag, entry["label"])]), entry["url"]


def test_every_edge_leads_to_a_record_of_the_same_index(indexes):
    edges = 0
    for (tag, label), database in indexes.items():
        installs = database["installs"]
        for spec_hash, record in installs.items():
            for edge in record["spec"].get("dependencies", []):
                assert edge["hash"] in installs, (tag, label, spec_hash, edge)
                assert set(edge["parameters"]) == {"deptypes", "virtuals"}
                edges += 1
    assert edges > 1000


def test_each_index_has_as_binaries_the_pages_specs_of_its_stack_and_the_rest_not_in_its_cache(small_corpus, indexes):
    pages = page_specs(small_corpus)
    not_binaries = collections.Counter()
    for (tag, label), database in indexes.items():
        binaries = {h for h, record in database["installs"].items() if record["in_buildcache"]}
        assert binaries == {h for h, (_, spec) in pages[tag].items() if label in spec["stacks"]}, (tag, label)
        not_binaries.update("external" in r["spec"] for r in database["installs"].values() if not r["in_buildcache"])
        assert not any("external" in r["spec"] for r in database["installs"].values() if r["in_buildcache"])
    assert not_binaries[True] and not_binaries[False], "externals, and builds of other stacks and tags"


def test_a_hash_has_the_same_record_in_every_index_and_tag(small_corpus, indexes):
    nodes, tags = {}, {}
    for (tag, _), database in indexes.items():
        for spec_hash, record in database["installs"].items():
            assert nodes.setdefault(spec_hash, record["spec"]) == record["spec"], spec_hash
            tags.setdefault(spec_hash, set()).add(tag)
    shared = [h for h, names in tags.items() if len(names) > 1 and "dependencies" in nodes[h]]
    assert len(shared) > 100, "consecutive releases share binaries, with their dependencies"


@pytest.mark.parametrize("shape", SHAPES)
def test_one_dag_per_hash_through_the_whole_history(tmp_path, shape):
    """Releases taken over from earlier point releases (v2025.07.0's too) and snapshot builds kept through a
    quarter: each hash has one record, whose dependencies are in every index that has it."""
    corpus = generate(tmp_path / shape, "--size", "history", "--packages", "3", "--shape", shape)
    nodes, tags = {}, collections.defaultdict(set)
    for tag, _, mirror in mirrors(corpus):
        installs = json.loads(read_index(mirror))["database"]["installs"]
        for spec_hash, record in installs.items():
            assert nodes.setdefault(spec_hash, record["spec"]) == record["spec"], spec_hash
            assert all(edge["hash"] in installs for edge in record["spec"].get("dependencies", []))
            tags[spec_hash].add(tag)
    shared = sum(len(found) > 1 and "dependencies" in nodes[h] for h, found in tags.items())
    assert len(tags) > 3000 and shared > 50, (len(tags), shared)


def rendered_variants(parameters, db_version):
    """The page's variants of a record, by INDEX_RULES: parameters in key order, flags left out."""
    variants = []
    for name, value in parameters.items():
        if name in FLAG_PARAMETERS:
            continue
        if isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true", "false")):
            variants.append(("+" if str(value).lower() == "true" else "~") + name)
        elif isinstance(value, list):
            values = sorted(set(value)) if db_version >= 8 else value
            values = [v[:7] for v in values] if name == "patches" else values
            variants.append(f"{name}:={','.join(values) or '*'}" if db_version >= 8 else f"{name}={','.join(values)}")
        else:
            variants.append(f"{name}={value}")
    return variants


def rendered_compiler(node, installs, db_version):
    """The page's compiler of a record, by INDEX_RULES."""
    if "compiler" in node:
        return f"{node['compiler']['name']}@={node['compiler']['version']}"
    annotations = node.get("annotations", {})
    if annotations.get("original_specfile_version", 5) < 5 and "compiler" in annotations:
        return annotations["compiler"]
    if db_version >= 8:
        for virtual in ("c", "cxx", "fortran"):
            for edge in node.get("dependencies", []):
                if virtual in edge["parameters"]["virtuals"]:
                    compiler = installs[edge["hash"]]["spec"]
                    return f"{compiler['name']}@{compiler['version']}"
    return "none"


def test_records_render_back_to_their_pages_specs(small_corpus, indexes):
    pages = page_specs(small_corpus)
    versions = set()
    for tag, specs in pages.items():
        database = indexes[(tag, "root")]
        db_version = int(database["version"])
        versions.add(db_version)
        installs = database["installs"]
        for spec_hash, (package, spec) in specs.items():
            node = installs[spec_hash]["spec"]
            target = node["arch"]["target"]
            assert {
                "package": node["name"],
                "versions": [node["version"]],
                "os": node["arch"]["platform_os"],
                "platform": node["arch"]["platform"],
                "target": target["name"] if isinstance(target, dict) else target,
                "variants": rendered_variants(node["parameters"], db_version),
                "compiler": rendered_compiler(node, installs, db_version),
            } == {
                "package": package,
                **{key: spec[key] for key in ("versions", "os", "platform", "target", "variants", "compiler")},
            }, (tag, spec_hash)
    assert versions == {7, 8}


def test_pages_are_the_same_without_indexes_and_usual_ones_those_of_earlier_reports(small_corpus, tmp_path):
    out = generate(tmp_path / "pages", "--size", "small", "--shape", small_corpus.name, "--no-indexes")
    assert not (out / "mirrors").exists() and not (out / "cache_spack_io_index.json").exists()
    assert pages_digest(out) == pages_digest(small_corpus)
    assert (pages_digest(out) == USUAL_SMALL_PAGES_SHA256) == (small_corpus.name == "usual")


# --- the dependency DAG, as data -----------------------------------------------------------------------------


def edges_of(installs):
    """{hash: [(dependency hash, deptypes, virtuals)]} of an index."""
    return {
        spec_hash: [
            (edge["hash"], tuple(edge["parameters"]["deptypes"]), tuple(edge["parameters"]["virtuals"]))
            for edge in record["spec"].get("dependencies", [])
        ]
        for spec_hash, record in installs.items()
    }


@pytest.fixture(scope="module")
def develop(indexes):
    """The installs of develop's root index (DB 8) and their edges."""
    installs = indexes[("develop", "root")]["installs"]
    return installs, edges_of(installs)


def test_dependency_chains_run_ten_deep_and_share_subtrees(develop):
    installs, edges = develop

    @functools.cache
    def longest_chain(spec_hash):
        return 1 + max((longest_chain(dependency) for dependency, _, _ in edges[spec_hash]), default=0)

    assert max(map(longest_chain, installs)) >= 10
    dependents = collections.Counter(dependency for spec_edges in edges.values() for dependency, _, _ in spec_edges)
    shared_subtrees = [h for h, n in dependents.items() if n >= 2 and edges[h]]
    assert len(shared_subtrees) > 100


def test_a_few_packages_are_what_most_binaries_need(develop):
    installs, edges = develop
    binaries = [h for h, record in installs.items() if record["in_buildcache"]]
    by_package = collections.Counter(
        installs[dependency]["spec"]["name"]
        for spec_edges in edges.values()
        for dependency, _, _ in spec_edges
        if "external" not in installs[dependency]["spec"]
    )
    (most, count), *_ = by_package.most_common()
    assert count >= len(binaries) / 2, f"{most} is needed by {count} of {len(binaries)} binaries"
    top_three = sum(n for _, n in by_package.most_common(3))
    assert top_three >= 0.25 * by_package.total()
    assert statistics.median(by_package.values()) < count / 5, "and a long tail of less needed ones"


def test_edges_are_build_link_and_run_and_compilers_and_perl_are_externals(develop):
    installs, edges = develop
    kinds = collections.Counter(deptypes for spec_edges in edges.values() for _, deptypes, _ in spec_edges)
    assert {("build",), ("link",), ("run",), ("build", "link"), ("build", "run"), ("build", "link", "run")} <= set(
        kinds
    )
    externals = {h: record["spec"] for h, record in installs.items() if "external" in record["spec"]}
    assert "perl" in {node["name"] for node in externals.values()}
    build_only = collections.Counter(
        "external" if dependency in externals else installs[dependency]["spec"]["name"]
        for spec_edges in edges.values()
        for dependency, deptypes, _ in spec_edges
        if deptypes == ("build",)
    )
    assert len(build_only) > 2 and build_only.most_common(1)[0][1] > 100, "cmake-like build tools, compilers, perl"
    compiler_edges = [
        (installs[dependency]["spec"], virtuals)
        for spec_edges in edges.values()
        for dependency, _, virtuals in spec_edges
        if "c" in virtuals
    ]
    assert compiler_edges and all(node["hash"] in externals for node, _ in compiler_edges)
    assert {virtuals for _, virtuals in compiler_edges} == {("c", "cxx"), ("c", "cxx", "fortran")}


def test_a_db7_index_names_compilers_in_its_nodes_not_as_edges(indexes):
    installs = indexes[("v0.23.0", "root")]["installs"]
    assert all(
        "c" not in edge["parameters"]["virtuals"]
        for record in installs.values()
        for edge in record["spec"].get("dependencies", [])
    )


def cube_cells(corpus):
    """{(tag, os, target, compiler, stacks)} of the binaries, and {(tag, stack): {(os, target, compiler)}}."""
    cells, per_stack = set(), collections.defaultdict(set)
    for tag, specs in page_specs(corpus).items():
        for _, spec in specs.values():
            cells.add((tag, spec["os"], spec["target"], spec["compiler"], tuple(sorted(spec["stacks"]))))
            for stack in spec["stacks"]:
                per_stack[(tag, stack)].add((spec["os"], spec["target"], spec["compiler"]))
    return cells, per_stack


def test_the_spread_shape_spreads_binaries_over_stack_sets_and_environments(small_corpus):
    binaries = sum(len(specs) for specs in page_specs(small_corpus).values())
    cells, per_stack = cube_cells(small_corpus)
    combinations = statistics.median(len(environments) for environments in per_stack.values())
    if small_corpus.name == "spread":
        assert len(cells) > binaries / 2 and combinations >= 10
    else:
        assert len(cells) < binaries / 10 and combinations <= 2


PAGE_SECTIONS = ["### Full build", "### Database size", "### Incremental builds", "### Served pages"]
SECTIONS = [
    "## Targets",
    "## Machine",
    "## Corpora",
    "## Pages, usual shape",
    *PAGE_SECTIONS,
    "## Pages, spread shape",
    *PAGE_SECTIONS,
    "## History built from its indexes",
    "### Full build",
    "### Database size and dependency edges",
    "### Unchanged rebuild and the busy tag",
    "### Served pages",
    "### Dependency questions",
]
FACETS = ["tag", "os", "target", "compiler", "stacks"]
FACET_CLICKS = [
    *FACETS,
    *(f"{facet}, fewest" for facet in FACETS),
    "stack, os and compiler",
    "package",
    "search",
    "broad search",
    *(f"broad search, {facet}" for facet in FACETS),
]
CLICK_CONDITIONS = {  # what a click's arguments ask of the binaries view, in SQL: its row count must be theirs
    "_search": "listing_id IN (SELECT rowid FROM listings_fts WHERE listings_fts MATCH :_search)",
    "stacks__arraycontains": ":stacks__arraycontains IN (SELECT value FROM json_each(stacks))",
    **{column: f"{column} = :{column}" for column in ("tag", "os", "target", "compiler", "package")},
}


def arguments_of(address):
    return {name: value for name, (value,) in urllib.parse.parse_qs(urllib.parse.urlsplit(address).query).items()}


def click_count(conn, address):
    """The rows of the binaries view a click's page holds, counted with SQL."""
    arguments = arguments_of(address)
    if "_search" in arguments:
        arguments["_search"] = escape_fts(arguments["_search"])
    where = " AND ".join(CLICK_CONDITIONS[name] for name in arguments)
    return conn.execute(f"SELECT count(*) FROM binaries WHERE {where}", arguments).fetchone()[0]


BUILD_TARGETS = [
    "Full build / lower bound (orjson), wall",
    "Peak RSS of a full build (builder and writer)",
    "Unchanged rebuild / full build",
    "Unchanged rebuild writes nothing (inode, bytes, mtime, content)",
]
PAGES_TARGETS = [
    *BUILD_TARGETS,
    "Size per binary (cache.db bytes / binaries)",
    "Adding a tag beyond a plain copy / that tag alone",
    "Adding a tag: pages and binaries add up",
    "Removing that tag again beyond a plain copy / that tag alone",
    "Removing that tag: row counts as before it was added",
    "`/cache/binaries`, p95",
]
INDEXES_TARGETS = [
    *BUILD_TARGETS,
    "Bytes per dependency edge (edge tables and their indexes / edges)",
    "Peak RSS building one busy tag from its indexes",
    "Binaries from indexes = binaries from pages",
    "`/cache/binaries`, p95",
]


def table_rows(markdown):
    """Cells of the Markdown table rows in markdown, header included, separator left out."""
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("| ")
    ]


def section(report, heading, after=None):
    """The text under heading (the first one after the heading `after`, if given) up to the next heading."""
    if after is not None:
        report = report.split(after + "\n", 1)[1]
    return report.split(heading + "\n", 1)[1].split("\n#", 1)[0]


def answered(timing):
    """200, or Datasette's time limit: a smoke test asserts no timing, but nothing may fail otherwise."""
    return all(status == 200 or (status == 400 and "took too long" in timing["error"]) for status in timing["statuses"])


def check_served(serving, db, binaries):
    assert serving["binaries_page"]["statuses"] == [200]
    assert serving["binaries_page"]["row_count"] == binaries
    clicks = serving["facet_clicks"]
    assert [click["name"] for click in clicks] == FACET_CLICKS
    conn = sqlite3.connect(db)
    for click in clicks:
        assert click["statuses"] == [200], click
        assert click["row_count"] == click_count(conn, click["url"]), click
        search = arguments_of(click["url"]).get("_search")
        if search is None:
            assert "full_text" not in click, click
            continue
        matched = conn.execute(
            "SELECT count(*) FROM listings_fts WHERE listings_fts MATCH ?", [escape_fts(search)]
        ).fetchone()[0]
        found = click["full_text"]
        assert (found["search"], found["table"], found["rows"]) == (search, "listings_fts", matched), click
    for facet in FACETS:  # the value with the fewest binaries, of all the facet's values
        (fewest,) = (click["row_count"] for click in clicks if click["name"] == f"{facet}, fewest")
        least = conn.execute(
            "SELECT min(binaries) FROM binaries_facet_counts WHERE facet = ? AND value <> 'root'", [facet]
        ).fetchone()[0]
        assert fewest == least, facet
    conn.close()
    narrow, broad = (click["row_count"] for click in clicks if click["name"] in ("search", "broad search"))
    assert 0 < narrow <= broad <= binaries
    assert all(0 < click["row_count"] <= broad for click in clicks if click["name"].startswith("broad search, "))
    assert serving["count_time_limit_ms"] == 900  # Datasette's default sql_time_limit_ms less half facet_time_limit_ms
    queries = yaml.safe_load((ROOT / "metadata.yml").read_text())["databases"]["cache"]["queries"]
    every_tag = [
        f"tag=*, stack={stack}, os={os_name}: {label}"
        for label, (stack, os_name) in benchmark_module("inspect_db").stack_and_os_pairs(db).items()
    ]
    assert every_tag  # the pair with the fewest binaries, and one with none where some stack lacks an os
    every_tag.append(f"tag=*, package={serving['parameters']['package']}: realistic")
    assert {(t["query"], t["parameters"]) for t in serving["canned_queries"]} == {
        (name, parameters) for name in queries for parameters in ("empty", "realistic")
    } | {("find_binaries", parameters) for parameters in every_tag}
    assert all(map(answered, serving["canned_queries"])), serving["canned_queries"]


def check_dependency_questions(serving, db):
    conn = sqlite3.connect(db)
    counted = conn.execute(
        "SELECT dependency, count(*) FROM dependencies WHERE NOT external GROUP BY dependency ORDER BY 2 DESC, 1"
    ).fetchall()
    subjects = serving["dependency_subjects"]
    assert [n for _, n in subjects["packages"]] == [n for _, n in counted[:3]]
    assert subjects["external"][0] in {
        name for (name,) in conn.execute("SELECT dependency FROM dependencies WHERE external")
    }
    edges = dict(counted)  # the next 37 by edges (ties in any order), never one asked about already
    assert not set(subjects["candidates"]) & {name for name, _ in subjects["packages"]}
    assert sorted((edges[name] for name in subjects["candidates"]), reverse=True) == [n for _, n in counted[3:40]]
    slowest = subjects["slowest"]
    assert set(slowest["json_ms"]) == set(subjects["candidates"])
    assert slowest["json_ms"][slowest["package"]] == max(slowest["json_ms"].values())
    tree = subjects["tree"]
    assert tree["tree_size"] > 1 and conn.execute("SELECT 1 FROM binaries WHERE hash = ?", (tree["hash"],)).fetchone()
    questions = serving["dependency_questions"]
    assert [q["question"] for q in questions] == (
        ["dependents"] * 10 + ["dependency_tree"] + ["dependencies"] * 2 + ["find_binaries"] * 3
    )
    assert [q["url"] for q in questions[13:]] == [
        "/cache/find_binaries?" + urllib.parse.urlencode({"spec": f"^{name}"})
        for name in (subjects["packages"][0][0], subjects["external"][0], serving["parameters"]["package"])
    ]
    assert {q["url"] for q in questions[8:10]} == {
        f"/cache/dependents?package={slowest['package']}",
        f"/cache/dependents?package={slowest['package']}&tag=develop",
    }
    assert all(map(answered, questions)), questions
    assert [q["as_json"]["url"] if "as_json" in q else None for q in questions] == [
        q["url"].replace("?", ".json?", 1) if q["kind"] == "canned" else None for q in questions
    ]
    assert all(q["as_json"]["statuses"] == [200] for q in questions if q["kind"] == "canned")
    for question in questions[11:13]:
        ((column, value),) = urllib.parse.parse_qsl(urllib.parse.urlsplit(question["url"]).query)
        sql = f"SELECT count(*) FROM dependencies WHERE {column} = ?"
        assert question["row_count"] == conn.execute(sql, (value,)).fetchone()[0]
    conn.close()


def test_small_benchmark_reports_every_target_on_both_shapes_and_the_indexes(tmp_path):
    results, work = tmp_path / "results", tmp_path / "work"
    command = [
        sys.executable, str(ROOT / "benchmarks" / "run.py"), "--size", "small", "--runs", "1", "--index-runs", "2",
        "--requests", "1", "--work", str(work), "--results", str(results), "--name", "smoke",
    ]  # fmt: skip
    finished = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]

    report = (results / "smoke.md").read_text()
    assert finished.stdout.strip() == report.strip()
    headings = [line for line in report.splitlines() if line.startswith("#") and not line.startswith("# ")]
    assert headings == SECTIONS

    data = json.loads((results / "smoke.json").read_text())
    for shape, pages in data["pages"].items():
        db = work / f"pages-{shape}" / "cache.db"
        check_served(pages["serving"], db, pages["database"]["counts"]["binaries"])
        assert pages["full_build"]["builder"]["peak_rss_mib"] > 0
        assert pages["unchanged_rebuild"]["wrote_nothing"] and pages["add_tag"]["counts_add_up"]
        assert pages["add_tag"]["removed_as_before"] and pages["add_tag"]["remove_tag"]["wall_s"] > 0
        assert pages["add_tag"]["copy_s"] > 0 and pages["add_tag"]["warm_up_s"] > 0
        incremental = section(report, "### Incremental builds", after=f"## Pages, {shape} shape")
        assert f"| one addition first, untimed | {pages['add_tag']['warm_up_s']:.2f} s |" in incremental
        largest = dict(pages["database"]["largest"])
        assert largest and sum(largest.values()) <= pages["database"]["bytes"]
        kinds = pages["database"]["by_kind"]
        assert min(kinds.values()) > 0 and sum(kinds.values()) <= pages["database"]["bytes"]
        binaries, size_text = (
            pages["database"]["counts"]["binaries"],
            section(report, "### Database size", after=f"## Pages, {shape} shape"),
        )
        added_up = re.search(
            r"added up by kind of object \(dbstat\): rows (\d+) .*?, with the full-text indexes (\d+) ", size_text
        )
        assert added_up and [int(figure) for figure in added_up.groups()] == [
            round(kinds["rows"] / binaries),
            round((kinds["rows"] + kinds["full-text indexes"]) / binaries),
        ]
        served_text = section(report, "### Served pages", after=f"## Pages, {shape} shape")
        for click in pages["serving"]["facet_clicks"]:
            if "full_text" in click:
                found = click["full_text"]
                assert f"`?_search={found['search']}`: {found['rows']:,} rows" in served_text
        shown = table_rows(served_text)
        counts = [row[6] for row in shown if row[0] in FACET_CLICKS and row[1].startswith("`/cache/binaries")]
        assert counts == [f"{click['row_count']:,}" for click in pages["serving"]["facet_clicks"]]
        check_floors(pages, data["inputs"][f"corpus-{shape}"]["path"], report, shape)
    assert list(data["pages"]) == ["usual", "spread"]

    indexes = data["indexes"]
    assert "write_floor" not in indexes["full_build"]
    assert [len(data["pages"][shape]["full_build"]["builder"]["runs"]) for shape in data["pages"]] == [1, 1]
    assert len(indexes["full_build"]["builder"]["runs"]) == len(indexes["big_tag"]["runs"]) == 2
    assert "Medians of 1 full builds from pages and 2 from indexes each" in section(report, "## Targets")
    assert "2 runs each, builder and lower bound" in section(
        report, "### Full build", after="## History built from its indexes"
    )
    db = work / "indexes" / "cache.db"
    assert indexes["binaries"] == indexes["page_binaries"] == data["pages"]["usual"]["database"]["counts"]["binaries"]
    assert indexes["big_tag"]["peak_rss_mib"] > 0 and indexes["unchanged_rebuild"]["wrote_nothing"]
    edges = indexes["edges"]
    conn = sqlite3.connect(db)
    assert edges["edges"] == conn.execute("SELECT count(*) FROM dependencies").fetchone()[0] > 1000
    conn.close()
    assert edges["objects"] and 0 < edges["bytes"] < indexes["database"]["bytes"]
    check_served(indexes["serving"], db, indexes["binaries"])
    check_dependency_questions(indexes["serving"], db)
    asked = table_rows(section(report, "### Dependency questions"))
    assert asked[0][6] == "as JSON median / p95 ms"
    canned = [q["kind"] == "canned" for q in indexes["serving"]["dependency_questions"]]
    assert [bool(row[6]) for row in asked[1:]] == canned and any(canned)

    rows = table_rows(section(report, "## Targets"))[1:]
    assert {row[4] for row in rows} <= {"met", "**missed**", "not measured"}
    names = collections.defaultdict(list)
    for corpus, name, *_ in rows:
        names[corpus].append(name)
    served = 1 + len(FACET_CLICKS)  # the binaries page and each click
    for corpus in ("pages, usual shape", "pages, spread shape"):
        assert set(PAGES_TARGETS) <= set(names[corpus]) and len(names[corpus]) == len(PAGES_TARGETS) + served
    dependency_questions = len(indexes["serving"]["dependency_questions"])
    assert (
        set(INDEXES_TARGETS) <= set(names["indexes"])
        and len(names["indexes"]) == len(INDEXES_TARGETS) + served + dependency_questions
    )


def check_floors(pages, corpus, report, shape):
    """The write floor beside the full build, the unchanged-input floor beside adding a tag: measured, with
    their ratios, and in the report (its targets and the shape's sections)."""
    full = pages["full_build"]
    floor = full["write_floor"]
    steps = {"schema", "indexes after the load", "full-text indexes", "commit and sync"}
    assert set(LOAD_ORDER) | steps == set(floor["parts"])
    assert floor["seconds"] > 0 and len(floor["runs_s"]) == 1
    assert floor["ratio_wall"] == floor["seconds"] / full["lower_bound"]["wall_s"]
    added = pages["add_tag"]
    unchanged = added["unchanged_floor"]
    assert unchanged["files"] == len(find_inputs([corpus]).files) > 0
    assert set(unchanged["parts"]) == {"walk", "recorded identities", "stat and compare"}
    assert added["floor_ratio"] == unchanged["seconds"] / added["tag_alone"]["wall_s"]
    without = (added["beyond_copy_s"] - unchanged["seconds"]) / added["tag_alone"]["wall_s"]
    assert without < added["ratio_wall"]

    targets = {row[1]: row[2] for row in table_rows(section(report, "## Targets")) if row[0] == f"pages, {shape} shape"}
    assert f"writing its rows alone (floor) {floor['ratio_wall']:.2f}x" in targets[BUILD_TARGETS[0]]
    assert f"{without:.2f}x without finding {unchanged['files']:,} files unchanged" in targets[PAGES_TARGETS[5]]
    removal_without = (added["remove_beyond_copy_s"] - unchanged["seconds"]) / added["tag_alone"]["wall_s"]
    assert f"{removal_without:.2f}x without finding {unchanged['files']:,} files unchanged" in targets[PAGES_TARGETS[7]]
    build_section = section(report, "### Full build", after=f"## Pages, {shape} shape")
    assert f"**{floor['ratio_wall']:.2f}x** the lower bound" in build_section
    pages_bytes = sum(page.stat().st_size for page in benchmark_module("lower_bound").page_paths(Path(corpus)))
    assert full["warmed"]["bytes"] == pages_bytes > 0  # every page read before the timed runs
    assert f"every page was read once, untimed ({pages_bytes / 1e6:,.0f} MB in" in build_section
    largest = table_rows(build_section)[4:]  # after the runs' table (header and two rows) and its own header
    assert largest and {row[0].strip("`") for row in largest} <= set(floor["parts"])
    incremental = section(report, "### Incremental builds", after=f"## Pages, {shape} shape")
    assert f"costs **{without:.2f}x** building that tag alone, and removing it again **{removal_without:.2f}x**" in (
        incremental
    )
    assert f"the corpus's {unchanged['files']:,} files found unchanged (floor)" in incremental


def benchmark_module(name):
    """A module of benchmarks/, imported as run.py imports its neighbours."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    return importlib.import_module(name)


@pytest.mark.parametrize(
    ("built_s", "bound_s", "said"),
    [
        ([88.8, 115.2, 103.0], [39.2, 50.5, 38.8], "2.27, 2.28, 2.65x (median 2.28x)"),
        ([80.0, 60.0], [40.0, 40.0], "2.00, 1.50x (median 1.75x)"),
        ([81.2], [36.0], None),
    ],
)
def test_the_report_gives_each_builds_ratio_to_the_lower_bound_run_after_it(built_s, bound_s, said):
    """Medians of builder and lower bound apart (the target) can pair a slow spell of one with a quick one of the
    other: each pair's own ratio is given beside them, in the order they ran."""
    full = {
        "builder": {"runs": [{"wall_s": seconds} for seconds in built_s]},
        "lower_bound": {"runs": [{"wall_s": seconds} for seconds in bound_s]},
    }
    sentence = benchmark_module("report").run_ratios_sentence(full)
    if said is None:
        assert sentence == ""
    else:
        assert sentence == f"Each build against the lower bound run after it: {said}. "


@pytest.mark.parametrize(
    ("adding", "removing", "said"),
    [
        ((2.3, 3.7), (2.0, 3.3), ["For adding and removing, this floor is what keeps the ratio over the 1.5x target."]),
        (
            (2.1, 5.6),
            (1.3, 3.5),
            ["For adding, the ratio is still over the 1.5x target without it: the rest is the build's own."],
        ),
        (
            (2.3, 3.7),
            (2.0, 5.6),
            [
                "For adding, this floor is what keeps the ratio over the 1.5x target.",
                "For removing, the ratio is still over the 1.5x target without it: the rest is the build's own.",
            ],
        ),
        ((1.4, 2.3), (1.2, 2.0), []),
    ],
)
def test_the_report_says_what_keeps_adding_and_removing_a_tag_over_the_target(adding, removing, said):
    """Each change's (ratio, seconds beyond the copy), with a floor of 1.6 s and the tag alone in 1.65 s: one
    sentence per verdict, naming every change it is said of."""
    (added_ratio, added_s), (removed_ratio, removed_s) = adding, removing
    added = {
        "ratio_wall": added_ratio,
        "beyond_copy_s": added_s,
        "remove_ratio_wall": removed_ratio,
        "remove_beyond_copy_s": removed_s,
        "unchanged_floor": {"seconds": 1.6},
        "tag_alone": {"wall_s": 1.65},
    }
    assert benchmark_module("report").floor_verdicts(added) == said


@pytest.mark.parametrize(("beyond_copy_s", "ratio", "met"), [(2.0, 1.2, True), (3.0, 1.8, False), (-0.3, -0.2, None)])
def test_a_change_that_took_no_longer_than_the_plain_copy_is_not_priced(beyond_copy_s, ratio, met):
    """A change measured beyond a plain copy of the database: where the copy alone took as long or longer, the
    ratio says nothing of the change, and the target is not measured rather than met."""
    report = benchmark_module("report")
    added = {
        "add_tag": {"wall_s": 5.0},
        "copy_s": 5.0 - beyond_copy_s,
        "beyond_copy_s": beyond_copy_s,
        "ratio_wall": ratio,
        "tag_alone": {"wall_s": 1.65},
        "unchanged_floor": {"seconds": 1.4, "files": 90000},
        "floor_ratio": 0.85,
    }
    assert report.change_met(added, report.ADDING) is met
    assert ("not priced" in report.change_text(added, report.ADDING)) == (met is None)


@pytest.mark.parametrize(("added_s", "removed_s", "explained"), [(2.06, 1.35, True), (1.7, 1.6, False)])
def test_a_ratio_without_the_floor_below_0_is_explained(added_s, removed_s, explained):
    """Seconds beyond the copy, with a floor of 1.6 s: under it, the ratio without the floor is below 0."""
    added = {"beyond_copy_s": added_s, "remove_beyond_copy_s": removed_s, "unchanged_floor": {"seconds": 1.6}}
    said = benchmark_module("report").overlap_sentence(added | {"tag_alone": {"wall_s": 1.65}})
    assert bool(said) == explained and all(sentence.startswith("Below 0:") for sentence in said)


@pytest.fixture(scope="module")
def floors():
    return benchmark_module("floors")


def row_counts(db, tables):
    conn = sqlite3.connect(db)
    try:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in tables}
    finally:
        conn.close()


@pytest.mark.parametrize("built", ["cache_db", "index_db"])
def test_the_write_floor_writes_every_row_of_the_built_database_into_its_schema(floors, built, request, tmp_path):
    db, copy = request.getfixturevalue(built), tmp_path / "floor.db"
    measured = floors.write_floor(db, copy)
    assert measured["bytes"] == copy.stat().st_size and measured["seconds"] >= sum(measured["parts"].values()) * 0.99
    assert row_counts(copy, LOAD_ORDER) == row_counts(db, LOAD_ORDER)
    edges = row_counts(copy, ["spec_dependencies"])["spec_dependencies"]
    assert (edges > 0) == (built == "index_db")
    conn = sqlite3.connect(copy)
    try:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        check_full_text(conn)
        (token,) = conn.execute("SELECT name FROM packages ORDER BY id LIMIT 1").fetchone()
        found = conn.execute("SELECT count(*) FROM listings_fts WHERE listings_fts MATCH ?", (f'"{token}"',)).fetchone()
        assert found[0] > 0, "the full-text index was rebuilt"
    finally:
        conn.close()


def test_a_write_floor_of_a_wrong_list_of_tables_fails(floors, cache_db, tmp_path):
    left_out = [table for table in LOAD_ORDER if table != "tag_version_counts"]
    with pytest.raises(floors.FloorError, match=r"not copied: \['tag_version_counts'\]"):
        floors.write_floor(cache_db, tmp_path / "floor.db", tables=left_out)
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):  # children before their parents
        floors.write_floor(cache_db, tmp_path / "floor.db", tables=LOAD_ORDER[::-1])


def test_the_unchanged_floor_finds_every_file_of_the_build_unchanged_and_nothing_else(floors, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(SITE, site)
    db = tmp_path / "cache.db"
    build([site], db)
    measured = floors.unchanged_floor(db, [site])
    assert measured["files"] == len(find_inputs([site]).files) > 10
    assert list(measured["parts"]) == ["recorded identities", "walk", "stat and compare"]
    page = next(site.glob("_cache/*/*/specs.md"))
    with pytest.raises(floors.FloorError, match=r"0 to read, 0 touched, [1-9]\d* gone"):  # one tag of its inputs
        floors.unchanged_floor(db, [page.parent.parent])
    os.utime(page, ns=(page.stat().st_atime_ns, page.stat().st_mtime_ns + 10**9))
    with pytest.raises(floors.FloorError, match="0 to read, 1 touched, 0 gone"):
        floors.unchanged_floor(db, [site])
    page.write_text(page.read_text() + "\n")
    with pytest.raises(floors.FloorError, match="1 to read, 0 touched, 0 gone"):
        floors.unchanged_floor(db, [site])
    stopped = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "floors.py"), "unchanged", str(db), str(site)],
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    assert stopped.returncode != 0 and stopped.stderr.strip().splitlines() == [
        f"floors.py unchanged: {db}: expected every file of {site} as its build read it; 1 to read, 0 touched, 0 gone,"
        f" of {measured['files']}"
    ]


def test_the_benchmark_serves_the_database_as_the_readme_says():
    SERVE_COMMAND = benchmark_module("serve").SERVE_COMMAND

    readme = (ROOT / "README.md").read_text()
    readme_lines = [line.strip() for line in readme.splitlines()]
    with_metadata = " ".join(SERVE_COMMAND).replace(" -i cache.db", " -i cache.db -m metadata.yml")
    assert with_metadata in readme_lines, "the README's 'Browsing with Datasette' command"
    assert "Plain `datasette -i cache.db`, whatever the file is called, gives the same" in readme


def test_peak_memory_counts_the_builders_child_processes():
    run_measured = benchmark_module("measure").run_measured

    holds_80_mib = "b = bytearray(80 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1)"
    parent_and_child = (
        "import multiprocessing, time\n"
        f"def hold():\n    {holds_80_mib}\n"
        "if __name__ == '__main__':\n"
        "    child = multiprocessing.Process(target=hold); child.start()\n"
        f"    {holds_80_mib}\n"
        "    child.join()\n"
    )
    measured = run_measured([sys.executable, "-c", parent_and_child])
    assert measured["peak_rss_kib"] >= 160 << 10


class SlowPage(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        time.sleep(2)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_page_that_does_not_answer_in_time_is_recorded_as_a_missed_target_not_waited_for():
    table_page_target = benchmark_module("report").table_page_target
    serve = benchmark_module("serve")
    TIMED_OUT, Client, time_url = serve.TIMED_OUT, serve.Client, serve.time_url

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowPage)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        timing = time_url(Client(server.server_address[1], timeout=0.2), "/cache/binaries", requests=20)
        assert time.monotonic() - started < 1, "asked once, not 21 times"
    finally:
        server.shutdown()
        server.server_close()
    assert timing["statuses"] == [TIMED_OUT] and timing["requests"] == 1 and timing["row_count"] is None
    missed = table_page_target("pages, usual shape", "`/cache/binaries`, p95", timing, 500, 200)
    assert missed["met"] is False and "timed out" in missed["value"]


def test_a_search_without_its_row_count_names_what_the_full_text_index_alone_costs():
    table_page_target = benchmark_module("report").table_page_target

    timing = {"p95_ms": 969.0, "row_count": None, "statuses": [200]}
    found = {"table": "listings_fts", "rows": 3276041, "ms": 412.0}
    missed = table_page_target("pages, spread shape", "Click `?_search=ubuntu22.04`, p95", timing, 1000, 200)
    assert missed["met"] is False and "full-text" not in missed["value"]
    missed = table_page_target("pages, spread shape", "x", {**timing, "full_text": found}, 1000, 200)
    assert missed["met"] is False
    assert missed["value"].endswith(
        "3,276,041 rows of `listings_fts` in 412.0 ms, where a row count may take up to 200 ms"
    )
    counted = table_page_target("pages, usual shape", "x", {**timing, "row_count": 5, "full_text": found}, 1000, 200)
    assert counted["met"] is True and "full-text" not in counted["value"]


def test_a_page_counted_in_some_answers_only_says_how_many_and_misses():
    table_page_target = benchmark_module("report").table_page_target

    timing = {"p95_ms": 880.0, "row_count": None, "statuses": [200]}
    for counted, words in (("15 of 21", "a row count in 15 of 21 answers"), ("0 of 21", "no row count")):
        missed = table_page_target("pages, spread shape", "x", {**timing, "counted": counted}, 1000, 200)
        assert missed["met"] is False and missed["value"] == f"880 ms, {words}"


def test_the_slowest_dependents_are_found_once_the_query_is_prepared_on_every_connection():
    """The first question on each of Datasette's connections prepares the query: those slow answers must go to
    the warm-ups, not to whichever candidates come first."""
    run = benchmark_module("run")

    class Client:  # Datasette's three connections, each slow on its first question, answering in turn
        def __init__(self):
            self.asked = []

        def get(self, path):
            self.asked.append(path)
            prepared = len(self.asked) > 3
            return 200, "", (5 if "first" in path else 10) + (0 if prepared else 1000)

    client = Client()
    slowest = run.slowest_dependents(client, ["first", "second"])
    assert slowest["package"] == "second"
    assert slowest["json_ms"] == {"first": 5, "second": 10}
    assert len(client.asked) == run.DEPENDENTS_WARM_UPS + 2 * 2


def test_a_history_without_externals_is_asked_its_dependency_questions():
    """No external has edges pointing at it: its questions are left out, the others asked."""
    subjects = {
        "packages": [("zlib", 9), ("xz", 5)],
        "external": None,
        "slowest": {"package": "bzip2"},
        "candidates": ["bzip2"],
        "tree": {"hash": "abcdefg"},
    }
    questions = benchmark_module("run").dependency_questions(subjects, {"tag": "develop", "package": "cit"})
    assert [url for question, _, url, _ in questions if question == "find_binaries"] == [
        "/cache/find_binaries?spec=%5Ezlib",
        "/cache/find_binaries?spec=%5Ecit",
    ]
    assert not [url for _, subject, url, _ in questions if "external" in subject]


def test_the_saved_report_is_what_its_results_render_to(tmp_path):
    """results/history.md is what run.py --render writes from history.json with this code's report.py: a change
    to the report, or an edit of the saved report by hand, fails here until the run is rendered again."""
    saved = ROOT / "benchmarks" / "results"
    command = [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--render", str(saved / "history.json")]
    finished = subprocess.run(
        [*command, "--results", str(tmp_path)], check=False, capture_output=True, text=True, timeout=60
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert (tmp_path / "history.md").read_text() == (saved / "history.md").read_text()
    assert json.loads((tmp_path / "history.json").read_text()) == json.loads((saved / "history.json").read_text())


@pytest.mark.parametrize("saved", ["missing.json", "not.json", "other.json", "partial.json", "list.json"])
def test_rendering_what_is_no_saved_run_says_so_in_one_line(tmp_path, saved):
    (tmp_path / "not.json").write_text("# a report, not its results\n")
    (tmp_path / "other.json").write_text('{"name": "history"}\n')
    (tmp_path / "partial.json").write_text('{"name": "history", "machine": {}, "pages": {}}\n')
    (tmp_path / "list.json").write_text("[1, 2]\n")
    command = [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--render", str(tmp_path / saved)]
    finished = subprocess.run(
        [*command, "--results", str(tmp_path / "out")], check=False, capture_output=True, text=True, timeout=60
    )
    assert finished.returncode == 1
    assert finished.stderr.startswith(f"{tmp_path / saved}: expected a run's results JSON")
    assert finished.stderr.count("\n") == 1 and not (tmp_path / "out").exists()


def test_the_insert_order_benchmark_writes_the_same_rows_in_either_order(tmp_path):
    """insert_order.py compares two orders of one batch's specs: both must give each page and each spec the same
    rows, the one numbered as the writer numbers them."""
    insert_order = benchmark_module("insert_order")
    hashes = [spack_hash(n) for n in range(250)]
    facts = {}
    for ordered in (False, True):
        path = tmp_path / f"{ordered}.db"
        seconds = insert_order.write_batches(path, hashes, 100, ordered)
        assert set(seconds) == {"specs", "page_specs", "spec_dependencies"}
        with contextlib.closing(sqlite3.connect(path)) as conn:
            numbered = [h for (h,) in conn.execute("SELECT hash FROM specs ORDER BY id")]
            facts[ordered] = conn.execute(
                "SELECT page_id, position, hash FROM page_specs JOIN specs ON specs.id = spec_id ORDER BY 1, 2"
            ).fetchall()
            edges = conn.execute(
                "SELECT hash, dependency_id FROM spec_dependencies JOIN specs ON specs.id = spec_id ORDER BY 1, 2"
            ).fetchall()
            assert edges == sorted((h, d) for n, h in enumerate(hashes) for d in insert_order.dependencies(n))
        batches = [hashes[start : start + 100] for start in range(0, len(hashes), 100)]
        assert numbered == [h for batch in batches for h in (sorted(batch) if ordered else batch)]
    assert facts[True] == facts[False] and [h for _, _, h in facts[False]] == hashes
    printed = run_benchmark("insert_order.py", "--hashes", 300, "--batch", 100, "--runs", 1, "--work", tmp_path).stdout
    assert set(json.loads(printed)["cpu seconds"]) == {"listed", "hash order"}


@pytest.mark.parametrize(
    "rows, full_text, indexes, said",
    [
        (70, 5, 80, "within the target."),
        (100, 10, 80, "the indexes take it over the 160-byte target. Without them, the rest take 110 bytes, within."),
        (100, 85, 50, "the full-text indexes take it over the 160-byte target. Without them, the rest take 150 bytes, within."),
        (104, 85, 98, "the full-text indexes take it over the 160-byte target. Without them, the rest take 202 bytes, still over."),
    ],
)  # fmt: skip
def test_the_size_floor_says_whether_leaving_out_what_takes_it_over_would_meet_the_target(
    rows, full_text, indexes, said
):
    report = benchmark_module("report")
    database = {
        "counts": {"binaries": 1000},
        "by_kind": {"rows": rows * 1000, "full-text indexes": full_text * 1000, "indexes": indexes * 1000},
    }
    sentence = report.size_floor_sentence(database)
    assert sentence.startswith(f"Bytes per binary added up by kind of object (dbstat): rows {rows} ")
    assert sentence.endswith(f": {said}")


def run_benchmark(script, *arguments, check=True):
    """benchmarks/<script> run as its docstring says, with this checkout's code on PYTHONPATH."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *map(str, arguments)],
        check=check, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@pytest.fixture
def built_database(cache_db, tmp_path):
    """A copy of the session's built database (conftest.cache_db), for a test to change."""
    database = tmp_path / "cache.db"
    shutil.copyfile(cache_db, database)
    return database


def test_the_recount_benchmark_times_each_statement_of_a_recount_and_leaves_the_database_as_it_was(built_database):
    database = built_database
    before = database.read_bytes()
    measured = json.loads(run_benchmark("recount.py", database, "--tags", 2).stdout)
    timed = {entry["statement"] for entry in measured["statements"]}
    assert measured["tags"] == 2 and measured["seconds a tag"] > 0
    assert {" ".join(statement.split())[:100] for statement in RECOUNT_TAGS} <= timed
    assert abs(sum(entry["share"] for entry in measured["statements"]) - 1) < 0.01
    assert database.read_bytes() == before
    with contextlib.closing(sqlite3.connect(database)) as conn:
        conn.execute("DELETE FROM tags")
        conn.commit()
    emptied = run_benchmark("recount.py", database, check=False)
    assert emptied.returncode == 1
    assert emptied.stderr == f"{database}: expected a database with tags (its tags table is empty)\n"


def test_the_after_load_benchmark_makes_the_indexes_again_both_ways_in_a_copy_and_leaves_the_database_as_it_was(
    built_database,
):
    database = built_database
    before = database.read_bytes()
    with contextlib.closing(sqlite3.connect(":memory:")) as empty:
        create_schema(empty)
        declared = {name for (name,) in empty.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}
    with contextlib.closing(sqlite3.connect(database)) as conn:
        built = {name for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}
    measured = json.loads(run_benchmark("after_load.py", database, "--runs", 2).stdout)
    assert measured["indexes"] == sorted(built - declared) != []
    for way in ("one thread", "every core"):
        runs = measured[way]["runs"]
        assert len(runs) == 2 and all(seconds >= 0 for seconds in runs)
        assert abs(measured[way]["median"] - statistics.median(runs)) <= 0.01  # of the seconds before rounding
    assert database.read_bytes() == before
    assert sorted(database.parent.iterdir()) == [database]  # the copy is gone
    with contextlib.closing(sqlite3.connect(database)) as conn:
        conn.execute("DROP INDEX specs_by_configuration")
    refused = run_benchmark("after_load.py", database, check=False)
    assert refused.returncode == 1
    assert (
        refused.stderr
        == f"{database}: expected a database built by build_db.py (it lacks index specs_by_configuration)\n"
    )
    assert sorted(database.parent.iterdir()) == [database]


def test_the_pipeline_benchmark_times_both_sides_of_the_pipe_of_one_build_and_keeps_nothing(tmp_path):
    measured = json.loads(run_benchmark("pipeline.py", SITE, "--work", tmp_path).stdout)
    assert set(measured) == {
        "wall seconds",
        "reader blocked handing batches over",
        "writer waiting for batches",
        "reader cpu seconds, finishing included",
        "writer cpu seconds",
    }
    assert measured["writer cpu seconds"] > 0 and measured["reader cpu seconds, finishing included"] > 0
    assert 0 <= measured["writer waiting for batches"] <= measured["wall seconds"]
    assert 0 <= measured["reader blocked handing batches over"] <= measured["wall seconds"]
    assert list(tmp_path.iterdir()) == []
