"""Why the index reader decodes with msgspec: one index decoded by each candidate, side by side.

    python benchmarks/index_decoders.py [INDEX] [--records N] [--runs N]

Each run is a fresh process that reads INDEX (a Spack Database JSON; without it, a synthetic DB 8 index of
--records records is written to a temporary folder), decodes it and keeps, per record, the fields the
reader uses. The candidates alternate; the report gives the median wall time and peak RSS of each:

- json: the standard library, whole dicts, then the fields picked out;
- orjson: the fastest JSON parser for Python, whole dicts, then the fields picked out;
- msgspec: what spack_cache_db.read.indexes does (typed Structs that decode only the fields it uses).
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CANDIDATES = ("json", "orjson", "msgspec")

_DECODE = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
started = time.perf_counter()
data = open(path, "rb").read()
if mode == "msgspec":
    from spack_cache_db.read import indexes as read_indexes
    records = read_indexes.parse_index(path, "root", "", data).records
    del data
    kept = [(h, r.spec.name, r.spec.version, r.spec.arch.platform_os, r.spec.parameters, r.in_buildcache,
             [d.hash for d in read_indexes._dependencies(r.spec)]) for h, r in records.items()]
else:
    loads = json.loads if mode == "json" else __import__("orjson").loads
    installs = loads(data)["database"]["installs"]
    del data
    kept = [(h, r["spec"]["name"], r["spec"]["version"], r["spec"]["arch"]["platform_os"], r["spec"]["parameters"],
             r["in_buildcache"], [d["hash"] for d in r["spec"].get("dependencies", [])]) for h, r in installs.items()]
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "records": len(kept)}))
"""


def synthetic_index(path, records, seed=1):
    """A DB 8 index shaped like a busy tag's root: full target dicts, a dozen edges per record."""
    rng = random.Random(seed)
    features = [f"feature{n}" for n in range(40)]
    hashes = [f"{n:032d}".translate(str.maketrans("0123456789", "abcdefghij")) for n in range(records)]
    installs = {}
    for number, spec_hash in enumerate(hashes):
        dependencies = [
            {"name": f"p{d}", "hash": hashes[d], "parameters": {"deptypes": ["build", "link"], "virtuals": []}}
            for d in rng.sample(range(number), min(number, 12))
        ]
        installs[spec_hash] = {
            "spec": {
                "name": f"p{number % 1500}",
                "version": f"1.{number % 17}.{number % 5}",
                "arch": {
                    "platform": "linux",
                    "platform_os": "ubuntu24.04",
                    "target": {
                        "name": "x86_64_v3",
                        "vendor": "generic",
                        "features": features,
                        "parents": ["x86_64_v2"],
                    },
                },
                "namespace": "builtin",
                "parameters": {"build_system": "cmake", "shared": True, "cuda_arch": ["80", "90"], "cflags": []},
                "package_hash": "x" * 56,
                "dependencies": dependencies,
                "annotations": {"original_specfile_version": 5},
                "hash": spec_hash,
            },
            "ref_count": 1,
            "in_buildcache": True,
        }
    Path(path).write_text(json.dumps({"database": {"version": "8", "installs": installs}}, separators=(",", ":")))


def measure(index, runs):
    results = {name: [] for name in CANDIDATES}
    for _ in range(runs):
        for name in CANDIDATES:
            finished = subprocess.run(
                [sys.executable, "-c", _DECODE, name, str(index)], capture_output=True, text=True, check=True
            )
            results[name].append(json.loads(finished.stdout))
    return results


def report(index, results):
    size = Path(index).stat().st_size
    lines = [
        f"Index: {index} ({size / 1e6:,.1f} MB, {results['msgspec'][0]['records']:,} records)",
        "",
        "| decoder | median seconds | median peak RSS (MiB) |",
        "|---|---|---|",
    ]
    for name, runs in results.items():
        seconds = statistics.median(run["seconds"] for run in runs)
        rss = statistics.median(run["peak_rss_mib"] for run in runs)
        lines.append(f"| {name} | {seconds:.2f} | {rss:,.0f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", nargs="?", type=Path, help="a Spack Database JSON (default: a synthetic one)")
    parser.add_argument("--records", type=int, default=40000, help="records of the synthetic index")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        index = args.index
        if index is None:
            index = Path(folder) / "index.json"
            synthetic_index(index, args.records)
        print(report(index, measure(index, args.runs)))


if __name__ == "__main__":
    sys.exit(main())
