"""What a binary needs, as `spack install /hash` does: its dependencies, transitively, nested (a tree) and
flat (each spec once), each marked as in the tag's build cache, not in it, or an external (installed
outside Spack). The terminal (`build_db.py deps`) and the web (the dependency tree page) both ask here.

Installing a binary needs its link and run dependencies; build-only ones (compilers in Database 8 and
later, cmake) are shown on request, and then followed too. The work is bounded by the answer's size:
one recursive query walks the edges by their integer keys, each spec once; the nested view expands
each spec once, where it is first reached breadth-first (its least depth, as `spack spec` shows it),
and every other edge to it refers back to that place, so a DAG that shares subtrees gives one line
per spec and per edge, never one per path.
"""

import json
from collections import deque
from dataclasses import dataclass

from spack_cache_db.db import schema
from spack_cache_db.query import canned, lookup

NEEDED_TO_INSTALL = ("link", "run")
DEPTYPE_ORDER = tuple(schema.DEPTYPE_FLAGS)  # Spack's order
# SQL over dependency_kinds: whether installing the dependent needs a dependency of this kind
_NEEDED = " OR ".join(schema.DEPTYPE_FLAGS[deptype] for deptype in NEEDED_TO_INSTALL)
IN_CACHE, NOT_IN_CACHE, EXTERNAL = "in cache", "not in cache", "external"
_MARKS = {IN_CACHE: "[+]", NOT_IN_CACHE: " - ", EXTERNAL: "[e]"}  # as `spack spec -I` marks installs

# The specs reached from the root through link and run edges (every edge with :build), each once (UNION),
# and every edge of each of them (build-only ones too: the hidden ones are counted). Edges are followed by
# their kind's flags, read once from the short dependency_kinds table; kinds are joined, since a condition
# on the edges alone could have SQLite read every edge first, to filter them.
_REACHED = f"""
WITH RECURSIVE followed AS MATERIALIZED (
    SELECT id FROM dependency_kinds WHERE :build OR {_NEEDED}
),
reached(id) AS (
    SELECT :root
    UNION
    SELECT spec_dependencies.dependency_id
    FROM reached
    CROSS JOIN spec_dependencies ON spec_dependencies.spec_id = reached.id
    CROSS JOIN followed ON followed.id = spec_dependencies.kind_id
)
SELECT reached.id, spec_dependencies.dependency_id, spec_dependencies.kind_id
FROM reached
LEFT JOIN spec_dependencies ON spec_dependencies.spec_id = reached.id
"""


@dataclass(frozen=True)
class Kind:
    """How one spec depends on another: Spack's deptypes and the virtual packages it provides."""

    deptypes: tuple
    virtuals: tuple
    needed: bool  # whether installing the dependent needs it (a link or run dependency)


@dataclass(frozen=True)
class Dependency:
    """A spec of the answer, once, however many paths lead to it."""

    spec: lookup.Spec
    status: str  # IN_CACHE, NOT_IN_CACHE or EXTERNAL
    depth: int  # the fewest edges from the root
    deptypes: tuple  # of the edges to it that are shown
    virtuals: tuple
    dependents: tuple  # hashes of the specs shown that depend on it directly
    build_only: bool  # reached through build-only edges alone: installing the root does not need it

    def as_json(self):
        spec = self.spec
        return {
            "hash": spec.hash,
            "package": spec.package,
            "version": spec.version,
            "spec": spec.spec,
            "status": self.status,
            "depth": self.depth,
            "deptypes": list(self.deptypes),
            "virtuals": list(self.virtuals),
            "dependents": list(self.dependents),
            "build_only": self.build_only,
        }


@dataclass(frozen=True)
class Line:
    """A line of the nested view: a spec reached through one edge, expanded there or referring to the
    place it is (repeat: "above" or "below")."""

    depth: int
    dependency: Dependency
    deptypes: tuple  # of this edge
    virtuals: tuple
    repeat: str | None

    def as_json(self):
        return {
            "depth": self.depth,
            "hash": self.dependency.spec.hash,
            "deptypes": list(self.deptypes),
            "virtuals": list(self.virtuals),
            "repeat": self.repeat,
        }


@dataclass(frozen=True)
class Tree:
    root: lookup.Spec
    tag: lookup.Tag | None  # whose build cache the statuses are about (None: no tag lists the root)
    build: bool  # build-only dependencies shown
    install: str | None  # the commands that install the root from the tag
    specs: tuple  # Dependency: the root first, then by package, newest version first
    lines: tuple  # Line: the nested view, depth first
    hidden: int  # build-only dependencies of the specs shown that are not shown

    @property
    def counts(self):
        dependencies = self.specs[1:]
        statuses = [dependency.status for dependency in dependencies]
        return {
            "direct": sum(1 for line in self.lines if line.depth == 1),
            "transitive": len(dependencies),
            "in_cache": statuses.count(IN_CACHE),
            "not_in_cache": statuses.count(NOT_IN_CACHE),
            "externals": statuses.count(EXTERNAL),
            "build_only": sum(1 for dependency in dependencies if dependency.build_only),
            "build_only_hidden": self.hidden,
        }

    def as_json(self):
        return {
            "hash": self.root.hash,
            "package": self.root.package,
            "spec": self.root.spec,
            "tag": self.tag.name if self.tag else None,
            "build": self.build,
            "install": self.install,
            "counts": self.counts,
            "specs": [dependency.as_json() for dependency in self.specs],
            "tree": [line.as_json() for line in self.lines],
        }

    def text(self, nested=False):
        """The answer for a terminal: a summary, then one line per spec (flat) or per edge (nested), each
        marked as `spack spec -I` marks installs: [+] in the tag's build cache, [e] external, - not."""
        counts = self.counts
        where = f"in {self.tag.name}" if self.tag else "in no tag"
        lines = [
            f"{self.root.spec} /{self.root.hash} ({where})",
            f"{counts['direct']} direct, {counts['transitive']} in all: {counts['in_cache']} in the build cache,"
            f" {counts['externals']} external, {counts['not_in_cache']} not in it"
            + (f"; {self.hidden} build-only not shown (--build shows them)" if self.hidden else ""),
        ]
        if nested:
            lines.extend(_text_line(line.dependency, line.depth, line, line.repeat) for line in self.lines)
        else:
            lines.extend(_text_line(dependency, 0, dependency, None) for dependency in self.specs)
        return "\n".join(lines)


def _text_line(dependency, depth, how, repeat):
    spec = dependency.spec
    text = f"{_MARKS[dependency.status]}  {spec.hash[:7]}  {'    ' * depth}{'^' if depth else ''}{spec.spec}"
    if how.deptypes:
        text += f"  [{', '.join(how.deptypes)}]"
    if how.virtuals:
        text += f" provides {', '.join(how.virtuals)}"
    if dependency.build_only:
        text += "  (only to build)"
    return text + (f"  (shown {repeat})" if repeat else "")


def kinds(conn):
    """{id: Kind} of every way one spec depends on another (a short table)."""
    return {
        kind_id: Kind(_in_spack_order(json.loads(deptypes)), tuple(sorted(json.loads(virtuals))), bool(is_needed))
        for kind_id, deptypes, virtuals, is_needed in conn.execute(
            f"SELECT id, deptypes, virtuals, {_NEEDED} FROM dependency_kinds"
        )
    }


def _in_spack_order(deptypes):
    known = [deptype for deptype in DEPTYPE_ORDER if deptype in deptypes]
    return tuple(known + sorted(set(deptypes) - set(known)))


def dependency_tree(conn, hash_text, tag_name=None, build=False):
    """The Tree of the spec whose hash is (or starts with) hash_text, about the tag named (default: the
    newest tag that lists it); with build, build-only dependencies too."""
    root = lookup.spec_by_hash(conn, hash_text)
    tag = lookup.chosen_tag(conn, root, tag_name)
    lookup.require_edges(conn)
    edges = _reached(conn, root.id, build)
    specs = lookup.describe(conn, edges)
    children = {
        spec_id: sorted(
            ((dependency_id, kind) for dependency_id, kind in spec_edges if build or kind.needed),
            key=lambda edge: specs[edge[0]].sort_key,
        )
        for spec_id, spec_edges in edges.items()
    }
    hidden = {dependency_id for spec_edges in edges.values() for dependency_id, _ in spec_edges} - set(edges)
    listed = lookup.listed_in(conn, tag, edges)
    depth, parent = _breadth_first(root.id, children)
    dependencies = _dependencies(root, specs, children, listed, depth)
    return Tree(
        root=root,
        tag=tag,
        build=build,
        install=lookup.install_commands(conn, root, tag),
        specs=tuple(dependencies.values()),
        lines=tuple(_nested(root.id, children, dependencies, parent)),
        hidden=len(hidden),
    )


def _reached(conn, root_id, build):
    """{spec id: [(dependency id, Kind)]} of every edge of the specs reached from the root (through link and
    run edges, or every edge with build)."""
    edge_kinds = kinds(conn)
    edges = {}
    for spec_id, dependency_id, kind_id in conn.execute(_REACHED, {"root": root_id, "build": int(build)}):
        edges.setdefault(spec_id, [])
        if dependency_id is not None:
            edges[spec_id].append((dependency_id, edge_kinds[kind_id]))
    return edges


def _dependencies(root, specs, children, listed, depth):
    """{id: Dependency} of every spec reached: the root first, then in sort order."""
    needed_edges = {
        spec_id: [edge for edge in spec_edges if edge[1].needed] for spec_id, spec_edges in children.items()
    }
    needed, _ = _breadth_first(root.id, needed_edges)
    incoming = {spec_id: [] for spec_id in children}
    for spec_id, spec_edges in children.items():
        for dependency_id, kind in spec_edges:
            incoming[dependency_id].append((spec_id, kind))
    order = [root.id] + sorted((spec_id for spec_id in children if spec_id != root.id), key=lambda i: specs[i].sort_key)
    found = {}
    for spec_id in order:
        spec = specs[spec_id]
        into = incoming[spec_id]
        found[spec_id] = Dependency(
            spec=spec,
            status=EXTERNAL if spec.external else IN_CACHE if spec_id in listed else NOT_IN_CACHE,
            depth=depth[spec_id],
            deptypes=_in_spack_order({deptype for _, kind in into for deptype in kind.deptypes}),
            virtuals=tuple(sorted({virtual for _, kind in into for virtual in kind.virtuals})),
            dependents=tuple(specs[i].hash for i in sorted({i for i, _ in into}, key=lambda i: specs[i].sort_key)),
            build_only=spec_id not in needed,
        )
    return found


def _breadth_first(root_id, children):
    """({id: depth}, {id: the spec it was first reached from}) over these edges."""
    depth, parent = {root_id: 0}, {}
    queue = deque([root_id])
    while queue:
        spec_id = queue.popleft()
        for dependency_id, _ in children.get(spec_id, ()):
            if dependency_id not in depth:
                depth[dependency_id] = depth[spec_id] + 1
                parent[dependency_id] = spec_id
                queue.append(dependency_id)
    return depth, parent


def _nested(root_id, children, dependencies, parent):
    """The Lines of the nested view, depth first in sort order: each spec expanded under the spec it was
    first reached from breadth-first (parent), every other edge to it a line that refers there."""
    lines = [Line(0, dependencies[root_id], (), (), None)]
    shown = {root_id}
    stack = [(root_id, iter(children[root_id]))]
    while stack:
        spec_id, pending = stack[-1]
        edge = next(pending, None)
        if edge is None:
            stack.pop()
            continue
        dependency_id, kind = edge
        expanded_here = parent.get(dependency_id) == spec_id
        repeat = None if expanded_here else "above" if dependency_id in shown else "below"
        lines.append(Line(len(stack), dependencies[dependency_id], kind.deptypes, kind.virtuals, repeat))
        if expanded_here:
            shown.add(dependency_id)
            stack.append((dependency_id, iter(children[dependency_id])))
    return lines


def dependents(conn, target, tag_name=None, after=None):
    """The answer (canned.Answer) of the dependents question (queries/dependents.sql, run as Datasette runs it)
    for a package name or a hash (written /hash, or a prefix that no package is called): which binaries of the
    tag link against it, directly or through other libraries; those after the binary whose hash (or its
    prefix) is after, when given."""
    text = target.strip()
    if text.startswith("/"):
        params = {"package": "", "hash": lookup.spec_by_hash(conn, text).hash}
    elif conn.execute("SELECT 1 FROM packages WHERE name = ?", [text.lower()]).fetchone():
        params = {"package": text.lower(), "hash": ""}
    elif lookup.is_hash_prefix(text) and lookup.hashes_starting(conn, text):
        params = {"package": "", "hash": lookup.spec_by_hash(conn, text).hash}
    else:
        raise lookup.package_not_found(conn, text.lower())
    if tag_name:
        lookup.tag_named(conn, tag_name)
    lookup.require_edges(conn)
    after_hash = lookup.spec_by_hash(conn, after.strip(), "after").hash if after else ""
    return canned.ask(conn, canned.named("dependents"), {**params, "tag": tag_name or "", "after": after_hash})
