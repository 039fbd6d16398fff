"""Write the pages back out from the database, in the form cache.spack.io's generator writes."""

import json
import sqlite3
from pathlib import Path

from .files import database_uri
from .normalise import Compiler, standard_tarball_url

PAGES = """
SELECT pages.id, tags.name, packages.name, pages.meta, pages.sorted_keys, pages.key_order, pages.extra
FROM pages JOIN tags ON tags.id = pages.tag_id JOIN packages ON packages.id = pages.package_id
ORDER BY tags.name, packages.name
"""

SPECS = """
SELECT specs.hash, compilers.name, compilers.version, page_specs.compiler_exact, oss.name, platforms.name,
    specs.size, stack_sets.stacks, targets.name, variant_sets.variants, versions.version, page_specs.extra,
    page_specs.standard_tarball
FROM page_specs
JOIN specs ON specs.id = page_specs.spec_id
JOIN configurations ON configurations.id = specs.configuration_id
JOIN versions ON versions.id = configurations.version_id
JOIN compilers ON compilers.id = configurations.compiler_id
JOIN oss ON oss.id = configurations.os_id
JOIN platforms ON platforms.id = configurations.platform_id
JOIN targets ON targets.id = configurations.target_id
JOIN variant_sets ON variant_sets.id = configurations.variant_set_id
JOIN listings ON listings.id = page_specs.listing_id
JOIN stack_sets ON stack_sets.id = listings.stack_set_id
WHERE page_specs.page_id = ?
ORDER BY page_specs.position
"""


def export(database, outdir):
    """Write OUTDIR/_cache/<tag>/<package>/specs.md for every page; returns how many were written."""
    conn = sqlite3.connect(database_uri(database), uri=True)
    written = 0
    try:
        for page_id, tag, package, meta, sorted_keys, key_order, extra in conn.execute(PAGES).fetchall():
            specs = [_spec_entry(tag, package, row) for row in conn.execute(SPECS, (page_id,))]
            order = None if sorted_keys else json.loads(key_order)
            text = page_text(package, tag, meta, [_ordered(entry, order) for entry in specs], extra)
            target = Path(outdir) / "_cache" / tag / package / "specs.md"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", newline="")
            written += 1
    finally:
        conn.close()
    return written


def _spec_entry(tag, package, row):
    spec_hash, name, version, exact, os, platform, size, stacks, target, variants, spec_version, extra, tarball = row
    compiler = name if version is None else f"{name}@{'=' if exact else ''}{version}"
    entry = {
        "compiler": compiler,
        "hash": spec_hash,
        "os": os,
        "platform": platform,
        "size": "-" if size is None else size,
        "stacks": json.loads(stacks),
        "target": target,
        "variants": json.loads(variants),
        "versions": [spec_version],
    }
    if extra:
        entry.update(json.loads(extra))
    if tarball:
        entry["tarball"] = standard_tarball_url(
            tag, package, spec_version, platform, os, target, Compiler(name, version), spec_hash
        )
    return entry


def _ordered(entry, order):
    if order is None:
        return dict(sorted(entry.items()))
    rank = {key: number for number, key in enumerate(order)}
    return dict(sorted(entry.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


def page_text(package, tag, meta, specs, extra):
    lines = [
        "---",
        f"title: {json.dumps(package)}",
        "layout: cache",
        f"categories: [package, {tag}]",
        f"meta: {meta}",
        f"spec_details: {json.dumps(specs)}",
    ]
    for key, value in sorted(json.loads(extra).items()) if extra else ():
        lines.append(f"{key}: {json.dumps(value)}")
    lines.append("---")
    return "\n".join(lines)
