"""Every foreign key of the schema, walked: an incremental build that removes the last row referring to a parent,
through each reference in turn, ends where a fresh build of the same inputs ends, and passes check.

The inputs are pages (with _data/tags.yaml) and a listing of build-cache indexes (a root, a stack and a stack
whose index lists no binaries). Each change below edits them; which references a change walks is measured on
the databases, not declared, and every reference of schema.py must be walked by one of them.
"""

import json
import shutil
import sqlite3

import pytest
from dump import COPIED_REFERENCES, check_full_text
from mirrors import write_v2
from pagemaker import spack_hash, spec, write_page

from spack_cache_db.build import build
from spack_cache_db.db import schema
from spack_cache_db.db.check import check

# Tables that no input gives (archspec's graph, replaced whole by every build) and the build's own notes.
NOT_FROM_INPUTS = {"microarchitectures", "runs_on", "build_info"}


def node(name, version, dependencies=(), external=False, **parameters):
    spec_ = {
        "name": name,
        "version": version,
        "arch": {"platform": "linux", "platform_os": "ubuntu24.04", "target": {"name": "x86_64_v3"}},
        "parameters": {"build_system": "cmake", **parameters},
        "dependencies": [
            {"name": dep, "hash": spack_hash(dep), "parameters": {"deptypes": deptypes, "virtuals": []}}
            for dep, deptypes in dependencies
        ],
    }
    if external:
        spec_["external"] = {"path": "/usr"}
    return spec_


def inputs():
    """{what: value} describing every input; a change edits this, then write_inputs writes it."""
    return {
        "pages": {
            ("develop-2025-01-05", "bolt"): [
                spec("bolt1", variants=["+mpi", "cuda_arch=70,80"], stacks=["e4s", "root"]),
                spec("bolt2", compiler="clang@18.1.0", os="rhel8", platform="cray", target="zen3", versions=["2.0"]),
            ],
            ("develop-2025-01-05", "zlib"): [spec("zlib1", stacks=["hep", "root"], versions=["1.3"])],
            ("v0.23.1", "bolt"): [spec("bolt1", variants=["+mpi", "cuda_arch=70,80"], stacks=["e4s", "root"])],
            ("v0.23.1", "cmake"): [spec("cmake1", versions=["3.31.6"])],
        },
        "hash_first": {("v0.23.1", "cmake")},  # pages written as the generator did before it sorted keys
        "tags_yaml": {"develop-2025-01-05": ["e4s", "hep"], "v0.99.0": ["radiuss"]},
        "records": {  # the index of the tag mysite: name -> (node, a binary of the root, of the stack)
            "hdf5": (node("hdf5", "1.14.6", [("zlib-ng", ["build", "link"]), ("perl", ["build"])]), True, True),
            "zlib-ng": (node("zlib-ng", "2.2.1"), True, False),
            "perl": (node("perl", "5.40.0", external=True), False, False),
        },
        "stacks": ["tools", "empty"],  # stacks of mysite besides root; empty lists no binary
    }


def write_inputs(folder, described):
    if folder.exists():
        shutil.rmtree(folder)
    site = folder / "site"
    for (tag, package), specs in described["pages"].items():
        path = write_page(site, package, tag, specs)
        if (tag, package) in described["hash_first"]:
            text = path.read_text()
            details = next(line for line in text.splitlines() if line.startswith("spec_details: "))
            hash_first = [{"hash": s["hash"], **s} for s in json.loads(details.removeprefix("spec_details: "))]
            path.write_text(text.replace(details, f"spec_details: {json.dumps(hash_first)}"))
    (site / "_data").mkdir(parents=True)
    (site / "_data" / "tags.yaml").write_text(
        "".join(f"- name: {tag}\n  stacks: [{', '.join(stacks)}]\n" for tag, stacks in described["tags_yaml"].items())
    )
    listing = {"mysite": [{"label": "root", "url": "root"}]} if described["records"] else {}
    for label in ["root", *described["stacks"]] if described["records"] else []:
        installs = {
            spack_hash(name): {
                "spec": record,
                "ref_count": 0,
                "in_buildcache": in_root if label == "root" else in_stack and label != "empty",
            }
            for name, (record, in_root, in_stack) in described["records"].items()
        }
        write_v2(folder / "mirrors" / label, json.dumps({"database": {"version": "8", "installs": installs}}).encode())
        if label != "root":
            listing["mysite"].append({"label": label, "url": label})
    (folder / "mirrors").mkdir(exist_ok=True)
    (folder / "mirrors" / "cache_spack_io_index.json").write_text(json.dumps(listing))
    return [str(site), str(folder / "mirrors" / "cache_spack_io_index.json")]


def drop_page(tag, package):
    return lambda d: d["pages"].pop((tag, package))


def edit_spec(tag, package, position, **fields):
    return lambda d: d["pages"][(tag, package)][position].update(fields)


def edit_record(name, **changes):
    def change(d):
        record, in_root, in_stack = d["records"][name]
        d["records"][name] = (changes.pop("record", record), changes.get("in_root", in_root), in_stack)

    return change


CHANGES = {
    "a package's last page goes": drop_page("develop-2025-01-05", "zlib"),
    "a tag's last page goes": lambda d: [drop_page("v0.23.1", package)(d) for package in ("bolt", "cmake")],
    "the last page of hash-first keys goes": drop_page("v0.23.1", "cmake"),
    "variants change": lambda d: [  # of a hash two tags list: in both
        edit_spec(tag, "bolt", 0, variants=["~mpi"])(d) for tag in ("develop-2025-01-05", "v0.23.1")
    ],
    "a compiler, os, platform and target change": edit_spec(
        "develop-2025-01-05", "bolt", 1, compiler="gcc@13.2.0", os="ubuntu24.04", platform="linux", target="m1"
    ),
    "a version changes": edit_spec("develop-2025-01-05", "bolt", 1, versions=["2.1"]),
    "stacks change": edit_spec("develop-2025-01-05", "zlib", 0, stacks=["root"]),
    "tags.yaml drops a tag": lambda d: d["tags_yaml"].pop("v0.99.0"),
    "the stack whose index lists no binaries goes": lambda d: d["stacks"].remove("empty"),
    "a stack goes": lambda d: d["stacks"].remove("tools"),
    "an edge changes its deptypes": edit_record(
        "hdf5", record=node("hdf5", "1.14.6", [("zlib-ng", ["link"]), ("perl", ["build"])])
    ),
    "an external stops being needed": edit_record("hdf5", record=node("hdf5", "1.14.6", [("zlib-ng", ["link"])])),
    "the index tag goes": lambda d: d["records"].clear(),
}


def canonical(db):
    """Every table's rows as facts: ids left out, each reference to another row given as that row's facts."""
    conn = sqlite3.connect(db)
    try:
        check_full_text(conn)
        facts = {}
        for table in schema.LOAD_ORDER:  # parents first: a reference is replaced by facts already known
            if table in NOT_FROM_INPUTS:
                continue
            facts[table] = _facts_of(conn, table, facts)
        return {table: sorted(rows.values(), key=repr) for table, rows in facts.items()}
    finally:
        conn.close()


def _facts_of(conn, table, known):
    references = {r.column: r for r in schema.REFERENCES if r.child == table}
    references |= {column: r for (copied_to, column), r in COPIED_REFERENCES.items() if copied_to == table}
    columns = schema.COLUMNS[table]
    found = {}
    for number, row in enumerate(conn.execute(f"SELECT * FROM {table}")):
        values = dict(zip(columns, row, strict=True))
        fact = tuple(
            (column, known[references[column].parent][value] if column in references and value is not None else value)
            for column, value in values.items()
            if column != "id" and not (table == "row_counts" and _depends_on_how_written(values["name"]))
        )
        found[values.get("id", number)] = fact
    return found


def _depends_on_how_written(name):
    """Row counts of ANALYZE's statistics and of the segments of a full-text index (one go, or in steps)."""
    return name == "sqlite_stat1" or name.endswith(("fts_data", "fts_idx"))


def referenced_parents(db):
    """{reference: the facts of the parents some child refers to through it}."""
    conn = sqlite3.connect(db)
    try:
        facts, found = {}, {}
        for table in schema.LOAD_ORDER:
            if table not in NOT_FROM_INPUTS:
                facts[table] = _facts_of(conn, table, facts)
        for r in schema.REFERENCES:
            if r.parent in NOT_FROM_INPUTS:
                continue
            found_keys = conn.execute(f"SELECT DISTINCT {r.column} FROM {r.child} WHERE {r.column} IS NOT NULL")
            keys = [row[0] for row in found_keys]
            found[r] = {facts[r.parent][key] for key in keys}
        return found
    finally:
        conn.close()


def walk(change, tmp_path):
    """(the database built onto, incrementally, after change; a fresh build of the inputs after change)."""
    incremental = tmp_path / "incremental.db"
    build(write_inputs(tmp_path / "inputs", inputs()), incremental)
    described = inputs()
    change(described)
    arguments = write_inputs(tmp_path / "inputs", described)  # the same paths: the build is incremental
    assert build(arguments, incremental).incremental
    fresh = tmp_path / "fresh.db"
    build(arguments, fresh)
    return incremental, fresh


@pytest.mark.parametrize("name", CHANGES)
def test_an_incremental_build_that_removes_a_last_child_equals_a_fresh_build(tmp_path, name):
    incremental, fresh = walk(CHANGES[name], tmp_path)
    report = check(incremental)
    assert report.ok, report.lines
    assert canonical(incremental) == canonical(fresh)


def test_the_changes_walk_every_foreign_key_of_the_schema(tmp_path):
    """Each reference of schema.py loses, through some change, the last child of a parent it had before."""
    walked = set()
    folder = tmp_path / "before"
    db_before = tmp_path / "before.db"
    build(write_inputs(folder, inputs()), db_before)
    parents_before = referenced_parents(db_before)
    for number, change in enumerate(CHANGES.values()):
        described = inputs()
        change(described)
        after = tmp_path / f"after{number}.db"
        build(write_inputs(tmp_path / f"inputs{number}", described), after)
        parents_after = referenced_parents(after)
        walked.update(r for r, parents in parents_before.items() if parents - parents_after[r])
    expected = {r for r in schema.REFERENCES if r.parent not in NOT_FROM_INPUTS}
    assert sorted(expected - walked) == []
