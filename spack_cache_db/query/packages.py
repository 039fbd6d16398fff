"""The package list: every package with its binaries in one tag and over all tags (a binary is a spec a tag
lists), and, apart, the packages that have no binaries of their own, only specs that binaries depend on
(externals such as a system compiler, build dependencies no tag lists). Counts come from the pages'
num_specs, so the whole history is one pass over its pages."""

from dataclasses import dataclass

from spack_cache_db.query import lookup

_COUNTS = """
SELECT packages.name, counts.in_tag, counts.binaries, counts.tags
FROM packages
LEFT JOIN (
    SELECT
        package_id,
        sum(CASE WHEN tag_id = (SELECT id FROM tags WHERE name = :tag) THEN num_specs ELSE 0 END) AS in_tag,
        sum(num_specs) AS binaries,
        count(*) AS tags
    FROM pages
    GROUP BY package_id
) AS counts ON counts.package_id = packages.id
WHERE instr(packages.name, :name) > 0
ORDER BY packages.name
"""
SORTS = {  # what the list may be sorted by: a key of a Package, most first (the name: a to z)
    "name": lambda package: package.name,
    "in_tag": lambda package: (-package.in_tag, package.name),
    "binaries": lambda package: (-package.binaries, package.name),
    "tags": lambda package: (-package.tags, package.name),
}


@dataclass(frozen=True)
class Package:
    name: str
    in_tag: int  # binaries in the tag
    binaries: int  # binaries in all tags
    tags: int  # tags that have some

    def as_json(self):
        return {"package": self.name, "binaries_in_tag": self.in_tag, "binaries": self.binaries, "tags": self.tags}


@dataclass(frozen=True)
class PackageList:
    tag: str | None
    name: str  # the part of a name asked for ("": every package)
    with_binaries: tuple  # Package
    dependencies_only: tuple  # names of the packages that have no binaries of their own

    def as_json(self):
        return {
            "tag": self.tag,
            "name": self.name,
            "packages": [package.as_json() for package in self.with_binaries],
            "dependencies_only": list(self.dependencies_only),
        }


def package_list(conn, tag=None, name="", sort="name"):
    """The PackageList of the packages whose name holds name, their binaries counted in the tag named."""
    if tag:
        lookup.tag_named(conn, tag)
    name = name.strip().lower()
    found = [
        Package(package, in_tag or 0, binaries or 0, tags or 0)
        for package, in_tag, binaries, tags in conn.execute(_COUNTS, {"tag": tag or "", "name": name})
    ]
    return PackageList(
        tag=tag,
        name=name,
        with_binaries=tuple(sorted((p for p in found if p.tags), key=SORTS.get(sort, SORTS["name"]))),
        dependencies_only=tuple(p.name for p in found if not p.tags),
    )
