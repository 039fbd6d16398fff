"""Keeping a database in step as a build changes it: removing what inputs no longer give, and whatever only
they used (the orphans schema.py's foreign keys define), ranking versions and tags, the full-text indexes,
the query planner's statistics, and the counts Datasette is given."""

import json

from spack_cache_db import normalise
from spack_cache_db.db import schema

RERANKED_VERSIONS = """SELECT id, package_id, version FROM versions WHERE package_id IN (
    SELECT package_id FROM versions GROUP BY package_id HAVING min(version_rank) = 0 OR max(version_rank) <> count(*)
)"""


def rank_versions_and_tags(conn):
    """version_rank in Spack's order within each package, and the version keys SQL compares versions and
    compilers' versions by; sort_order of tags as people expect, and their mirrors. Only the packages whose
    versions changed are ranked again: those with a new version (rank 0, as loaded) or with one gone (a gap
    in their ranks; the others keep their order)."""
    by_package = {}
    for version_id, package_id, version in conn.execute(RERANKED_VERSIONS):
        by_package.setdefault(package_id, []).append((normalise.version_key(version), version, version_id))
    ranks = []
    for versions in by_package.values():
        versions.sort()
        ranks.extend(
            (rank, normalise.sortable_version(key), version_id)
            for rank, (key, _, version_id) in enumerate(versions, start=1)
        )
    conn.executemany("UPDATE versions SET version_rank = ?, version_key = ? WHERE id = ?", ranks)
    compilers = conn.execute("SELECT id, version FROM compilers WHERE version IS NOT NULL").fetchall()
    conn.executemany(
        "UPDATE compilers SET version_key = ? WHERE id = ?",
        [(normalise.version_sort_key(version), compiler_id) for compiler_id, version in compilers],
    )
    tags = [normalise.classify_tag(name) for (name,) in conn.execute("SELECT name FROM tags")]
    tags.sort(key=normalise.tag_sort_key)
    conn.executemany("UPDATE tags SET sort_order = ? WHERE name = ?", [(n, t.name) for n, t in enumerate(tags, 1)])
    # A tag read from its indexes is installed from its root mirror; others from binaries.spack.io.
    conn.execute(
        "UPDATE tags SET mirror_url = coalesce((SELECT mirror_url FROM indexes JOIN stacks ON stacks.id = stack_id"
        " WHERE indexes.tag_id = tags.id AND stacks.name = 'root'), ? || '/' || name)",
        (normalise.MIRROR_ROOT,),
    )


def delete_tags(conn, names):
    """Remove every page of these tags, the indexes they were read from (and the specs those give as
    dependencies only) and the problems of those indexes; returns the ids of the tags."""
    tag_ids = [
        row[0]
        for row in conn.execute(
            "SELECT id FROM tags WHERE name IN (SELECT value FROM json_each(?))", (json.dumps(names),)
        )
    ]
    selected = "(SELECT value FROM json_each(?))"
    ids = (json.dumps(tag_ids),)
    conn.execute(f"DELETE FROM page_specs WHERE page_id IN (SELECT id FROM pages WHERE tag_id IN {selected})", ids)
    conn.execute(f"DELETE FROM pages WHERE tag_id IN {selected}", ids)
    conn.execute(f"DELETE FROM indexes WHERE tag_id IN {selected}", ids)
    conn.execute(f"DELETE FROM dependency_only_specs WHERE tag_id IN {selected}", ids)
    conn.execute(
        "DELETE FROM problems WHERE tag IN (SELECT value FROM json_each(?)) AND path NOT IN (SELECT path FROM sources)",
        (json.dumps(names),),
    )
    return tag_ids


def delete_pages(conn, paths):
    """Remove pages (and, through prune_orphans, whatever only they used); returns the ids of their tags."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS gone (path TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM gone")
    conn.executemany("INSERT INTO gone (path) VALUES (?)", [(p,) for p in paths])
    tag_ids = [
        row[0] for row in conn.execute("SELECT DISTINCT tag_id FROM pages WHERE path IN (SELECT path FROM gone)")
    ]
    conn.execute("DELETE FROM page_specs WHERE page_id IN (SELECT id FROM pages WHERE path IN (SELECT path FROM gone))")
    conn.execute("DELETE FROM pages WHERE path IN (SELECT path FROM gone)")
    conn.execute("DELETE FROM problems WHERE path IN (SELECT path FROM gone)")
    conn.execute("DELETE FROM sources WHERE path IN (SELECT path FROM gone)")
    return tag_ids


def reject_page(conn, problem):
    """Take back a page the build wrote, recording why (a problems row): its file is read again next time."""
    conn.execute("DELETE FROM pages WHERE path = ?", (problem.path,))  # its page_specs go with it
    conn.execute("DELETE FROM problems WHERE path = ?", (problem.path,))
    conn.execute("UPDATE sources SET outcome = 'rejected' WHERE path = ?", (problem.path,))
    conn.execute(schema.insert_sql("problems"), problem)


def track_releases(conn):
    """From now on, this connection notes the rows of KEPT_WHILE_USED tables that lose a reference (a row
    referring to them deleted, cascades too): the candidates prune_orphans looks at, so that removing a tag
    costs what the tag had, not what the history has."""
    for statement in schema.RELEASE_TRACKING:
        conn.execute(statement)


def released_by_deleting(conn, deletions):
    """{KEPT_WHILE_USED table: [ids]} of the rows that deleting these rows ({table: WHERE}) releases, read
    before they are deleted; where another connection deletes them, note_released gives them to this one."""
    released = {}
    for r in schema.RELEASING:
        if r.child in deletions:
            found = conn.execute(
                f"SELECT DISTINCT {r.column} FROM {r.child} WHERE ({deletions[r.child]}) AND {r.column} IS NOT NULL"
            )
            released.setdefault(r.parent, []).extend(row[0] for row in found)
    return released


def note_released(conn, released):
    """Make these rows ({table: [ids]}, released_by_deleting) candidates for prune_orphans, as track_releases
    would have had this connection deleted what released them."""
    for table, ids in released.items():
        conn.executemany(f"INSERT OR IGNORE INTO temp.{schema.released(table)} VALUES (?)", [(i,) for i in ids])


def prune_orphans(conn, full_text, added_from=None, tables=schema.KEPT_WHILE_USED, counted=False):
    """Delete the rows nothing refers to any more (of these KEPT_WHILE_USED tables, children first; rows that
    belong to them go by ON DELETE CASCADE). The rows looked at are those that lost a reference since
    track_releases and those this build added (ids from added_from, {table: first id or None}). With
    full_text, keep the full-text indexes in step for the rows they have: not those added, indexed later.
    counted: the counts of schema.KEPT_COUNTS are exact (an incremental build keeps them as it writes)."""
    for table in tables:
        first_added = (added_from or {}).get(table)
        condition = f"id IN (SELECT id FROM temp.pruning) AND {schema.orphans(table, counted)}"
        added = first_added
        while True:
            _take_candidates(conn, table, added)
            added = None  # looked at: only rows released since are candidates again
            if full_text:
                _unindex(conn, table, condition, first_added)
            deleted = conn.execute(f"DELETE FROM {table} WHERE {condition}").rowcount
            if not deleted or table not in schema.SELF_RELEASING:
                break
    conn.execute("DELETE FROM temp.pruning")


def _take_candidates(conn, table, added_from):
    """temp.pruning: the table's rows released since they were last taken, and those from id added_from on."""
    conn.execute("DELETE FROM temp.pruning")
    conn.execute(f"INSERT INTO temp.pruning SELECT id FROM temp.{schema.released(table)}")
    conn.execute(f"DELETE FROM temp.{schema.released(table)}")
    if added_from is not None:
        conn.execute(f"INSERT OR IGNORE INTO temp.pruning SELECT id FROM {table} WHERE id >= ?", (added_from,))


def _unindex(conn, table, condition, first_added):
    for index, (rows, content, _) in schema.FULL_TEXT.items():
        if rows != table:
            continue
        columns = ", ".join(schema.full_text_columns(index))
        indexed = "" if first_added is None else f" AND id < {int(first_added)}"
        conn.execute(
            f"INSERT INTO {index} ({index}, rowid, {columns}) SELECT 'delete', id, {columns} FROM {content}"
            f" WHERE {condition}{indexed}"
        )


# FTS5's own default of its 'automerge' option: how many segments of a level it merges as rows are added.
FTS5_AUTOMERGE = 4


def index_new_rows(conn, first_ids, every_row=False):
    """Add rows created in this build ({table: first id, or None when it added none}) to the full-text indexes.
    every_row: a full build's, into empty indexes, which FTS5 would merge again and again as they grow; they are
    filled unmerged and merged once ('optimize'), then left to merge what later builds add (the spread
    history's 3.3M listings: 25.3-25.8 -> 22.0-22.5 s, the same index)."""
    for index, (rows, _, _) in schema.FULL_TEXT.items():
        if first_ids.get(rows) is None:
            continue
        if every_row:
            conn.execute(f"INSERT INTO {index} ({index}, rank) VALUES ('automerge', 0)")
        conn.execute(new_rows_text(index), (first_ids[rows],))
        if every_row:
            conn.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")
            conn.execute(f"INSERT INTO {index} ({index}, rank) VALUES ('automerge', {FTS5_AUTOMERGE})")


def new_rows_text(index):
    """The statement that adds the rows of index's table from id ? on to it. CROSS JOIN: the new rows lead, by
    id, whatever the statistics say of the tables the text is read from (for the spread history's listings,
    SQLite went over every stack set instead: 1.5 s instead of 0.1 s for a tag; FTS5's 'rebuild' of the whole
    history, which reads its content table as the statistics say, 50 s instead of 16 s once analysed)."""
    rows, content, _ = schema.FULL_TEXT[index]
    columns = schema.full_text_columns(index)
    return (
        f"INSERT INTO {index} (rowid, {', '.join(columns)})"
        f" SELECT new.id, {', '.join(f'text.{column}' for column in columns)}"
        f" FROM {rows} AS new CROSS JOIN {content} AS text ON text.id = new.id WHERE new.id >= ?"
    )


def keep_counts_as_written(conn, events):
    """From now on, this connection keeps the counts of schema.KEPT_COUNTS as it writes (INSERT) or deletes
    (DELETE) the rows they count, for a build onto an existing database (a full build counts every row at the
    end)."""
    for kept in schema.KEPT_COUNTS:
        for event in events:
            conn.execute(schema.count_as_written(kept, event))
        if "DELETE" in events:
            conn.execute(schema.emptied_count_goes(kept))


def count_tags(conn, tag_ids):
    """Recount the counts kept per tag (schema.RECOUNT_TAGS) for these tags and for tags gone since."""
    conn.execute("CREATE TEMP TABLE recount (id INTEGER PRIMARY KEY)")
    conn.executemany("INSERT OR IGNORE INTO recount VALUES (?)", [(tag_id,) for tag_id in tag_ids])
    for statement in schema.RECOUNT_TAGS:
        conn.execute(statement)
    for temporary in schema.RECOUNT_TEMPORARIES:
        conn.execute(f"DROP TABLE temp.{temporary}")


def gather_statistics(conn):
    """ANALYZE the schema's tables, sampled (analysis_limit): as good for the planner, and much faster. Not the
    full-text indexes' own tables: FTS5 reads them by key whatever their statistics, and a table without an
    index is analysed by counting its rows (the 456 MB of the spread history's segments: 0.06 s of every
    build)."""
    conn.execute("PRAGMA analysis_limit = 1000")
    for table in schema.COLUMNS:
        conn.execute(f"ANALYZE {table}")


def refresh_counts(conn, tag_ids, count_every_row):
    """count_tags for these tags; the counts of schema.KEPT_COUNTS counted again from every row
    (count_every_row: a full build, else keep_counts_as_written kept them); then row_counts of every table and
    view."""
    count_tags(conn, tag_ids)
    if count_every_row:
        for kept in schema.KEPT_COUNTS:
            conn.execute(f"DELETE FROM {kept.table}")
            conn.execute(kept.count_every_row)
    counts = {view: conn.execute(sql).fetchone()[0] for view, sql in schema.VIEW_COUNTS.items()}
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    counts.update(
        {
            table: conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            for table in tables
            if table not in schema.FULL_TEXT
        }
    )
    # A full-text index has a row for each row of its table; counting it would read the text of every one.
    counts.update({index: counts[rows] for index, (rows, _, _) in schema.FULL_TEXT.items()})
    counts.update({view: counts[table] for view, table in schema.VIEW_ROWS_OF.items()})
    counts["row_counts"] = len(counts)
    conn.execute("DELETE FROM row_counts")
    conn.executemany("INSERT INTO row_counts VALUES (?, ?)", sorted(counts.items()))
