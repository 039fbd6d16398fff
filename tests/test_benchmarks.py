"""Smoke test of benchmarks/run.py on the small corpus: every section is there and every URL answered 200.

No timing is asserted: CI machines are too noisy for that.
"""

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

SECTIONS = [
    "## Targets",
    "## Machine",
    "## Corpus",
    "## Full build",
    "## Database size",
    "## Incremental builds",
    "## Canned queries",
    "## Search",
    "## Binaries page with facets",
    "## Filtered binaries pages",
]


def table_rows(markdown):
    """Cells of the Markdown table rows in markdown, header included, separator left out."""
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("| ")
    ]


def test_small_benchmark_reports_every_section_and_query(tmp_path):
    results = tmp_path / "results"
    command = [
        sys.executable, str(ROOT / "benchmarks" / "run.py"), "--size", "small", "--runs", "1", "--requests", "2",
        "--work", str(tmp_path / "work"), "--results", str(results),
    ]  # fmt: skip
    finished = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]

    report = (results / "small.md").read_text()
    assert finished.stdout.strip() == report.strip()
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings == SECTIONS

    queries = yaml.safe_load((ROOT / "metadata.yml").read_text())["databases"]["cache"]["queries"]
    canned = table_rows(report.split("## Canned queries")[1].split("## Search")[0])[1:]
    statuses = {(row[0], row[1].split()[0]): row[2] for row in canned}  # "realistic (tag empty)" is realistic
    assert statuses == {(name, parameters): "200" for name in queries for parameters in ("empty", "realistic")}

    data = json.loads((results / "small.json").read_text())
    # Search and the binaries page are listed, whatever they answered: on a slow machine the view's
    # search can run into Datasette's time limit even on the small corpus.
    assert [t["name"] for t in data["serving"]["search"]] == ["binaries table search", "search_specs canned query"]
    assert [t["name"] for t in data["serving"]["binaries_page"]] == ["HTML", "JSON"]
    filtered = data["serving"]["filtered_pages"]
    assert [t["name"] for t in filtered] == [
        "one tag",
        "one tag and os",
        "one os",
        "one compiler",
        "one target",
        "one stack",
    ]
    assert all(t["row_count"] > 0 for t in filtered), "the small corpus is counted well within the time limit"
    shown = table_rows(report.split("## Filtered binaries pages")[1])
    assert shown[0][6] == "row count"
    assert [row[6] for row in shown[1:]] == [f"{t['row_count']:,}" for t in filtered]
    assert data["full_build"]["builder"]["peak_rss_mib"] > 0
    assert data["unchanged_rebuild"]["wrote_nothing"]
    assert data["add_tag"]["counts_add_up"]
    largest = dict(data["database"]["largest"])
    assert "specs" in largest and "page_specs" in largest
    assert sum(largest.values()) <= data["database"]["bytes"]


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
