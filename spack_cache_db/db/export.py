"""Write the pages back out from the database, in the form cache.spack.io's generator writes."""

import errno
import json
import os
import sqlite3
from pathlib import Path

import sqlite_utils

from spack_cache_db.db.connection import database_uri
from spack_cache_db.db.load import BUILT_COLUMNS
from spack_cache_db.normalise import (
    Compiler,
    binaries_per_stack,
    meta_of,
    meta_text,
    name_problem,
    standard_tarball_url,
)
from spack_cache_db.read.files import read_start

PAGES = """
SELECT pages.id, tags.name AS tag, packages.name AS package, pages.meta, pages.sorted_keys, key_orders.keys AS key_order,
    pages.extra
FROM pages JOIN tags ON tags.id = pages.tag_id JOIN packages ON packages.id = pages.package_id
LEFT JOIN key_orders ON key_orders.id = pages.key_order_id
ORDER BY tags.name, packages.name
"""

# A spec's fields: its configuration's parts, and Built's fields a configuration stores as they are (by name).
SPECS = f"""
SELECT specs.hash, configuration_specs.compiler_name AS compiler, configuration_specs.compiler_version,
    page_specs.compiler_exact, configuration_specs.os, configuration_specs.platform, specs.size, stack_sets.stacks,
    configuration_specs.target, configuration_specs.variants, configuration_specs.version, page_specs.extra,
    page_specs.standard_tarball{"".join(f", configurations.{column}" for column in BUILT_COLUMNS)}
FROM page_specs
JOIN specs ON specs.id = page_specs.spec_id
JOIN configuration_specs ON configuration_specs.configuration_id = specs.configuration_id
JOIN configurations ON configurations.id = specs.configuration_id
JOIN listings ON listings.id = page_specs.listing_id
JOIN stack_sets ON stack_sets.id = listings.stack_set_id
WHERE page_specs.page_id = ?
ORDER BY page_specs.position
"""


class ExportError(Exception):
    """Export stopped: the message names the file or folder and says why."""


def export(database, outdir):
    """Write OUTDIR/_cache/<tag>/<package>/specs.md for every page; returns how many were written. Nothing is
    written outside OUTDIR: a link inside it is never followed."""
    if read_start(database, 0) is None:  # a FIFO would block SQLite's open
        raise ExportError(f"{database}: expected a database built by spack-cache-db, found nothing")
    conn = sqlite3.connect(database_uri(database), uri=True)
    db = sqlite_utils.Database(conn)
    written = 0
    try:
        pages = list(db.query(PAGES))
        root = _open_outdir(outdir)
        try:
            for page in pages:
                tag, package = page["tag"], page["package"]
                for table, name in (("tags", tag), ("packages", package)):
                    problem = name_problem(name, "a name that can be a folder")
                    if problem:
                        raise ExportError(f"{database}: {table}.name: {problem}")
                specs = [_spec_entry(tag, package, row) for row in db.query(SPECS, [page["id"]])]
                order = None if page["sorted_keys"] else json.loads(page["key_order"])
                entries = [_ordered(entry, order) for entry in specs]
                meta = meta_text(implied_meta(specs), page["sorted_keys"]) if page["meta"] is None else page["meta"]
                text = page_text(package, tag, meta, entries, page["extra"])
                _write_inside(root, Path(outdir), ("_cache", tag, package), "specs.md", text.encode("utf-8"))
                written += 1
        finally:
            os.close(root)
    except sqlite3.DatabaseError as error:
        raise ExportError(f"{database}: expected a database built by spack-cache-db ({error})") from error
    finally:
        conn.close()
    return written


def _open_outdir(outdir):
    """OUTDIR, made if missing, opened as the user named it (it may be a link)."""
    try:
        os.makedirs(outdir, exist_ok=True)
        return os.open(outdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise ExportError(f"{outdir}: expected a folder that can be written ({error.strerror})") from error


def _write_inside(root, outdir, folders, name, data):
    """Write root/folders.../name, never through a link: each folder is opened relative to the one before
    with O_NOFOLLOW, and the file is replaced (a link there is replaced, not followed)."""
    fd, where = os.dup(root), outdir
    try:
        for folder in folders:
            where = where / folder
            child = _enter(fd, folder, where, outdir)
            os.close(fd)
            fd = child
        _replace(fd, name, data, where / name)
    finally:
        os.close(fd)


def _enter(parent, name, where, outdir):
    """The folder name inside parent, made if missing, opened without following a link."""
    try:
        try:
            os.mkdir(name, dir_fd=parent)
        except FileExistsError:
            pass
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            found = "a link" if os.path.islink(where) else "a file"
            raise ExportError(
                f"{where}: expected a folder, found {found} (export writes only inside {outdir})"
            ) from error
        raise ExportError(f"{where}: expected a folder that can be written ({error.strerror})") from error


def _replace(folder, name, data, where):
    temporary = f".{name}.tmp-{os.getpid()}"
    try:
        fd = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=folder
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError as error:
        _remove_quietly(temporary, folder)
        raise ExportError(f"{where}: expected a file that can be written ({error.strerror})") from error


def _remove_quietly(name, folder):
    try:
        os.unlink(name, dir_fd=folder)
    except OSError:  # not there, or the folder cannot be written: the error that matters is being raised
        pass


def _spec_entry(tag, package, row):
    name, version, spec_hash = row["compiler"], row["compiler_version"], row["hash"]
    entry = {
        "compiler": name if version is None else f"{name}@{'=' if row['compiler_exact'] else ''}{version}",
        "hash": spec_hash,
        "os": row["os"],
        "platform": row["platform"],
        "size": "-" if row["size"] is None else row["size"],
        "stacks": json.loads(row["stacks"]),
        "target": row["target"],
        "variants": json.loads(row["variants"]),
        "versions": [row["version"]],
    }
    entry.update({column: row[column] for column in BUILT_COLUMNS if row[column] is not None})
    if row["extra"]:
        entry.update(json.loads(row["extra"]))
    if row["standard_tarball"]:
        entry["tarball"] = standard_tarball_url(
            tag, package, row["version"], row["platform"], row["os"], row["target"], Compiler(name, version), spec_hash
        )
    return entry


def implied_meta(specs):
    """The meta that a page's spec_details entries imply (normalise.derived_meta, of what export writes)."""
    return meta_of(
        compilers=[spec["compiler"] for spec in specs],
        versions=[spec["versions"][0] for spec in specs],
        oss=[spec["os"] for spec in specs],
        platforms=[spec["platform"] for spec in specs],
        targets=[spec["target"] for spec in specs],
        by_stack=binaries_per_stack(tuple(spec["stacks"]) for spec in specs),
        binaries=len(specs),
    )


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
