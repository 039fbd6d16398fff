"""Finding what a question is about in a finished database: a spec by its hash or a prefix of it (as in
`spack install /abcd`), a tag by its name, and what a spec is (package, version, its spec string, its
parts). Every function takes an open sqlite3 connection: the terminal opens the file, the web hands over
Datasette's connection (Database.execute_fn).
"""

import difflib
import functools
import json
import re
import sqlite3
from dataclasses import dataclass

from spack_cache_db.db.connection import database_uri
from spack_cache_db.db.schema import NO_DEPENDENCIES

MIN_PREFIX = 4  # characters of a hash: fewer match too many specs to tell
HASH_LENGTH = 32
CANDIDATES_SHOWN = 10  # specs an ambiguous prefix lists
_PREFIX = re.compile(r"[a-z2-7]+")  # Spack's base32 alphabet

# The parts of specs given by id (a JSON array), in the order given; the spec string is the one
# configuration_specs writes. CROSS JOIN keeps the ids first: each spec is read through its key.
_DESCRIBE = """
SELECT
    specs.id,
    specs.hash,
    specs.external,
    configuration_specs.package,
    configuration_specs.version,
    configuration_specs.version_rank,
    configuration_specs.compiler,
    configuration_specs.os,
    configuration_specs.platform,
    configuration_specs.target,
    configuration_specs.variants,
    configuration_specs.spec
FROM json_each(:ids) AS ids
CROSS JOIN specs ON specs.id = ids.value
CROSS JOIN configuration_specs ON configuration_specs.configuration_id = specs.configuration_id
ORDER BY ids.key
"""
# The tags whose pages list a spec, in the usual order (the newest first), with its stacks there.
_TAGS_OF = """
SELECT tags.id, tags.name, tags.mirror_url, stack_sets.stacks
FROM page_specs
CROSS JOIN pages ON pages.id = page_specs.page_id
CROSS JOIN tags ON tags.id = pages.tag_id
CROSS JOIN listings ON listings.id = page_specs.listing_id
CROSS JOIN stack_sets ON stack_sets.id = listings.stack_set_id
WHERE page_specs.spec_id = ?
ORDER BY tags.sort_order
"""
# Which of these specs (a JSON array of ids) a tag's pages list.
_LISTED_IN_TAG = """
SELECT DISTINCT page_specs.spec_id
FROM json_each(:ids) AS ids
CROSS JOIN page_specs ON page_specs.spec_id = ids.value
CROSS JOIN pages ON pages.id = page_specs.page_id
WHERE pages.tag_id = :tag_id
"""
# A binary's install commands in a tag, from the binaries view (the listings of its configuration lead).
_INSTALL = """
SELECT install FROM binaries
WHERE listing_id IN (SELECT listings.id FROM specs JOIN listings ON listings.configuration_id = specs.configuration_id
                     WHERE specs.id = :spec_id)
  AND hash = :hash AND tag = :tag
LIMIT 1
"""


HAS_EDGES = "SELECT 1 FROM spec_dependencies LIMIT 1"  # a row when the database has dependencies


class QueryError(Exception):
    """What was wrong with a question, in one line. not_found: the question was well put but the database
    has no answer (exit status 1, HTTP 404); otherwise the question itself was wrong (2, 400)."""

    def __init__(self, message, not_found=False, candidates=()):
        super().__init__(message)
        self.not_found = not_found
        self.candidates = list(candidates)  # [Spec] an ambiguous hash prefix matches


@dataclass(frozen=True)
class Spec:
    id: int
    hash: str
    external: bool
    package: str
    version: str
    version_rank: int
    compiler: str
    os: str
    platform: str
    target: str
    variants: tuple  # as the spec lists them
    spec: str  # Spack's spec string

    @functools.cached_property
    def sort_key(self):
        """Package name, newest version first, then hash: how lists of specs are ordered."""
        return (self.package, -self.version_rank, self.hash)


@dataclass(frozen=True)
class Tag:
    id: int
    name: str
    mirror_url: str


def open_database(path):
    """A read-only connection to a database this project built, or a QueryError naming the file."""
    try:
        conn = sqlite3.connect(database_uri(path), uri=True)
        conn.execute("SELECT 1 FROM build_info WHERE key = 'spack_cache_db_version'").fetchall()
    except sqlite3.Error as error:
        raise QueryError(f"{path}: expected a database built by spack-cache-db ({error})") from None
    return conn


def is_hash_prefix(text):
    """Whether text can name a spec: 4 to 32 characters of Spack's base32 alphabet (a leading / is allowed)."""
    prefix = _prefix(text)
    return MIN_PREFIX <= len(prefix) <= HASH_LENGTH and bool(_PREFIX.fullmatch(prefix))


def _prefix(text):
    return text.strip().lstrip("/").lower()


def hashes_starting(conn, text, limit=CANDIDATES_SHOWN + 1):
    """The ids of the first specs (in hash order) whose hash starts with the prefix text gives."""
    prefix = _prefix(text)
    query = "SELECT id FROM specs WHERE hash >= ? AND hash < ? ORDER BY hash LIMIT ?"
    return [row[0] for row in conn.execute(query, [prefix, prefix + "~", limit])]


def spec_by_hash(conn, text, field="hash"):
    """The one spec whose hash is text or starts with it (a leading / is allowed, as Spack writes it); a QueryError
    names the field the text was given as otherwise."""
    if not is_hash_prefix(text):
        raise QueryError(
            f"{field}: expected {MIN_PREFIX} to {HASH_LENGTH} characters of Spack's base32 alphabet (a-z, 2-7),"
            f" found {text!r:.80}"
        )
    prefix = _prefix(text)
    ids = hashes_starting(conn, text)
    if not ids:
        raise QueryError(f"{field}: no spec's hash starts with {prefix!r:.80}", not_found=True)
    if len(ids) > 1:
        more = " or more" if len(ids) > CANDIDATES_SHOWN else ""
        raise QueryError(
            f"{field}: {prefix!r} is the start of {min(len(ids), CANDIDATES_SHOWN)}{more} hashes: give more characters",
            not_found=True,
            candidates=describe(conn, ids[:CANDIDATES_SHOWN]).values(),
        )
    return describe(conn, ids)[ids[0]]


def require_edges(conn):
    """A QueryError that says where dependencies come from, when the database has none (built from pages)."""
    if not conn.execute(HAS_EDGES).fetchone():
        raise QueryError(NO_DEPENDENCIES, not_found=True)


def describe(conn, ids):
    """{id: Spec} of these spec ids, in their order."""
    cursor = conn.cursor()
    cursor.row_factory = sqlite3.Row
    found = {}
    for row in cursor.execute(_DESCRIBE, {"ids": json.dumps(list(ids))}):
        parts = dict(row)
        parts["external"] = bool(parts["external"])
        parts["variants"] = tuple(json.loads(parts["variants"]))
        found[row["id"]] = Spec(**parts)
    return found


def tag_named(conn, name):
    """The tag of this name, or a QueryError that names the closest ones."""
    row = conn.execute("SELECT id, name, mirror_url FROM tags WHERE name = ?", [name]).fetchone()
    if row:
        return Tag(*row)
    known = [row[0] for row in conn.execute("SELECT name FROM tags ORDER BY sort_order")]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f": did you mean {' or '.join(close)}?" if close else ""
    raise QueryError(f"tag: no tag here is called {name!r:.80}{hint}", not_found=True)


def package_not_found(conn, name):
    """The QueryError for a package name the database does not hold, naming the closest ones."""
    known = [row[0] for row in conn.execute("SELECT name FROM packages")]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f": did you mean {' or '.join(close)}?" if close else ""
    return QueryError(
        f"package: no package here is called {name!r:.80}, and no hash starts with it{hint}", not_found=True
    )


def appearances(conn, spec_id):
    """[(Tag, stacks)] of the tags whose pages list the spec, the newest first."""
    return [
        (Tag(tag_id, name, mirror), json.loads(stacks))
        for tag_id, name, mirror, stacks in conn.execute(_TAGS_OF, [spec_id])
    ]


def chosen_tag(conn, spec, name=None):
    """The tag asked for by name, or else the newest tag that lists the spec (None when none does)."""
    if name:
        return tag_named(conn, name)
    listed = appearances(conn, spec.id)
    return listed[0][0] if listed else None


def listed_in(conn, tag, ids):
    """The ids among these that the tag's pages list."""
    if tag is None:
        return set()
    return {row[0] for row in conn.execute(_LISTED_IN_TAG, {"ids": json.dumps(list(ids)), "tag_id": tag.id})}


def install_commands(conn, spec, tag):
    """The commands that install the spec from the tag's mirror, or None when the tag does not list it."""
    if tag is None:
        return None
    row = conn.execute(_INSTALL, {"spec_id": spec.id, "hash": spec.hash, "tag": tag.name}).fetchone()
    return row[0] if row else None
