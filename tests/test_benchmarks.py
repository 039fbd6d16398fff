"""The benchmark's synthetic corpus and its runner.

The generator's build-cache indexes are checked as files (hashes, manifests, blobs, the index of mirrors)
and as data: each record is rendered back with a re-implementation, here, of the rules the builder's
index reader follows (the lead's INDEX_RULES), and must give exactly its page's spec. benchmarks/run.py
runs on the small corpus as a smoke test: every section is there and every URL answered 200. No timing
is asserted: CI machines are too noisy for that.
"""

import gzip
import hashlib
import json
import sqlite3
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "benchmarks" / "generate_corpus.py"
FLAG_PARAMETERS = {"cflags", "cppflags", "cxxflags", "fflags", "ldflags", "ldlibs"}
MIRROR_PARTS = {"build_cache", "v3", "blobs"}  # folders of a mirror's layout, not stack mirrors


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus") / "small"
    subprocess.run([sys.executable, str(GENERATOR), str(out), "--size", "small"], check=True, capture_output=True)
    return out


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
    """The mirror's index as Spack's reader would find it: through the v2 or the v3 layout."""
    v2 = mirror / "build_cache" / "index.json"
    if v2.exists():
        return json.loads(v2.read_bytes())
    entry = v3_manifest_entry(mirror)
    stored = (mirror / "blobs" / "sha256" / entry["checksum"][:2] / entry["checksum"]).read_bytes()
    return json.loads(gzip.decompress(stored) if entry["compression"] == "gzip" else stored)


@pytest.fixture(scope="module")
def indexes(small_corpus):
    """{(tag, label): database} of every index of the small corpus."""
    return {(tag, label): read_index(mirror)["database"] for tag, label, mirror in mirrors(small_corpus)}


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


def test_the_index_of_mirrors_lists_every_tag_and_stack_with_urls_relative_to_it(small_corpus, indexes):
    listing = json.loads((small_corpus / "cache_spack_io_index.json").read_text())
    stacks = tag_stacks(small_corpus)
    assert sorted(listing) == sorted(stacks)
    for tag, entries in listing.items():
        labels = [entry["label"] for entry in entries]
        assert labels == ["root", *sorted(set(stacks[tag]) - {"root"})]
        for entry in entries:
            target = small_corpus / entry["url"]
            if target.name == "index.json":  # v2: the index itself
                document = json.loads(target.read_bytes())
            elif target.parent.parent.parent.name == "blobs":  # v3: straight at an uncompressed blob
                assert v3_manifest_entry(target.parents[3])["compression"] == "none"
                document = json.loads(target.read_bytes())
            else:  # a mirror folder, for a gzip-compressed blob
                assert v3_manifest_entry(target)["compression"] == "gzip"
                document = read_index(target)
            assert document["database"] == indexes[(tag, entry["label"])], entry["url"]


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


def test_each_index_lists_as_binaries_the_pages_specs_of_its_stack(small_corpus, indexes):
    pages = page_specs(small_corpus)
    for (tag, label), database in indexes.items():
        binaries = {h for h, record in database["installs"].items() if record["in_buildcache"]}
        assert binaries == {h for h, (_, spec) in pages[tag].items() if label in spec["stacks"]}, (tag, label)
        others = [record["spec"] for record in database["installs"].values() if not record["in_buildcache"]]
        assert all("external" in node for node in others), (tag, label)


def test_a_hash_has_the_same_record_in_every_index_and_tag(small_corpus, indexes):
    nodes, tags = {}, {}
    for (tag, _), database in indexes.items():
        for spec_hash, record in database["installs"].items():
            assert nodes.setdefault(spec_hash, record["spec"]) == record["spec"], spec_hash
            tags.setdefault(spec_hash, set()).add(tag)
    shared = [h for h, names in tags.items() if len(names) > 1 and "dependencies" in nodes[h]]
    assert len(shared) > 100, "consecutive releases share binaries, with their dependencies"


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


def test_pages_are_the_same_without_indexes(small_corpus, tmp_path):
    out = tmp_path / "pages"
    subprocess.run(
        [sys.executable, str(GENERATOR), str(out), "--size", "small", "--no-indexes"], check=True, capture_output=True
    )
    assert not (out / "mirrors").exists() and not (out / "cache_spack_io_index.json").exists()
    pages = sorted(path.relative_to(out) for path in out.glob("_cache/*/*/specs.md"))
    assert pages == sorted(path.relative_to(small_corpus) for path in small_corpus.glob("_cache/*/*/specs.md"))
    assert all((out / page).read_bytes() == (small_corpus / page).read_bytes() for page in pages)


SECTIONS = [
    "## Targets",
    "## Machine",
    "## Corpus",
    "## Full build from pages",
    "## Database size",
    "## Incremental builds",
    "## Builds from indexes",
    "## Served pages",
    "### The binaries page",
    "### Facet clicks and search",
    "### Canned queries",
]
FACET_CLICKS = ["tag", "os", "target", "compiler", "stacks", "package", "search"]
CLICK_COUNTS = {  # what each click's row count must be, counted with SQL over the binaries view
    "tag": "SELECT count(*) FROM binaries WHERE tag = :value",
    "os": "SELECT count(*) FROM binaries WHERE os = :value",
    "target": "SELECT count(*) FROM binaries WHERE target = :value",
    "compiler": "SELECT count(*) FROM binaries WHERE compiler = :value",
    "stacks": "SELECT count(*) FROM binaries WHERE :value IN (SELECT value FROM json_each(stacks))",
    "package": "SELECT count(*) FROM binaries WHERE package = :value",
}


def table_rows(markdown):
    """Cells of the Markdown table rows in markdown, header included, separator left out."""
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("| ")
    ]


def section(report, heading):
    return report.split(heading + "\n", 1)[1].split("\n#", 1)[0]


def test_small_benchmark_reports_every_section_and_query(tmp_path):
    results, work = tmp_path / "results", tmp_path / "work"
    command = [
        sys.executable, str(ROOT / "benchmarks" / "run.py"), "--size", "small", "--runs", "1", "--requests", "2",
        "--work", str(work), "--results", str(results),
    ]  # fmt: skip
    finished = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]

    report = (results / "small.md").read_text()
    assert finished.stdout.strip() == report.strip()
    headings = [line for line in report.splitlines() if line.startswith("#") and not line.startswith("# ")]
    assert headings == SECTIONS

    queries = yaml.safe_load((ROOT / "metadata.yml").read_text())["databases"]["cache"]["queries"]
    canned = table_rows(section(report, "### Canned queries"))[1:]
    statuses = {(row[0], row[1].split()[0]): row[2] for row in canned}  # "realistic (tag empty)" is realistic
    assert statuses == {(name, parameters): "200" for name in queries for parameters in ("empty", "realistic")}

    data = json.loads((results / "small.json").read_text())
    serving = data["serving"]
    assert serving["binaries_page"]["statuses"] == [200]
    assert serving["binaries_page"]["row_count"] == data["database"]["counts"]["binaries"]
    clicks = serving["facet_clicks"]
    assert [click["name"] for click in clicks] == FACET_CLICKS
    conn = sqlite3.connect(work / "cache.db")
    for click in clicks:
        assert click["statuses"] == [200], click
        if click["name"] in CLICK_COUNTS:
            value = urllib.parse.parse_qs(urllib.parse.urlsplit(click["url"]).query).popitem()[1][0]
            assert click["row_count"] == conn.execute(CLICK_COUNTS[click["name"]], {"value": value}).fetchone()[0]
    assert 0 < clicks[-1]["row_count"] < serving["binaries_page"]["row_count"], "the search narrows"
    conn.close()
    shown = table_rows(section(report, "### Facet clicks and search"))
    assert shown[0][5] == "row count"
    assert [row[5] for row in shown[1:]] == [f"{click['row_count']:,}" for click in clicks]

    indexes = data["index_builds"]
    if indexes["measured"]:
        assert indexes["binaries"] == indexes["page_binaries"] and indexes["big_tag"]["peak_rss_mib"] > 0
    else:  # until the builder reads indexes: said, not crashed
        assert indexes["reason"] == "the builder does not read indexes yet" and indexes["builder_said"]
        assert section(report, "## Builds from indexes").strip().startswith("Not measured: the builder does not")
    verdicts = {row[0]: row[3] for row in table_rows(section(report, "## Targets"))[1:]}
    assert len(verdicts) == 18 and set(verdicts.values()) <= {"met", "**missed**", "not measured"}

    assert data["full_build"]["builder"]["peak_rss_mib"] > 0
    assert data["unchanged_rebuild"]["wrote_nothing"]
    assert data["add_tag"]["counts_add_up"]
    largest = dict(data["database"]["largest"])
    assert "specs" in largest and "page_specs" in largest
    assert sum(largest.values()) <= data["database"]["bytes"]


def test_the_benchmark_serves_the_database_with_the_readmes_command():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from run import SERVE_COMMAND

    readme_lines = [line.strip() for line in (ROOT / "README.md").read_text().splitlines()]
    assert " ".join(SERVE_COMMAND) in readme_lines, "the README's 'Serve it' command"


def test_peak_memory_counts_the_builders_child_processes():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from run import run_measured

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
