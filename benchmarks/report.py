"""The targets of issue 19, evaluated on a run's results, and the Markdown report of the run.

Every target is evaluated on each database it applies to: the pages of each shape and the history built
from its indexes. A served page meets its target only when every answer was 200 within the limit (and a
table page showed its row count); a page that timed out or showed no count misses it.
"""

import statistics
import urllib.parse

from inspect_db import KINDS, TREE_CANDIDATES
from serve import TIMED_OUT, answered_in_time

MAX_BUILD_RATIO = 2.0  # full build / its lower bound with orjson, wall
MAX_PEAK_RSS_MIB = 1024  # builder and writer together
MAX_BYTES_PER_BINARY = 160  # cache.db bytes / binaries, from pages
MAX_BYTES_PER_EDGE = 30  # bytes of the edge tables and their indexes / edges
MAX_UNCHANGED_FRACTION = 0.05  # unchanged rebuild / full build
MAX_ADD_TAG_RATIO = 1.5  # (adding one tag, or removing it, - a plain copy of the database) / that tag alone
MAX_BINARIES_PAGE_P95_MS = 500  # /cache/binaries, with its row count
MAX_TABLE_PAGE_P95_MS = 1000  # each facet click and search, the dependencies view filtered: with row counts
MAX_CANNED_P95_MS = 200  # every canned query as HTML
MAX_BIG_TAG_PEAK_RSS_MIB = 1024  # building one tag whose root index is about 170 MB

SHAPE_LABELS = {"usual": "pages, usual shape", "spread": "pages, spread shape"}
INDEXES_LABEL = "indexes"


# --- targets ------------------------------------------------------------------------------------------------------


def target(corpus, name, value, limit, met):
    """met: True, False, or None when not measured."""
    return {"corpus": corpus, "name": name, "value": value, "limit": limit, "met": met if met is None else bool(met)}


def shown_url(path):
    """A URL as a browser's address bar shows it (gcc@13.2.0, not gcc%4013.2.0)."""
    return urllib.parse.unquote_plus(path)


def status_words(timing):
    """The statuses a page answered, in words: 'timed out' when no answer came, '400 (time limit)' when
    Datasette stopped its query."""
    time_limit = "took too long" in timing.get("error", "")
    words = {TIMED_OUT: "timed out", 400: "400 (time limit)" if time_limit else "400"}
    return ", ".join(words.get(status, str(status)) for status in timing["statuses"])


def page_value(timing, count_limit_ms):
    count = f"{timing['row_count']:,} rows" if timing["row_count"] is not None else _counted_words(timing)
    status = "" if timing["statuses"] == [200] else f", status {status_words(timing)}"
    floor = ""
    if timing["row_count"] is None and "full_text" in timing:
        floor = (
            f"; the full-text index alone matches {full_text_words(timing['full_text'])}, where a row count may "
            f"take up to {count_limit_ms} ms"
        )
    return f"{timing['p95_ms']:.0f} ms, {count}{status}{floor}"


def _counted_words(timing):
    """A page some of whose answers had no row count: how many had one (a count past its time is left out)."""
    counted = timing.get("counted", "")
    return "no row count" if counted.startswith("0 of") or not counted else f"a row count in {counted} answers"


def full_text_words(found):
    return f"{found['rows']:,} rows of `{found['table']}` in {found['ms']:.1f} ms"


def table_page_target(corpus, name, timing, limit_ms, count_limit_ms):
    met = answered_in_time(timing, limit_ms, with_count=True)
    return target(corpus, name, page_value(timing, count_limit_ms), f"<= {limit_ms} ms with its row count", met)


def canned_target(corpus, name, timing):
    status = "" if timing["statuses"] == [200] else f", status {status_words(timing)}"
    query_alone = f" (as JSON {timing['as_json']['p95_ms']:.0f} ms)" if "as_json" in timing else ""
    met = answered_in_time(timing, MAX_CANNED_P95_MS, with_count=False)
    value = f"{timing['p95_ms']:.0f} ms{status}{query_alone}"
    return target(corpus, name, value, f"<= {MAX_CANNED_P95_MS} ms, 200", met)


def write_floor_value(full):
    """The write floor beside the build's ratio, when it was measured."""
    floor = full.get("write_floor")
    return "" if floor is None else f"; writing its rows alone (floor) {floor['ratio_wall']:.2f}x"


def cpu_bound_ratio(full, cores):
    """The build's CPU (both processes) spread over the machine's cores, against the lower bound's wall time: the
    least wall time the work the build does can take, however well its processes overlap."""
    return full["builder"]["cpu_s"] / cores / full["lower_bound"]["wall_s"]


def build_targets(corpus, builds, cores):
    full = builds["full_build"]
    builder, bound = full["builder"], full["lower_bound"]
    unchanged = builds["unchanged_rebuild"]
    return [
        target(corpus, "Full build / lower bound (orjson), wall",
               f"{full['ratio_wall']:.2f}x ({builder['wall_s']:.1f} s / {bound['wall_s']:.1f} s)"
               + write_floor_value(full) + f"; its CPU over {cores} cores {cpu_bound_ratio(full, cores):.2f}x",
               f"<= {MAX_BUILD_RATIO}x", full["ratio_wall"] <= MAX_BUILD_RATIO),
        target(corpus, "Peak RSS of a full build (builder and writer)", f"{builder['peak_rss_mib']:.0f} MiB",
               f"<= {MAX_PEAK_RSS_MIB} MiB", builder["peak_rss_mib"] <= MAX_PEAK_RSS_MIB),
        target(corpus, "Unchanged rebuild / full build",
               f"{unchanged['fraction_of_full']:.1%} ({unchanged['wall_s']:.2f} s)",
               f"<= {MAX_UNCHANGED_FRACTION:.0%}", unchanged["fraction_of_full"] <= MAX_UNCHANGED_FRACTION),
        target(corpus, "Unchanged rebuild writes nothing (inode, bytes, mtime, content)",
               "yes" if unchanged["wrote_nothing"] else "no", "yes", unchanged["wrote_nothing"]),
    ]  # fmt: skip


def serving_targets(corpus, serving):
    canned = serving["canned_queries"]
    within = [t for t in canned if answered_in_time(t, MAX_CANNED_P95_MS, with_count=False)]
    slowest = max(canned, key=lambda timing: timing["p95_ms"])
    missed = [f"{t['query']} ({t['parameters']})" for t in canned if t not in within]
    count_limit = serving["count_time_limit_ms"]
    return [
        table_page_target(
            corpus, "`/cache/binaries`, p95", serving["binaries_page"], MAX_BINARIES_PAGE_P95_MS, count_limit
        ),
        *(
            table_page_target(
                corpus, f"Click `{shown_url(click['url']).removeprefix('/cache/binaries')}`, p95", click,
                MAX_TABLE_PAGE_P95_MS, count_limit,
            )
            for click in serving["facet_clicks"]
        ),
        target(
            corpus, "Canned queries as HTML, p95",
            f"{len(within)} of {len(canned)} within; slowest {slowest['p95_ms']:.0f} ms ({slowest['query']}, "
            f"{slowest['parameters']})" + (f"; missed: {', '.join(missed)}" if missed else ""),
            f"<= {MAX_CANNED_P95_MS} ms each, 200", not missed,
        ),
    ]  # fmt: skip


def pages_targets(shape, pages, cores):
    corpus = SHAPE_LABELS[shape]
    database, added = pages["database"], pages["add_tag"]
    return [
        *build_targets(corpus, pages, cores),
        target(corpus, "Size per binary (cache.db bytes / binaries)", size_text(database),
               f"<= {MAX_BYTES_PER_BINARY} bytes", database["bytes_per_binary"] <= MAX_BYTES_PER_BINARY),
        target(corpus, "Adding a tag beyond a plain copy / that tag alone", change_text(added, ADDING),
               f"<= {MAX_ADD_TAG_RATIO}x", change_met(added, ADDING)),
        target(corpus, "Adding a tag: pages and binaries add up", "yes" if added["counts_add_up"] else "no", "yes",
               added["counts_add_up"]),
        target(corpus, "Removing that tag again beyond a plain copy / that tag alone", change_text(added, REMOVING),
               f"<= {MAX_ADD_TAG_RATIO}x", change_met(added, REMOVING)),
        target(corpus, "Removing that tag: row counts as before it was added",
               "yes" if added["removed_as_before"] else "no", "yes", added["removed_as_before"]),
        *serving_targets(corpus, pages["serving"]),
    ]  # fmt: skip


def indexes_targets(indexes, cores):
    corpus = INDEXES_LABEL
    edges, big = indexes["edges"], indexes["big_tag"]
    per_edge = edges["bytes_per_edge"]
    found = [
        *build_targets(corpus, indexes, cores),
        target(corpus, "Bytes per dependency edge (edge tables and their indexes / edges)",
               "not measured: no edges or no dbstat" if per_edge is None
               else f"{per_edge:.1f} bytes ({edges['bytes'] / 1e6:.1f} MB / {edges['edges']:,} edges)",
               f"<= {MAX_BYTES_PER_EDGE} bytes", None if per_edge is None else per_edge <= MAX_BYTES_PER_EDGE),
        target(corpus, "Peak RSS building one busy tag from its indexes",
               f"{big['peak_rss_mib']:.0f} MiB (root index {big['root_index_bytes'] / 1e6:.0f} MB)",
               f"<= {MAX_BIG_TAG_PEAK_RSS_MIB} MiB", big["peak_rss_mib"] <= MAX_BIG_TAG_PEAK_RSS_MIB),
    ]  # fmt: skip
    if indexes["page_binaries"] is not None:
        found.append(
            target(corpus, "Binaries from indexes = binaries from pages",
                   f"{indexes['binaries']:,} / {indexes['page_binaries']:,}", "equal",
                   indexes["binaries"] == indexes["page_binaries"])
        )  # fmt: skip
    serving = indexes["serving"]
    found += serving_targets(corpus, serving)
    for question in serving["dependency_questions"]:
        name = f"`{shown_url(question['url'])}` ({question['subject']}), p95"
        if question["kind"] == "table":
            found.append(
                table_page_target(corpus, name, question, MAX_TABLE_PAGE_P95_MS, serving["count_time_limit_ms"])
            )
        else:
            found.append(canned_target(corpus, name, question))
    return found


def targets(results):
    found, cores = [], results["machine"]["cores"]
    for shape, pages in results["pages"].items():
        found += pages_targets(shape, pages, cores)
    if "indexes" in results:
        found += indexes_targets(results["indexes"], cores)
    return found


# --- the report ---------------------------------------------------------------------------------------------------


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def verdict(met):
    return {True: "met", False: "**missed**", None: "not measured"}[met]


def status_text(timing):
    text = status_words(timing)
    return text if timing["statuses"] == [200] else f"**{text}**"


def run_row(name, summary):
    runs = ", ".join(f"{run['wall_s']:.2f}" for run in summary["runs"])
    return [name, f"{summary['wall_s']:.2f} s", f"{summary['cpu_s']:.2f} s", f"{summary['peak_rss_mib']:.0f} MiB", runs]


RUN_HEADER = ["", "median wall", "median CPU", "peak RSS (max)", "wall of each run (s)"]


def full_builds(results):
    """How many full builds each median is of: from pages, and from indexes where the run has them."""
    pages = f"{results['runs']} full builds"
    if "indexes" not in results or results["index_runs"] == results["runs"]:
        return f"{pages} each"
    return f"{pages} from pages and {results['index_runs']} from indexes each"


def render_targets(results):
    rows = [[t["corpus"], t["name"], t["value"], t["limit"], verdict(t["met"])] for t in results["targets"]]
    met = sum(t["met"] is True for t in results["targets"])
    return [
        "## Targets",
        "",
        f"{met} of {len(results['targets'])} met. Medians of {full_builds(results)}, of "
        f"{results['incremental_runs']} of each build onto a database, and of up to {results['requests']} requests "
        "per page (p95 by nearest rank).",
        "",
        *table(["corpus", "target", "measured", "limit", ""], rows),
    ]


def render_machine(results):
    m = results["machine"]
    served = {pages["serving"]["sqlite"] for pages in served_databases(results).values()}
    datasette = {pages["serving"]["datasette"] for pages in served_databases(results).values()}
    rows = [
        ["machine", m["name"]], ["CPU", m["cpu"]], ["cores", m["cores"]], ["RAM", f"{m['ram_gib']:.1f} GiB"],
        ["OS", m["os"]], ["Python", m["python"]], ["SQLite (builder)", m["sqlite"]],
        ["SQLite (served)", ", ".join(sorted(served))], ["Datasette", ", ".join(sorted(datasette))],
        ["load average at start / end", f"{m['load_start']} / {m['load_end']}"],
        ["code", results["code"]], ["date", results["date"]], ["benchmark took", f"{results['seconds']:.0f} s"],
    ]  # fmt: skip
    return ["## Machine", "", *table(["", ""], rows)]


def served_databases(results):
    """{label: results of a database that was built and served}."""
    found = {SHAPE_LABELS[shape]: pages for shape, pages in results["pages"].items()}
    if "indexes" in results:
        found[INDEXES_LABEL] = results["indexes"]
    return found


def render_corpora(results):
    rows = []
    for name, c in results["inputs"].items():
        generated = results["generated_s"].get(name)
        if "pages" not in c:  # the index listing
            rows.append([name, c["path"], "", "", "", "", "", "the usual corpus's" if c["own"] else "given"])
            continue
        rows.append([
            name, c["path"], c["tags"], c["pages"], f"{c['bytes'] / 1e6:.1f} MB", c["index_files"],
            f"{c['index_bytes'] / 1e6:.1f} MB", "given" if generated is None else f"{generated:.0f} s",
        ])  # fmt: skip
    header = ["", "path", "tags", "pages", "page bytes", "index files", "index bytes (stored)", "generated in"]
    return ["## Corpora", "", *table(header, rows)]


def render_full_build(builds, runs, lower_bound, cores):
    full = builds["full_build"]
    return [
        "### Full build",
        "",
        (
            f"{runs} runs each, builder and lower bound ({lower_bound}) alternating, one subprocess per run (wall "
            "time includes Python start-up). Peak RSS is the sum over the subprocess and its children (the "
            "builder's writer process), sampled every 20 ms." + _warmed(full)
        ),
        "",
        *table(RUN_HEADER, [run_row("builder", full["builder"]), run_row("lower bound", full["lower_bound"])]),
        "",
        f"Builder / lower bound: **{full['ratio_wall']:.2f}x** wall, {full['ratio_cpu']:.2f}x CPU. "
        + run_ratios_sentence(full)
        + cpu_bound_sentence(full, cores),
        *render_write_floor(full),
    ]


def run_ratios_sentence(full):
    """Each build's ratio to the lower bound run right after it, where there are several: on a machine whose speed
    drifts, how far apart the runs were (the target is judged on the medians above)."""
    built, bound = full["builder"]["runs"], full["lower_bound"]["runs"]
    if len(built) < 2:
        return ""
    ratios = [build["wall_s"] / lower["wall_s"] for build, lower in zip(built, bound, strict=True)]
    each = ", ".join(f"{ratio:.2f}" for ratio in ratios)
    return f"Each build against the lower bound run after it: {each}x (median {statistics.median(ratios):.2f}x). "


def cpu_bound_sentence(full, cores):
    """What the build's CPU alone allows, spread over every core, against the target."""
    ratio, cpu_s = cpu_bound_ratio(full, cores), full["builder"]["cpu_s"]
    least_s = cpu_s / cores
    if ratio > MAX_BUILD_RATIO:
        verdict_text = (
            f"over the {MAX_BUILD_RATIO}x target however well its processes overlap: the target needs the build to do"
            " less work, not to wait less"
        )
    else:
        verdict_text = (
            f"within the {MAX_BUILD_RATIO}x target: the other {full['builder']['wall_s'] - least_s:.1f} s of its wall"
            " time a core waits (on the other process, or while one works alone before and after the load)"
        )
    return (
        f"Its {cpu_s:.1f} s of CPU (both processes) take at least {least_s:.1f} s on this machine's {cores} cores: "
        f"**{ratio:.2f}x** the lower bound, {verdict_text}."
    )


def _warmed(full):
    if "warmed" not in full:  # an index corpus: larger than the memory
        return ""
    warmed = full["warmed"]
    return (
        f" Before them every page was read once, untimed ({warmed['bytes'] / 1e6:,.0f} MB in "
        f"{warmed['seconds']:.1f} s), so that both read the pages from the page cache."
    )


WRITE_FLOOR_PARTS_SHOWN = 6


def render_write_floor(full):
    """The floor of writing the database, beside the build's ratio; [] when it was not measured."""
    floor = full.get("write_floor")
    if floor is None:
        return []
    ratio, build_ratio = floor["ratio_wall"], full["ratio_wall"]
    runs = ", ".join(f"{seconds:.2f}" for seconds in floor["runs_s"])
    parts = sorted(floor["parts"].items(), key=lambda part: -part[1])[:WRITE_FLOOR_PARTS_SHOWN]
    (largest, largest_s), parts_of_s = parts[0], floor["parts_of_s"]
    if ratio > MAX_BUILD_RATIO:
        verdict_text = (
            f"Writing alone is over the {MAX_BUILD_RATIO}x target: with this schema no build meets it, whatever it "
            f"does besides. The floor is writing the database, most of all `{largest}`."
        )
    elif 1 + ratio > MAX_BUILD_RATIO:
        verdict_text = (
            f"Writing alone is within the {MAX_BUILD_RATIO}x target, reading and writing one after the other are "
            "not: the target needs the writer process to write while the pages are read, on a core of its own."
        )
    else:
        verdict_text = (
            f"Reading and writing one after the other are within the {MAX_BUILD_RATIO}x target: the build's "
            f"{build_ratio - 1 - ratio:.2f}x beyond them is its own work (checking, normalising, handing rows over)."
        )
    return [
        "",
        (
            "**Write floor** (`benchmarks/floors.py write`, after each build, alternating with the builds): the "
            "built database's own rows written into an empty file with the same schema (its indexes, foreign keys "
            "and full-text indexes as the build creates them, the build's PRAGMAs), table by table in the schema's "
            f"load order with `INSERT ... SELECT`, the full-text indexes filled, the file synced: {floor['seconds']:.2f} s "
            f"(runs: {runs}), **{ratio:.2f}x** the lower bound; on its own {ratio / build_ratio:.0%} of the build's "
            "wall time. The lower bound is the floor of reading the pages (each page read and its JSON parsed with "
            f"orjson; its flat inserts without an index are a small part of it). Reading and writing one after the "
            f"other: {1 + ratio:.2f}x; with the writer process on a core of its own they can overlap, down to "
            f"{max(1.0, ratio):.2f}x. {verdict_text} Its largest part is writing `{largest}` (its rows and "
            f"indexes): {largest_s / parts_of_s:.0%} of the run of {parts_of_s:.2f} s below."
        ),
        "",
        *table(
            [f"the write floor's largest parts (the run of {parts_of_s:.2f} s)", "seconds", "share"],
            [[f"`{name}`", f"{seconds:.2f}", f"{seconds / parts_of_s:.0%}"] for name, seconds in parts],
        ),
    ]


def size_text(database):
    """Bytes per binary, and of them those of each kind of object (dbstat's)."""
    binaries = max(database["counts"]["binaries"], 1)
    kinds = ", ".join(f"{kind} {database['by_kind'][kind] / binaries:.0f}" for kind in KINDS)
    return f"{database['bytes_per_binary']:.0f} bytes ({kinds})"


def size_floor_sentence(database):
    """Bytes per binary added up kind by kind (the rows alone, then each kind of index in turn), the first kind
    that takes the size over the target, and what the others take without it: whether leaving that kind out
    would meet the target, or the floor is elsewhere."""
    binaries = max(database["counts"]["binaries"], 1)
    said, total, over = [], 0, None
    for kind in KINDS:
        total += database["by_kind"][kind] / binaries
        within = total <= MAX_BYTES_PER_BINARY
        said.append(f"{'with the ' if said else ''}{kind} {total:.0f} ({'within' if within else 'over'})")
        over = over or (None if within else kind)
    if not over:
        return f"Bytes per binary added up by kind of object (dbstat): {', '.join(said)}: within the target."
    others = sum(database["by_kind"][kind] for kind in KINDS if kind != over) / binaries
    without = "within" if others <= MAX_BYTES_PER_BINARY else "still over"
    return (
        f"Bytes per binary added up by kind of object (dbstat): {', '.join(said)}: the {over} take it over the "
        f"{MAX_BYTES_PER_BINARY}-byte target. Without them, the rest take {others:.0f} bytes, {without}."
    )


def render_database(database, heading="### Database size", size_target=True):
    counts = ", ".join(f"{key} {value:,}" for key, value in database["counts"].items())
    binaries = max(database["counts"]["binaries"], 1)
    return [
        heading,
        "",
        (
            f"{database['bytes'] / 1e6:.1f} MB for {database['counts']['binaries']:,} binaries: "
            f"**{database['bytes_per_binary']:.0f} bytes per binary**. Rows: {counts}."
        ),
        "",
        *([size_floor_sentence(database), ""] if size_target else []),
        "The largest tables and indexes (SQLite's dbstat):",
        "",
        *table(
            ["", "MB", "bytes per binary"],
            [[f"`{name}`", f"{size / 1e6:.1f}", f"{size / binaries:.1f}"] for name, size in database["largest"]],
        ),
    ]


def unchanged_sentence(unchanged):
    return (
        f"Unchanged rebuild: **{unchanged['fraction_of_full']:.1%}** of the full build; database file untouched "
        f"(inode, bytes, mtime, content): {'yes' if unchanged['wrote_nothing'] else '**no**'}."
    )


def render_incremental(pages):
    unchanged, added = pages["unchanged_rebuild"], pages["add_tag"]
    floor = added["unchanged_floor"]
    copies = ", ".join(f"{seconds:.2f}" for seconds in added["copies_s"])
    return [
        "### Incremental builds",
        "",
        *table(
            RUN_HEADER,
            [
                run_row("unchanged rebuild", unchanged),
                ["one addition first, untimed", f"{added['warm_up_s']:.2f} s", "", "", ""],
                run_row(f"add tag {pages['extra_tag']} to a copy", added["add_tag"]),
                run_row("remove it again (the build without it)", added["remove_tag"]),
                run_row("that tag alone, new file", added["tag_alone"]),
                [
                    "a plain copy of a fresh copy of the database (copyfile, fsync)",
                    f"{added['copy_s']:.2f} s",
                    "",
                    "",
                    copies,
                ],
                [
                    f"the corpus's {floor['files']:,} files found unchanged (floor)",
                    f"{floor['seconds']:.2f} s",
                    "",
                    "",
                    ", ".join(f"{seconds:.2f}" for seconds in floor["runs_s"]),
                ],
            ],
        ),  # fmt: skip
        "",
        unchanged_sentence(unchanged),
        (
            f"Adding a tag costs {added['add_tag']['wall_s']:.2f} s, {added['beyond_copy_s']:.2f} s beyond a plain "
            f"copy of the database ({added['copy_s']:.2f} s): **{added['ratio_wall']:.2f}x** building that tag "
            f"alone; pages and binaries of the result = base + tag alone: {'yes' if added['counts_add_up'] else '**no**'}."
        ),
        (
            f"Removing it again costs {added['remove_tag']['wall_s']:.2f} s, {added['remove_beyond_copy_s']:.2f} s "
            f"beyond the copy: **{added['remove_ratio_wall']:.2f}x** building that tag alone; every row count as "
            f"before it was added: {'yes' if added['removed_as_before'] else '**no**'}."
        ),
        render_unchanged_floor(added),
    ]


# Adding the tag to a copy and removing it again: add_tag's keys for each (its runs, its ratio, its seconds
# beyond the plain copy).
ADDING = ("add_tag", "ratio_wall", "beyond_copy_s")
REMOVING = ("remove_tag", "remove_ratio_wall", "remove_beyond_copy_s")


def without_floor(added, change):
    """A change's ratio to that tag alone without the unchanged-input floor: adding the tag and removing it
    again both find the same corpus's files unchanged."""
    beyond_copy_s = added[change[2]]
    return (beyond_copy_s - added["unchanged_floor"]["seconds"]) / added["tag_alone"]["wall_s"]


def change_met(added, change):
    """Whether a change meets the target; None (not measured) when the plain copy took as long as the change or
    longer: subtracting it leaves nothing of the change to price. (On this VM the same copy took 0.3-6 s, by
    how much of the file just written the kernel still held to write back.)"""
    _, ratio, beyond_copy = change
    if added[beyond_copy] <= 0:
        return None
    return added[ratio] <= MAX_ADD_TAG_RATIO


def change_text(added, change):
    runs, ratio, beyond_copy = change
    priced = "" if added[beyond_copy] > 0 else "; not priced: the plain copy took longer than the change, copy included"
    return (
        f"{added[ratio]:.2f}x (({added[runs]['wall_s']:.1f} s - copy {added['copy_s']:.1f} s) / "
        f"{added['tag_alone']['wall_s']:.1f} s); {without_floor(added, change):.2f}x without finding "
        f"{added['unchanged_floor']['files']:,} files unchanged (floor {added['floor_ratio']:.2f}x){priced}"
    )


def render_unchanged_floor(added):
    """The floor of adding a tag, and of removing it again: finding out that the corpus's files did not change."""
    floor, ratio = added["unchanged_floor"], added["floor_ratio"]
    parts = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in floor["parts"].items())
    if ratio > MAX_ADD_TAG_RATIO:
        verdicts = [
            f"That floor alone is over the {MAX_ADD_TAG_RATIO}x target: no build that checks its inputs file by "
            "file meets it."
        ]
    else:
        verdicts = floor_verdicts(added)
    return " ".join(
        [
            f"**Unchanged-input floor** (`benchmarks/floors.py unchanged`, after each addition): finding out, with "
            f"the build's own steps for files it read before, that the corpus's {floor['files']:,} files did not "
            f"change takes {floor['seconds']:.2f} s (the run of {floor['parts_of_s']:.2f} s: {parts}), {ratio:.2f}x "
            "building that tag alone; no incremental build skips it, adding the tag or removing it again. Without "
            f"it, adding the tag costs **{without_floor(added, ADDING):.2f}x** building that tag alone, and "
            f"removing it again **{without_floor(added, REMOVING):.2f}x**.",
            *verdicts,
            *overlap_sentence(added),
        ]
    )


def overlap_sentence(added):
    """Why a ratio without the floor can be below 0: the copy and the floor are measured apart and subtracted whole."""
    if min(without_floor(added, ADDING), without_floor(added, REMOVING)) >= 0:
        return []
    return [
        "Below 0: the plain copy and the floor are measured apart from the builds and subtracted whole, and inside a "
        "build they cost less: adding, the build finds its files unchanged while its writer process copies the "
        "database; removing, it copies the addition's output, a file in another state than the plain copy's."
    ]


def floor_verdicts(added):
    """What the unchanged-input floor says of adding the tag and of removing it again, a sentence per verdict
    ('For adding and removing, ...' when both have the same); none for a change that meets the target."""
    named = {}  # verdict -> the changes it is said of
    for name, change in (("adding", ADDING), ("removing", REMOVING)):
        _, ratio, _ = change
        verdict = floor_verdict(added[ratio], without_floor(added, change))
        if verdict:
            named.setdefault(verdict, []).append(name)
    return [f"For {' and '.join(names)}, {verdict}" for verdict, names in named.items()]


def floor_verdict(ratio, without):
    """What the unchanged-input floor says of one change's ratio ('' when it meets the target)."""
    if ratio > MAX_ADD_TAG_RATIO >= without:
        return f"this floor is what keeps the ratio over the {MAX_ADD_TAG_RATIO}x target."
    if without > MAX_ADD_TAG_RATIO:
        return f"the ratio is still over the {MAX_ADD_TAG_RATIO}x target without it: the rest is the build's own."
    return ""


def latency_cells(timing):
    return [status_text(timing), f"{timing['median_ms']:.1f}", f"{timing['p95_ms']:.1f}", timing["requests"]]


def count_cell(timing):
    return "timed out" if timing["row_count"] is None else f"{timing['row_count']:,}"


def facets_cell(timing):
    return ", ".join(f"{facet} ({n})" for facet, n in timing["facets_timed_out"].items()) or "none"


LATENCY_HEADER = ["status", "median ms", "p95 ms", "requests"]


def render_served(serving):
    fallen_back, searched_fallen_back = (
        serving["facet_values_fallen_back"],
        serving["searched_facet_values_fallen_back"],
    )
    fallback = (
        f" The page gave no values for {', '.join(fallen_back)}: those clicks use the realistic parameters."
        if fallen_back
        else ""
    )
    if searched_fallen_back:
        fallback += (
            f" The broad search's page gave no values for {', '.join(searched_fallen_back)}: those clicks after it"
            " use the binaries page's."
        )
    clicks = []
    for t in serving["facet_clicks"]:
        met = answered_in_time(t, MAX_TABLE_PAGE_P95_MS, with_count=True)
        clicks.append(
            [t["name"], f"`{shown_url(t['url'])}`", *latency_cells(t), count_cell(t), facets_cell(t), verdict(met)]
        )
    binaries = serving["binaries_page"]
    binaries_met = verdict(answered_in_time(binaries, MAX_BINARIES_PAGE_P95_MS, with_count=True))
    parameters = ", ".join(f"{key}={value}" for key, value in serving["parameters"].items())
    canned = []
    for t in serving["canned_queries"]:
        unset = f" ({', '.join(t['unset'])} empty)" if t["parameters"] == "realistic" and t["unset"] else ""
        canned.append([t["query"], t["parameters"] + unset, *latency_cells(t),
                       verdict(answered_in_time(t, MAX_CANNED_P95_MS, with_count=False))])  # fmt: skip
    page_header = ["url", *LATENCY_HEADER, "row count", "facets timed out", "target"]
    return [
        "### Served pages",
        "",
        "The binaries page; the first value (most binaries, root left out) of each facet the page shows"
        + (
            " and the one with the fewest"
            if any(c["name"].endswith(", fewest") for c in serving["facet_clicks"])
            else ""
        )
        + (
            ", the first stack, os and compiler together"
            if any(c["name"] == "stack, os and compiler" for c in serving["facet_clicks"])
            else ""
        )
        + ", the package with the most binaries in the newest tag, a search, a broad search, and the first value of"
        " each facet the broad search's page shows." + fallback,
        "",
        *table(
            page_header,
            [
                [
                    f"`{binaries['url']}`",
                    *latency_cells(binaries),
                    count_cell(binaries),
                    facets_cell(binaries),
                    binaries_met,
                ]
            ],
        ),  # fmt: skip
        "",
        *table(["", *page_header], clicks),
        "",
        *render_full_text(serving),
        f"Every canned query as HTML. Realistic parameters (each query takes those it has): {parameters}."
        + (
            " find_binaries is also asked in every tag for the stack and os with the fewest binaries in the"
            " history, for a stack and os with none (binaries_facet_pairs), and for the realistic package alone."
            if any(t["parameters"].startswith("tag=*") for t in serving["canned_queries"])
            else ""
        ),
        "",
        *table(["query", "parameters", *LATENCY_HEADER, f"p95 <= {MAX_CANNED_P95_MS} ms"], canned),
    ]


def render_full_text(serving):
    """What each search matched in the full-text index, measured with SQL: at least what counting it costs."""
    # Each search once: the clicks after it find what it finds.
    searches = {
        click["full_text"]["search"]: click["full_text"] for click in serving["facet_clicks"] if "full_text" in click
    }
    if not searches:
        return []
    found = "; ".join(f"`?_search={search}`: {full_text_words(matched)}" for search, matched in searches.items())
    return [
        f"What each search matches in the full-text index, listed with SQL (no time limit, median of 3): {found}. "
        f"A row count may take up to {serving['count_time_limit_ms']} ms (what web/counts.py leaves it of Datasette's"
        " sql_time_limit_ms), and counting the binaries of those rows reads at least them.",
        "",
    ]


def render_pages(shape, pages, runs, cores):
    return [
        f"## {SHAPE_LABELS[shape].capitalize()}",
        "",
        *render_full_build(
            pages, runs, "benchmarks/lower_bound.py: orjson, flat executemany in one transaction", cores
        ),
        "",
        *render_database(pages["database"]),
        "",
        *render_incremental(pages),
        "",
        *render_served(pages["serving"]),
    ]


def render_edges(edges):
    rows = [[f"`{name}`", f"{size / 1e6:.1f}"] for name, size in edges["objects"].items()]
    per_edge = "not measured" if edges["bytes_per_edge"] is None else f"{edges['bytes_per_edge']:.1f}"
    return [
        (
            f"Dependency edges: {edges['edges']:,} (rows of the `dependencies` view), stored in the tables that "
            f"join two specs, the tables they refer to for the edges' kinds, and their indexes: "
            f"{edges['bytes'] / 1e6:.1f} MB, **{per_edge} bytes per edge**."
        ),
        "",
        *table(["", "MB"], rows),
    ]


def render_dependency_questions(serving):
    subjects = serving["dependency_subjects"]
    packages = ", ".join(f"{name} ({n:,} edges)" for name, n in subjects["packages"])
    external = subjects["external"]
    tree, slowest = subjects["tree"], subjects["slowest"]
    rows = []
    for t in serving["dependency_questions"]:
        limit = MAX_TABLE_PAGE_P95_MS if t["kind"] == "table" else MAX_CANNED_P95_MS
        count = count_cell(t) if t["kind"] == "table" else ""
        as_json = f"{t['as_json']['median_ms']:.1f} / {t['as_json']['p95_ms']:.1f}" if "as_json" in t else ""
        met = answered_in_time(t, limit, with_count=t["kind"] == "table")
        rows.append(
            [f"`{shown_url(t['url'])}`", t["subject"], *latency_cells(t), as_json, count, f"{limit} ms", verdict(met)]
        )
    return [
        "### Dependency questions",
        "",
        (
            f"Found with SQL over the `dependencies` view of the whole history ({subjects['counted_s']:.0f} s): "
            f"the most depended-on packages {packages}"
            + (f" and external {external[0]} ({external[1]:,} edges)" if external else "")
            + f". The binary of {tree['tag']} with the largest dependency tree (link and run, transitively; the "
            f"largest of the {TREE_CANDIDATES} with the most paths, {tree['seconds']:.0f} s): {tree['hash']}, "
            f"{tree['tree_size']:,} specs."
            f" Of the next {len(subjects['candidates'])} most depended-on packages, the one whose dependents took longest "
            f"as JSON (each asked twice, the faster counting, once the query had been asked "
            f"{slowest['warm_ups']} times to prepare it on Datasette's connections): {slowest['package']} "
            f"({slowest['json_ms'][slowest['package']]:.0f} ms; the median of all "
            f"{statistics.median(slowest['json_ms'].values()):.0f} ms)."
        ),
        "",
        "A question's page (HTML) is timed against its target; the same answer as JSON, timed beside it, is the "
        "query without the page.",
        "",
        *table(["url", "asks about", *LATENCY_HEADER, "as JSON median / p95 ms", "row count", "limit", "target"], rows),
    ]


def render_indexes(indexes, runs, cores):
    big = indexes["big_tag"]
    compared = (
        f"Binaries from indexes {indexes['binaries']:,}, from the usual shape's pages {indexes['page_binaries']:,}."
        if indexes["page_binaries"] is not None
        else "The listing is not the usual corpus's: its binaries are not compared with pages."
    )
    return [
        "## History built from its indexes",
        "",
        *render_full_build(
            indexes,
            runs,
            "benchmarks/lower_bound_indexes.py: checksums, orjson, flat executemany of binaries, labels and edges",
            cores,
        ),  # fmt: skip
        "",
        compared,
        "",
        *render_database(indexes["database"], "### Database size and dependency edges", size_target=False),
        "",
        *render_edges(indexes["edges"]),
        "",
        "### Unchanged rebuild and the busy tag",
        "",
        *table(RUN_HEADER, [run_row("unchanged rebuild", indexes["unchanged_rebuild"]), run_row("busy tag", big)]),
        "",
        unchanged_sentence(indexes["unchanged_rebuild"]),
        f"The busy tag: {big['binaries']:,} binaries, root index {big['root_index_bytes'] / 1e6:.0f} MB of JSON.",
        "",
        *render_served(indexes["serving"]),
        "",
        *render_dependency_questions(indexes["serving"]),
    ]


def render_report(results):
    lines = [f"# Benchmark: {results['name']} ({results['size']} corpora)", ""]
    for part in (render_targets(results), render_machine(results), render_corpora(results)):
        lines += part + [""]
    for shape, pages in results["pages"].items():
        lines += render_pages(shape, pages, results["runs"], results["machine"]["cores"]) + [""]
    if "indexes" in results:
        lines += render_indexes(results["indexes"], results["index_runs"], results["machine"]["cores"]) + [""]
    return "\n".join(lines)
