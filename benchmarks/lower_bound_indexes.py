"""What a minimal loader of build-cache indexes costs: every tag's indexes into three flat SQLite tables.

    python benchmarks/lower_bound_indexes.py CACHE_SPACK_IO_INDEX DB

Reads the cache_spack_io_index.json that generate_corpus.py writes (tag -> [{label, url}]; URLs relative
to the file, or file:// URLs or paths) and every index it lists: a v2 `build_cache/index.json`, checked
against its `index.json.hash`; an index blob, checked against the checksum that is its name; or a mirror
folder, whose v3 manifest names the blob, its checksum and its compression. Each index is parsed whole
with orjson. For each tag, in one transaction and without indexes, it inserts with flat executemany one
row per binary (record with `in_buildcache: true`; its package, version, arch, compiler by INDEX_RULES
and raw parameters, from the first of the tag's indexes that lists it), one per (binary, label) and one
per dependency edge of each binary; one index at a time. The builder has to do at least this much with the same files.
"""

import argparse
import gzip
import hashlib
import sqlite3
import sys
import time
import urllib.parse
from pathlib import Path

import orjson

SCHEMA = """
CREATE TABLE binaries (
    id INTEGER PRIMARY KEY, tag TEXT, hash TEXT, package TEXT, version TEXT, platform TEXT, os TEXT,
    target TEXT, compiler TEXT, parameters TEXT
);
CREATE TABLE binary_labels (binary_id INTEGER, label TEXT);
CREATE TABLE edges (binary_id INTEGER, dependency_hash TEXT, deptypes TEXT, virtuals TEXT);
"""
COMPILER_VIRTUALS = ("c", "cxx", "fortran")


def local_path(url, base):
    """The file or folder a URL of the index of mirrors names: relative to it, file://, or a plain path."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        return Path(urllib.parse.unquote(parsed.path))
    if parsed.scheme:
        raise SystemExit(f"{url}: the lower bound reads local files only")
    return base / url


def checked(data, expected, where):
    if hashlib.sha256(data).hexdigest() != expected:
        raise SystemExit(f"{where}: sha256 differs from {expected}")
    return data


def read_index(path):
    """The index JSON (bytes) behind a v2 index.json, an index blob or a mirror folder."""
    if path.is_dir():
        return read_mirror(path)
    data = path.read_bytes()
    if path.name == "index.json":
        return checked(data, (path.parent / "index.json.hash").read_text().strip(), path)
    checked(data, path.name, path)  # a blob is named by its checksum
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def read_mirror(mirror):
    if not (mirror / "v3" / "layout.json").is_file():
        return read_index(mirror / "build_cache" / "index.json")
    manifest = orjson.loads((mirror / "v3" / "manifests" / "index" / "index.manifest.json").read_bytes())
    entry = next(e for e in manifest["data"] if e["mediaType"].startswith("application/vnd.spack.db"))
    checksum = entry["checksum"]
    blob = mirror / "blobs" / entry["checksumAlgorithm"] / checksum[:2] / checksum
    stored = checked(blob.read_bytes(), checksum, blob)
    return gzip.decompress(stored) if entry["compression"] == "gzip" else stored


def compiler_of(node, installs):
    if compiler := node.get("compiler"):
        return f"{compiler['name']}@={compiler['version']}"
    annotations = node.get("annotations") or {}
    if annotations.get("original_specfile_version", 5) < 5 and "compiler" in annotations:
        return annotations["compiler"]
    edges = node.get("dependencies") or ()
    for virtual in COMPILER_VIRTUALS:
        for edge in edges:
            if virtual in edge["parameters"]["virtuals"]:
                dependency = installs[edge["hash"]]["spec"]
                return f"{dependency['name']}@{dependency['version']}"
    return "none"


def index_rows(tag, label, installs, ids, first_id):
    """(binary rows, label rows, edge rows) of one index; ids (hash -> row id) holds the tag's binaries so far."""
    binary_rows, label_rows, edge_rows = [], [], []
    for spec_hash, record in installs.items():
        if not record["in_buildcache"]:
            continue
        binary_id = ids.get(spec_hash)
        if binary_id is None:
            binary_id = ids[spec_hash] = first_id + len(binary_rows)
            node = record["spec"]
            arch, target = node["arch"], node["arch"]["target"]
            binary_rows.append(
                (
                    binary_id, tag, spec_hash, node["name"], node["version"], arch["platform"], arch["platform_os"],
                    target["name"] if isinstance(target, dict) else target, compiler_of(node, installs),
                    orjson.dumps(node["parameters"]).decode(),
                )
            )  # fmt: skip
            edge_rows.extend(
                (
                    binary_id, edge["hash"], orjson.dumps(edge["parameters"]["deptypes"]).decode(),
                    orjson.dumps(edge["parameters"]["virtuals"]).decode(),
                )
                for edge in node.get("dependencies") or ()
            )  # fmt: skip
        label_rows.append((binary_id, label))
    return binary_rows, label_rows, edge_rows


def load(index_of_mirrors, db):
    """Returns the counts of tags, indexes, binary rows, label rows and edge rows."""
    listing = orjson.loads(index_of_mirrors.read_bytes())
    db.unlink(missing_ok=True)
    conn = sqlite3.connect(db, isolation_level=None)
    # The settings a builder writing a fresh file can afford: a crash just means starting again.
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.executescript(SCHEMA)
    conn.execute("BEGIN")
    counts = dict.fromkeys(("tags", "indexes", "binaries", "labels", "edges"), 0)
    for tag, entries in listing.items():
        ids = {}  # one index at a time: a tag's indexes are not held in memory together
        for entry in entries:
            index = read_index(local_path(entry["url"], index_of_mirrors.parent))
            installs = orjson.loads(index)["database"]["installs"]
            binaries, labels, edges = index_rows(tag, entry["label"], installs, ids, counts["binaries"] + 1)
            conn.executemany("INSERT INTO binaries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", binaries)
            conn.executemany("INSERT INTO binary_labels VALUES (?, ?)", labels)
            conn.executemany("INSERT INTO edges VALUES (?, ?, ?, ?)", edges)
            counts["indexes"] += 1
            counts["binaries"] += len(binaries)
            counts["labels"] += len(labels)
            counts["edges"] += len(edges)
        counts["tags"] += 1
    conn.execute("COMMIT")
    conn.close()
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index_of_mirrors", type=Path, help="cache_spack_io_index.json")
    parser.add_argument("db", type=Path, help="SQLite file to write (replaced)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    counts = load(args.index_of_mirrors, args.db)
    elapsed = time.perf_counter() - started
    print(f"{elapsed:.1f} s: " + ", ".join(f"{n} {name}" for name, n in counts.items()) + f" -> {args.db}")


if __name__ == "__main__":
    sys.exit(main())
