"""The package page (the canned query `package`): what the build cache has of one package.

The query's rows (one per version and tag) make the versions × tags table; the binaries come from the
find_binaries question, run for the tag and filters the page's form chooses; the history charts are the
package-history dashboard's, drawn on the page.
"""

import asyncio
from dataclasses import dataclass, field
from urllib.parse import urlencode

from datasette.utils import path_with_replaced_args
from markupsafe import Markup, escape

from spack_cache_db.db.schema import NO_DEPENDENCIES
from spack_cache_db.query import canned, diff, find, lookup
from spack_cache_db.web import cells, views
from spack_cache_db.web.questions import most_rows, rows

BINARY_FILTERS = ("version", "variant", "compiler", "os", "target", "host")
# Per filter, the values this package's binaries have (over every tag), by package name: its versions, and
# the compilers, operating systems and targets of its configurations that some tag lists (a listing is a
# listed configuration: not those of specs that are only dependencies), read together in one pass.
_VERSIONS = (
    "SELECT version FROM versions JOIN packages ON packages.id = versions.package_id"
    " WHERE packages.name = ? ORDER BY version_rank DESC"
)
_LISTED_PARTS = (
    "SELECT DISTINCT compilers.name, compilers.label, oss.name, targets.name FROM packages"
    " JOIN versions ON versions.package_id = packages.id JOIN configurations ON configurations.version_id = versions.id"
    " JOIN compilers ON compilers.id = configurations.compiler_id JOIN oss ON oss.id = configurations.os_id"
    " JOIN targets ON targets.id = configurations.target_id WHERE packages.name = ?"
    " AND EXISTS (SELECT 1 FROM listings WHERE listings.configuration_id = configurations.id)"
)
_HOSTS = "SELECT name, family FROM microarchitectures ORDER BY family, name"
_TAGS = (
    "SELECT tags.name, tags.kind, tags.snapshot_date, pages.num_specs FROM packages"
    " JOIN pages ON pages.package_id = packages.id JOIN tags ON tags.id = pages.tag_id"
    " WHERE packages.name = ? ORDER BY tags.sort_order"
)
HISTORY = "package-history"  # the dashboard whose charts the page draws
_DEPTYPES = "replace(replace(replace(dependency_kinds.deptypes, '[\"', ''), '\"]', ''), '\", \"', ', ')"
# The package's binaries in a tag (parameters: package, tag), read through the page that lists them.
_BINARIES = """
SELECT page_specs.spec_id FROM packages
CROSS JOIN pages ON pages.package_id = packages.id AND pages.tag_id = (SELECT id FROM tags WHERE name = :tag)
CROSS JOIN page_specs ON page_specs.page_id = pages.id
WHERE packages.name = :package
"""
# What the package's binaries in a tag depend on (from build-cache indexes): per dependency and deptypes.
_DEPENDENCIES = f"""
SELECT dependency.package, group_concat(DISTINCT dependency.version), {_DEPTYPES},
    count(DISTINCT binaries.spec_id), max(dependency.external)
FROM ({_BINARIES}) AS binaries
CROSS JOIN spec_dependencies ON spec_dependencies.spec_id = binaries.spec_id
CROSS JOIN dependency_kinds ON dependency_kinds.id = spec_dependencies.kind_id
CROSS JOIN spec_names AS dependency ON dependency.id = spec_dependencies.dependency_id
GROUP BY dependency.package, dependency_kinds.deptypes
ORDER BY dependency.package, 3
"""
# The packages of a tag whose binaries link straight against one of the package's binaries there: their link
# edges are searched kind by kind (the index of edges by dependency has the kind next), and only the link kinds
# that some version of the package is a dependency of, as the build counted them: a package nothing links
# against probes nothing (cit of the history from indexes: 36 ms of 17 kinds per binary, down to none). Each
# kind's flag is read by its key: joined, SQLite would read every kind for a Bloom filter.
_DEPENDENTS = f"""
SELECT dependent_packages.name, count(DISTINCT edges.spec_id)
FROM spec_dependencies AS edges
CROSS JOIN spec_tags ON spec_tags.spec_id = edges.spec_id
CROSS JOIN packages AS dependent_packages ON dependent_packages.id = spec_tags.package_id
WHERE (edges.dependency_id, edges.kind_id) IN (
    SELECT binaries.spec_id, link_kinds.id FROM ({_BINARIES}) AS binaries
    CROSS JOIN (
        SELECT DISTINCT dependency_edge_counts.kind_id AS id FROM packages
        CROSS JOIN versions ON versions.package_id = packages.id
        CROSS JOIN dependency_edge_counts ON dependency_edge_counts.version_id = versions.id
        WHERE packages.name = :package
          AND (SELECT is_link FROM dependency_kinds WHERE dependency_kinds.id = dependency_edge_counts.kind_id)
    ) AS link_kinds
)
  AND spec_tags.tag_id = (SELECT id FROM tags WHERE name = :tag)
GROUP BY dependent_packages.name
ORDER BY dependent_packages.name
"""


@dataclass
class Matrix:
    """Versions (newest first) × develop and the releases that have the package, and the weekly snapshots
    summed up in one column: how many, the first and the last."""

    columns: list
    rows: list = field(default_factory=list)  # [(version, [cell text or "", ...])]


@dataclass
class PackagePage:
    package: str
    tags: list  # [(name, kind, snapshot_date, binaries)] in the usual order
    tag: str  # the tag whose binaries are listed
    filters: dict  # {name: value} of the binaries' filters
    choices: dict  # {name: [(value, group)]}
    binaries: list  # the first of find_binaries' rows (a page of Datasette's size), as dicts
    found: int  # how many find_binaries found (binaries are the first of them)
    found_all: bool  # whether those are all that match; if not, find_binaries stopped at its most rows
    all_url: str  # find_binaries with the same package, tag and filters: all that match, on pages of their own
    charts: dict  # {slug: chart} of the history dashboard, as its plugin draws them
    dependencies: list  # [(package, versions, deptypes, binaries that need it, external)] in the tag
    dependents: list  # [(package, binaries)]: packages of the tag that link against this one
    missing_dependencies: str | None  # why the database has none (pages do not list them), None when it has some
    differences: diff.Differences | None  # with differences=1: what varies among the binaries listed
    differences_url: str  # the page with the other choice of differences
    tree_url: str  # the dependency tree of the first binary listed
    diff_url: str  # where the binaries ticked are compared


async def package_page(datasette, database, request):
    """What the page shows besides the query's rows, or None when no package of this name is there."""
    package = request.args.get("package", "").strip().lower()
    tags = await rows(datasette, database, _TAGS, [package]) if package else []
    if not tags:
        return None
    tag_names = [name for name, *_ in tags]
    tag = request.args.get("tag", "")
    tag = tag if tag in tag_names else tag_names[0]
    filters = {name: request.args.get(name, "").strip() for name in BINARY_FILTERS}
    find_binaries = await datasette.get_canned_query(database, "find_binaries", request.actor)
    missing_dependencies = None if await rows(datasette, database, lookup.HAS_EDGES) else NO_DEPENDENCIES
    asked = {"package": package, "tag": tag}
    params = {**find.parameters(""), **filters, **asked}
    # Independent reads, asked together: Datasette's SQL threads answer them side by side (the binaries,
    # dependencies and dependents of the package with the most binaries took 80 ms one after the other).
    found, most, dependencies, dependents, versions, parts, hosts = await asyncio.gather(
        datasette.execute(database, find_binaries["sql"], params),
        most_rows(datasette, database, "find_binaries", params),
        rows(datasette, database, _DEPENDENCIES, asked) if missing_dependencies is None else _none(),
        rows(datasette, database, _DEPENDENTS, asked) if missing_dependencies is None else _none(),
        rows(datasette, database, _VERSIONS, [package]),
        rows(datasette, database, _LISTED_PARTS, [package]),
        rows(datasette, database, _HOSTS),
    )
    dashboard = (datasette.plugin_config("datasette-dashboards") or {}).get(HISTORY, {})
    binaries = [
        dict(zip(found.columns, row, strict=True)) for row in found.rows[: datasette.setting("default_page_size")]
    ]
    only_differences = request.args.get("differences") == "1"
    return PackagePage(
        package=package,
        tags=tags,
        tag=tag,
        filters=filters,
        choices=_choices(versions, parts, hosts),
        binaries=binaries,
        found=len(found.rows),
        found_all=not canned.reaches_its_limit(len(found.rows), most),
        all_url=views.question_url(datasette, database, "find_binaries", {**asked, **filters}),
        charts=dashboard.get("charts", {}),
        dependencies=dependencies,
        dependents=dependents,
        missing_dependencies=missing_dependencies,
        differences=await _differences(datasette, database, binaries) if only_differences and binaries else None,
        differences_url=path_with_replaced_args(request, {"differences": None if only_differences else "1"})
        + "#binaries",
        tree_url=views.page_url(
            datasette, database, views.DEPENDENCIES, {"hash": binaries[0]["hash"] if binaries else "", "tag": tag}
        ),
        diff_url=views.page_url(datasette, database, views.DIFF),
    )


async def _none():
    return []


def _choices(versions, parts, hosts):
    """{filter: [(value, group)]}: versions newest first, compilers by name then label, operating systems and
    targets by name (SQLite's order: by their UTF-8 bytes, as Python orders text), hosts by family."""
    parts = sorted(parts)
    return {
        "version": [(version, None) for (version,) in versions],
        "compiler": [(label, None) for label in dict.fromkeys(label for _, label, _, _ in parts)],
        "os": [(name, None) for name in sorted({os_name for _, _, os_name, _ in parts})],
        "target": [(name, None) for name in sorted({target for *_, target in parts})],
        "host": [(name, family) for name, family in hosts],
    }


def binary_rows(page, columns, cell):
    """The rows of the binaries table as HTML (a page of them: put together here rather than cell by cell in the
    template, which costs more than the cells): a box to tick to compare, then each column's cell, by
    cell(column, value); with differences shown, the parts that vary and each binary's own variants."""
    rows = []
    for binary in page.binaries:
        spec_hash = escape(binary["hash"])
        cells = "".join(
            f'<td class="col-{column}">{_binary_cell(page.differences, binary, column, cell)}</td>'
            for column in columns
        )
        rows.append(
            f'<tr><td class="col-compare"><input type="checkbox" name="hash" value="{spec_hash}"'
            f' aria-label="compare {spec_hash}"></td>\n        {cells}</tr>\n'
        )
    return Markup("".join(rows))


def dependency_rows(page, database_path):
    """The rows of the dependencies table as HTML (the binaries of a package in a tag may need 2,000 packages):
    each dependency linking to its page, its versions, how it is needed and by how many binaries."""
    return Markup(
        "".join(
            f'<tr><td><a href="{escape(cells.package_url(database_path, name))}">{escape(name)}</a>'
            f"{' (external)' if external else ''}</td>\n"
            f"        <td>{escape(versions)}</td><td>{escape(how)}</td><td>{count:,}</td></tr>\n"
            for name, versions, how, count, external in page.dependencies
        )
    )


def _binary_cell(differences, binary, column, cell):
    if differences and column == "variants":
        return Markup(
            "".join(f"<code>{escape(variant)}</code> " for variant in differences.own_variants[binary["hash"]])
        )
    if differences and column in differences.varying:
        return escape(cell(column, differences.parts[binary["hash"]][column]))
    return escape(cell(column, binary[column]))


async def _differences(datasette, database, binaries):
    builds = [{"hash": binary["hash"], "stacks": binary["stacks"]} for binary in binaries]
    return await datasette.get_database(database).execute_fn(lambda conn: diff.differences(conn, builds))


def matrix(query_rows, page_url):
    """The versions × tags table of the package query's rows (version, tag, kind, snapshot_date, binaries,
    ...), each count linking to the page's binaries of that version and tag."""
    releases = []
    by_version = {}
    for row in query_rows:
        version, tag, kind, date, binaries = (
            row["version"],
            row["tag"],
            row["kind"],
            row["snapshot_date"],
            row["binaries"],
        )
        cells = by_version.setdefault(version, {"tags": {}, "snapshots": []})
        if kind == "snapshot":
            cells["snapshots"].append(date or tag)
        else:
            cells["tags"][tag] = binaries
            if kind != "develop" and tag not in releases:
                releases.append(tag)
    in_develop = any("develop" in cells["tags"] for cells in by_version.values())
    in_snapshots = any(cells["snapshots"] for cells in by_version.values())
    tags = ["develop"] * in_develop + releases
    table = Matrix(tags + ["weekly snapshots"] * in_snapshots)
    for version, cells in by_version.items():
        row_cells = []
        for tag in tags:
            count = cells["tags"].get(tag)
            link = f"{page_url}&" + urlencode({"tag": tag, "version": version}) + "#binaries"
            row_cells.append((f"{count:,}", link) if count else ("", None))
        if in_snapshots:
            row_cells.append((_snapshots_summary(sorted(cells["snapshots"])), None))
        table.rows.append((version, row_cells))
    return table


def _snapshots_summary(dates):
    if len(dates) > 1:
        return f"{len(dates)} snapshots: {dates[0]} to {dates[-1]}"
    return f"1 snapshot: {dates[0]}" if dates else ""
