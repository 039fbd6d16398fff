"""What differs between builds: two specs compared part by part (version, compiler, os, platform, target,
variants, direct dependencies, the tags and stacks that have them), and, among a list of builds, which
parts vary and which all of them share (the package page's "only what differs"). The terminal
(`build_db.py diff`) and the web (the spec diff page) both ask here.
"""

import json
from dataclasses import dataclass

from spack_cache_db.normalise import parse_variant
from spack_cache_db.query import dependencies, lookup

FIELDS = ("package", "version", "compiler", "os", "platform", "target")  # compared as they are
_DIRECT = "SELECT dependency_id, kind_id FROM spec_dependencies WHERE spec_id = ?"
_IDS = "SELECT specs.id FROM json_each(:hashes) AS hashes CROSS JOIN specs ON specs.hash = hashes.value"


@dataclass(frozen=True)
class Side:
    """One spec of a comparison and what it is compared by besides its parts."""

    spec: lookup.Spec
    tags: tuple  # names, the newest first
    stacks: tuple  # of any tag, sorted
    dependencies: dict  # {key: {package, version, hash, deptypes}}: its direct dependencies

    def as_json(self):
        spec = self.spec
        return {
            "hash": spec.hash,
            "spec": spec.spec,
            **{name: getattr(spec, name) for name in FIELDS},
            "variants": list(spec.variants),
            "tags": list(self.tags),
            "stacks": list(self.stacks),
        }


@dataclass(frozen=True)
class Diff:
    a: Side
    b: Side

    @property
    def fields(self):
        pairs = [(name, getattr(self.a.spec, name), getattr(self.b.spec, name)) for name in FIELDS]
        return [{"field": name, "a": a, "b": b, "differs": a != b} for name, a, b in pairs]

    @property
    def variants(self):
        """Variants by name: in b only (added), in a only (removed), set otherwise (changed), the same."""
        a, b = _by_name(self.a.spec.variants), _by_name(self.b.spec.variants)
        return {
            "added": [b[name] for name in b if name not in a],
            "removed": [a[name] for name in a if name not in b],
            "changed": [{"name": name, "a": a[name], "b": b[name]} for name in a if name in b and a[name] != b[name]],
            "same": [a[name] for name in a if b.get(name) == a[name]],
        }

    @property
    def dependencies(self):
        """Direct dependencies by package: in b only, in a only, another build (version, hash or deptypes
        differ), the same build."""
        a, b = self.a.dependencies, self.b.dependencies
        return {
            "added": [b[key] for key in b if key not in a],
            "removed": [a[key] for key in a if key not in b],
            "changed": [
                {"package": a[key]["package"], "a": a[key], "b": b[key], "what": _what_changed(a[key], b[key])}
                for key in a
                if key in b and a[key] != b[key]
            ],
            "same": [a[key] for key in a if b.get(key) == a[key]],
        }

    @property
    def tags(self):
        return _sets(self.a.tags, self.b.tags)

    @property
    def stacks(self):
        return _sets(self.a.stacks, self.b.stacks)

    def as_json(self):
        return {
            "a": self.a.as_json(),
            "b": self.b.as_json(),
            "fields": self.fields,
            "variants": self.variants,
            "dependencies": self.dependencies,
            "tags": self.tags,
            "stacks": self.stacks,
        }

    def text(self):
        """The comparison for a terminal: what differs first, then what is the same."""
        lines = [f"a: {self.a.spec.spec} /{self.a.spec.hash}", f"b: {self.b.spec.spec} /{self.b.spec.hash}"]
        for field in self.fields:
            if field["differs"]:
                lines.append(f"{field['field']}: {field['a']} -> {field['b']}")
        variants = self.variants
        lines.extend(f"variant added: {raw}" for raw in variants["added"])
        lines.extend(f"variant removed: {raw}" for raw in variants["removed"])
        lines.extend(f"variant changed: {change['a']} -> {change['b']}" for change in variants["changed"])
        found = self.dependencies
        lines.extend(f"dependency added: {_dependency_text(d)}" for d in found["added"])
        lines.extend(f"dependency removed: {_dependency_text(d)}" for d in found["removed"])
        lines.extend(
            f"dependency changed ({', '.join(c['what'])}): {_dependency_text(c['a'])} -> {_dependency_text(c['b'])}"
            for c in found["changed"]
        )
        for name, sets in (("tags", self.tags), ("stacks", self.stacks)):
            lines.extend(
                f"{name} only in {side}: {', '.join(sets[f'only_{side}'])}" for side in "ab" if sets[f"only_{side}"]
            )
        same = [f"{f['field']} {f['a']}" for f in self.fields if not f["differs"]]
        lines.append("the same: " + ", ".join(same + variants["same"]) if same or variants["same"] else "nothing else")
        lines.append(f"the same dependencies: {len(found['same'])}; in both tags: {len(self.tags['both'])}")
        return "\n".join(lines)


def _dependency_text(dependency):
    return f"{dependency['package']}@{dependency['version']} /{dependency['hash'][:7]} [{', '.join(dependency['deptypes'])}]"


def _by_name(variants):
    """{name: variant as written} (a variant that is not Spack's syntax is its own name)."""
    parsed = [(parse_variant(raw), raw) for raw in variants]
    return {variant.name if variant else raw: raw for variant, raw in parsed}


def _what_changed(a, b):
    return [name for name in ("version", "hash", "deptypes") if a[name] != b[name]]


def _sets(a, b):
    return {
        "only_a": [item for item in a if item not in b],
        "only_b": [item for item in b if item not in a],
        "both": [item for item in a if item in b],
    }


def spec_diff(conn, hash_a, hash_b):
    """The Diff of the specs whose hashes are (or start with) these."""
    return Diff(_side(conn, lookup.spec_by_hash(conn, hash_a)), _side(conn, lookup.spec_by_hash(conn, hash_b)))


def _side(conn, spec):
    listed = lookup.appearances(conn, spec.id)
    edges = conn.execute(_DIRECT, [spec.id]).fetchall()
    edge_kinds = dependencies.kinds(conn)
    specs = lookup.describe(conn, [dependency_id for dependency_id, _ in edges])
    found = {}
    for dependency_id, kind_id in sorted(edges, key=lambda edge: specs[edge[0]].sort_key):
        dependency = specs[dependency_id]
        key = dependency.package
        while key in found:  # two builds of one package: told apart by their order
            key += "'"
        found[key] = {
            "package": dependency.package,
            "version": dependency.version,
            "hash": dependency.hash,
            "deptypes": list(edge_kinds[kind_id].deptypes),
        }
    return Side(
        spec=spec,
        tags=tuple(tag.name for tag, _ in listed),
        stacks=tuple(sorted({stack for _, stacks in listed for stack in stacks})),
        dependencies=found,
    )


@dataclass(frozen=True)
class Differences:
    """Among builds, the parts (FIELDS and stacks) that vary, what all of them share, and each build's
    variants that not all of them have."""

    varying: tuple  # names of the parts whose values differ between the builds
    parts: dict  # {hash: {part: value}}
    common: dict  # {part: value} of the parts all of them share
    common_variants: tuple  # variants every build has
    own_variants: dict  # {hash: [variants not every build has]}


def differences(conn, builds):
    """Differences among builds: [{hash, stacks}] as a page lists them (stacks as a JSON array)."""
    hashes = [build["hash"] for build in builds]
    ids = [row[0] for row in conn.execute(_IDS, {"hashes": json.dumps(hashes)})]
    specs = {spec.hash: spec for spec in lookup.describe(conn, ids).values()}
    rows = [
        {**{name: getattr(specs[build["hash"]], name) for name in FIELDS}, "stacks": build["stacks"]}
        for build in builds
    ]
    parts = (*FIELDS, "stacks")
    varying = tuple(name for name in parts if len({row[name] for row in rows}) > 1)
    variants = [specs[spec_hash].variants for spec_hash in hashes]
    shared = set.intersection(*map(set, variants)) if variants else set()
    return Differences(
        varying=varying,
        parts=dict(zip(hashes, rows, strict=True)),
        common={name: rows[0][name] for name in parts if name not in varying} if rows else {},
        common_variants=tuple(variant for variant in (variants[0] if variants else ()) if variant in shared),
        own_variants={
            spec_hash: [variant for variant in own if variant not in shared]
            for spec_hash, own in zip(hashes, variants, strict=True)
        },
    )
