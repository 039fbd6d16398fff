"""The spec parser (query/spec.py), table-driven against Spack's grammar and rules: what a spec asks of each
node, which versions a version constraint holds (the cases of Spack's test/versions.py), and the one line
that says where a spec went wrong."""

import pytest

from spack_cache_db import normalise
from spack_cache_db.query.spec import SpecError, parse, sql_parameters


def holds(constraint, version):
    """Whether @constraint holds version, by the sortable keys find_binaries.sql compares."""
    key = normalise.version_sort_key(version)
    return any(lo <= key and (hi == "" or key < hi) for lo, hi in parse(f"p@{constraint}").root.versions)


# (constraint, version, whether Spack's Spec("p@constraint") is satisfied by p@=version)
VERSIONS = [
    # @1.14 is the range 1.14:1.14, which holds what 1.14 is a prefix of
    ("1.14", "1.14", True),
    ("1.14", "1.14.6", True),
    ("1.14", "1.14.0", True),
    ("1.14", "1.15", False),
    ("1.14", "1.13.9", False),
    ("1.14", "1.140", False),
    ("4.7", "4.7.3v2", True),
    ("4.7", "4.7v6", True),
    ("4", "4.7.3", True),
    ("4.9", "4.8.0", False),
    ("4.9", "4", False),
    # a range lo:hi holds lo <= v < the version after hi (test_contains)
    ("1.2:1.4", "1.3", True),
    ("1.2:1.4", "1.2.5", True),
    ("1.2:1.4", "1.3.5-7", True),
    ("1.2:1.4", "1.4.2", True),
    ("1.2:1.4", "1.1", False),
    ("1.2:1.4", "1.5", False),
    ("1.2:1.4.0", "1.4.2", False),
    ("1.2.7:1.4", "1.2.8", True),
    ("1.2.7:1.4", "1.2.5", False),
    ("1.2.7:1.4.0", "1.4.1", False),
    ("1.5.1:1.6", "1.5", False),
    ("1.5.1:", "1.5", False),
    ("1.10:1.12", "1.12.3", True),
    ("1.10:1.12", "1.9", False),
    ("1.14:", "1.14.6", True),
    ("1.14:", "2.0", True),
    ("1.14:", "develop", True),
    (":1.12", "1.12.3", True),
    (":1.12", "1.8.23", True),
    (":1.12", "1.14.6", False),
    (":1.12", "develop", False),
    (":", "0.1", True),
    # pre-releases (test_version_range_with_prereleases)
    ("1.2.1:", "1.2.1alpha1", False),
    ("1.2.1:", "1.2.1rc3", False),
    ("1.2.0:", "1.2.1beta1", True),
    ("1.2:", "1.2.0alpha1", True),
    (":1.1", "1.2.0rc3", False),
    (":1.2", "1.2.0beta2", True),
    ("1.2.0alpha1:", "1.2.0", True),
    (":1.2.0rc345", "1.2.0", False),
    ("1.14", "1.14rc1", False),  # 1.14rc1 < 1.14
    ("1.14", "1.15rc1", True),  # 1.15rc1 < 1.15, the version after 1.14
    # =v is v exactly (as Spack's tuples compare: 1.14.06 is 1.14.6)
    ("=1.14.6", "1.14.6", True),
    ("=1.14.6", "1.14.06", True),
    ("=1.14", "1.14.6", False),
    ("=1.14.6", "1.14.6.1", False),
    # lists hold what any of their elements holds (test_satisfaction_with_lists)
    ("4.3, 4.6, 4.7", "4.7.3", True),
    ("4.3,4.6,4.7", "4.6.5.2", True),
    ("4.3,4.6,4.7", "4", False),
    ("4.2, 4.3:4.7", "4.8.0", False),
    ("4.2,4.3:4.8", "4.8.2", True),
    ("1.2,=1.4.1", "1.4.1", True),
    ("1.2,=1.4.1", "1.4.2", False),
    # separators and padding do not matter; develop is above every number
    ("2.0", "2_0", True),
    ("10.1", "10.0001", True),
    ("develop", "develop", True),
    ("1.0:", "main", True),
]


@pytest.mark.parametrize("constraint, version, expected", VERSIONS, ids=[f"{c}|{v}" for c, v, _ in VERSIONS])
def test_a_version_constraint_holds_what_spack_says_it_does(constraint, version, expected):
    assert holds(constraint, version) is expected


def nodes(text):
    return [node.as_json() for node in parse(text).nodes]


def node(**given):
    """A node's JSON: what it asks for, and bare when that is only a name."""
    return {**given, "bare": int(set(given) <= {"name"})}


# (spec, what each of its nodes asks for, versions aside: those are above)
SPECS = [
    ("", [node()]),
    ("hdf5", [node(name="hdf5")]),
    ("HDF5", [node(name="hdf5")]),
    ("*", [node()]),
    ("py-numpy", [node(name="py-numpy")]),
    ("hdf5+mpi~cxx", [node(name="hdf5", variants=[["mpi", "+", []], ["cxx", "~", []]])]),
    ("hdf5 -mpi", [node(name="hdf5", variants=[["mpi", "~", []]])]),
    ("hdf5 mpi=True", [node(name="hdf5", variants=[["mpi", "+", []]])]),
    ("hdf5 mpi=false", [node(name="hdf5", variants=[["mpi", "~", []]])]),
    ("hdf5 ++mpi", [node(name="hdf5", variants=[["mpi", "+", []]])]),  # propagation: the node's own value
    ("hdf5 ~~mpi", [node(name="hdf5", variants=[["mpi", "~", []]])]),
    ("hdf5 api==v18", [node(name="hdf5", variants=[["api", "=", ["v18"]]])]),
    ("cuda_arch=70,80", [node(variants=[["cuda_arch", "=", ["70", "80"]]])]),
    ("x patches:=abc,def", [node(name="x", variants=[["patches", ":=", ["abc", "def"]]])]),
    ('x a="b c"', [node(name="x", variants=[["a", "=", ["b c"]]])]),
    ("hdf5 %gcc", [node(name="hdf5", compilers=["gcc"])]),
    ("hdf5 %oneapi", [node(name="hdf5", compilers=["oneapi", "intel-oneapi-compilers"])]),
    ("hdf5 %intel-oneapi-compilers", [node(name="hdf5", compilers=["intel-oneapi-compilers", "oneapi"])]),
    ("hdf5 %clang", [node(name="hdf5", compilers=["clang", "llvm"])]),
    # Spack 1.x names a language's compiler: %c=gcc is %gcc, named again for another language or not
    ("hdf5 %c=gcc", [node(name="hdf5", compilers=["gcc"])]),
    ("hdf5 %cxx=oneapi", [node(name="hdf5", compilers=["oneapi", "intel-oneapi-compilers"])]),
    ("hdf5 %c=gcc %cxx=gcc %fortran=gcc", [node(name="hdf5", compilers=["gcc"])]),
    ("hdf5 %c=oneapi %cxx=intel-oneapi-compilers", [node(name="hdf5", compilers=["oneapi", "intel-oneapi-compilers"])]),
    ("hdf5 os=ubuntu24.04 platform=linux", [node(name="hdf5", os="ubuntu24.04", platform="linux")]),
    ("hdf5 operating_system=rhel8", [node(name="hdf5", os="rhel8")]),
    (
        "hdf5 arch=linux-ubuntu24.04-x86_64_v3",
        [node(name="hdf5", platform="linux", os="ubuntu24.04", targets=[{"is": "x86_64_v3"}])],
    ),
    ("hdf5 arch=zen3", [node(name="hdf5", targets=[{"is": "zen3"}])]),
    ("hdf5 target=zen2,zen3", [node(name="hdf5", targets=[{"is": "zen2"}, {"is": "zen3"}])]),
    ("hdf5 target=x86_64_v3:", [node(name="hdf5", targets=[{"from": "x86_64_v3", "to": ""}])]),
    ("hdf5 target=:zen3", [node(name="hdf5", targets=[{"from": "", "to": "zen3"}])]),
    ("hdf5 target=zen2:zen4", [node(name="hdf5", targets=[{"from": "zen2", "to": "zen4"}])]),
    ("/ABCD", [node(hash="abcd")]),
    ("hdf5/abcd", [node(name="hdf5", hash="abcd")]),
    ("hdf5 ^mpich", [node(name="hdf5"), node(name="mpich")]),
    (
        "hdf5 ^mpich+fortran ^zlib",
        [node(name="hdf5"), node(name="mpich", variants=[["fortran", "+", []]]), node(name="zlib")],
    ),
    ("^mpi", [node(), node(name="mpi")]),
    ("hdf5 ^mpich %gcc", [node(name="hdf5"), node(name="mpich", compilers=["gcc"])]),
    ("hdf5 %gcc ^mpich", [node(name="hdf5", compilers=["gcc"]), node(name="mpich")]),
    ("hdf5 ^/abcd", [node(name="hdf5"), node(hash="abcd")]),
    ("hdf5 ^zlib/abcd", [node(name="hdf5"), node(name="zlib", hash="abcd")]),
    # compiler last, as our spec strings (and Spack 0.x and 1.x) write it
    (
        "hdf5+mpi api=default arch=linux-ubuntu24.04-x86_64_v3 %gcc",
        [
            node(
                name="hdf5",
                variants=[["mpi", "+", []], ["api", "=", ["default"]]],
                platform="linux",
                os="ubuntu24.04",
                targets=[{"is": "x86_64_v3"}],
                compilers=["gcc"],
            )
        ],
    ),
]


@pytest.mark.parametrize("text, expected", SPECS, ids=[text or "(empty)" for text, _ in SPECS])
def test_a_spec_asks_of_each_node_what_spack_reads_in_it(text, expected):
    assert nodes(text) == expected


def test_versions_of_a_package_and_of_its_compiler_are_ranges_of_the_same_kind():
    (root,) = parse("hdf5@1.14: %gcc@13").nodes
    key = normalise.version_sort_key
    assert root.versions == [[key("1.14"), ""]]
    assert root.compiler_versions == [[key("13"), key("14")]]
    for text in ("hdf5@1.14: %c=gcc@13", "hdf5@1.14: %c=gcc@13 %cxx=gcc", "hdf5@1.14: %c=gcc %cxx=gcc@13"):
        (same,) = parse(text).nodes
        assert (same.versions, same.compiler, same.compiler_versions) == (
            [[key("1.14"), ""]],
            "gcc",
            [[key("13"), key("14")]],
        )
    assert parse("hdf5 %gcc@=13.2.0").root.compiler_versions == [[key("13.2.0"), key("13.2.0") + "00"]]
    # A version after the compiler's name, even apart from it, is the compiler's in Spack 0.x and 1.x alike.
    assert parse("hdf5@1.14: %gcc @13").nodes == parse("hdf5@1.14: %gcc@13").nodes
    assert parse("hdf5 ^mpich@4:").dependencies[0].versions == [[key("4"), ""]]


# (spec, the one line that says where it went wrong)
ERRORS = [
    ("hdf5@1.14: +mpi %", "hdf5@1.14: +mpi %: expected a compiler name after '%' (column 17)"),
    ("hdf5 ^", "hdf5 ^: expected a package name (or /hash) after '^' (column 6)"),
    ("hdf5 ^+mpi", "hdf5 ^+mpi: expected a package name (or /hash) after '^' (column 6)"),
    ("hdf5@", "hdf5@: expected a version after '@' (column 5)"),
    ("hdf5 @ +mpi", "hdf5 @ +mpi: expected a version after '@' (column 6)"),
    ("hdf5 zlib", "hdf5 zlib: 'zlib' starts a second spec: give one, its dependencies after '^' (column 6)"),
    ("hdf5 !mpi", "hdf5 !mpi: unexpected '!' (column 6)"),
    (
        "hdf5@1.14@1.12",
        "hdf5@1.14@1.12: a node has one version list: join the versions with ',' (@1.2,1.4:) (column 10)",
    ),
    ("hdf5@1.4:1.2", "hdf5@1.4:1.2: 1.4:1.2 is an empty range (column 5)"),
    ("hdf5@=1.2:1.4", "hdf5@=1.2:1.4: '=' takes one exact version, found '=1.2:1.4' (column 5)"),
    ("hdf5@git.develop", "hdf5@git.develop: git versions are not in the build cache: give a version (column 5)"),
    ("hdf5 +mpi ~mpi", "hdf5 +mpi ~mpi: the variant 'mpi' is given twice (column 11)"),
    ("hdf5 os=a os=b", "hdf5 os=a os=b: the operating system is given twice (column 11)"),
    (
        "hdf5 arch=linux-rhel8-zen3 target=zen2",
        "hdf5 arch=linux-rhel8-zen3 target=zen2: the target is given twice (column 28)",
    ),
    (
        "hdf5 target=zen2::",
        "hdf5 target=zen2::: expected a target (zen3), or a range of them (x86_64_v3:), found 'zen2::' (column 6)",
    ),
    ("hdf5 os==rhel8", "hdf5 os==rhel8: the architecture does not propagate: write os= with one '=' (column 6)"),
    ("hdf5 cflags=-O3", "hdf5 cflags=-O3: compiler flags are not recorded in the cache: leave cflags= out (column 6)"),
    ("builtin.hdf5", "builtin.hdf5: namespaces are not recorded in the cache: write 'hdf5' (column 1)"),
    ("./hdf5.json", "./hdf5.json: spec files are not read here: write the spec (column 1)"),
    ("hdf5 %gcc %clang", "hdf5 %gcc %clang: a node has one compiler here: give one '%' (column 11)"),
    (
        "hdf5 %%gcc",
        "hdf5 %%gcc: '%%' (a compiler for every node) is not answered: write '%' and the compiler (column 6)",
    ),
    (
        "hdf5 %mpi=mpich",
        "hdf5 %mpi=mpich: only a language's compiler is answered of virtual assignments (c, cxx, fortran): write"
        " %c=gcc, or ^mpich for %mpi=mpich (column 6)",
    ),
    ("hdf5 %c=gcc %c=clang", "hdf5 %c=gcc %c=clang: a node has one compiler here: give one '%' (column 13)"),
    (
        "hdf5 %c=gcc@13 %cxx=gcc@12",
        "hdf5 %c=gcc@13 %cxx=gcc@12: a node has one compiler here: give one '%' (column 16)",
    ),
    (
        "hdf5 ^[virtuals=mpi] mpich",
        "hdf5 ^[virtuals=mpi] mpich: edge attributes ([deptypes=...], [virtuals=...]) are not answered: leave them out (column 6)",
    ),
    # After %gcc, Spack 1.x reads node options as the compiler's and Spack 0.x as the package's: refused.
    (
        "hdf5 %gcc +mpi",
        "hdf5 %gcc +mpi: write '+mpi' before '%gcc': after it, Spack 1.x reads it as the compiler's (column 11)",
    ),
    (
        "hdf5 %gcc target=zen3",
        "hdf5 %gcc target=zen3: write 'target=zen3' before '%gcc': after it, Spack 1.x reads it as the compiler's (column 11)",
    ),
    (
        "hdf5 %gcc@13 @1.14",
        "hdf5 %gcc@13 @1.14: write '@1.14' before '%gcc': after it, Spack 1.x reads it as the compiler's (column 14)",
    ),
    (
        "hdf5 namespace=builtin",
        "hdf5 namespace=builtin: namespaces are not recorded in the cache: leave namespace= out (column 6)",
    ),
    ("hdf5 ^zlib ^zlib", "hdf5 ^zlib ^zlib: 'zlib' is named twice after '^': give its constraints once (column 12)"),
    ("/abc1", "/abc1: expected a hash: up to 32 characters of Spack's base32 alphabet (a-z, 2-7) (column 2)"),
    ("hdf5/abcd/efgh", "hdf5/abcd/efgh: a node has one hash (column 10)"),
    ("hdf5\n+mpi %", "hdf5 +mpi %: expected a compiler name after '%' (column 11)"),
]


@pytest.mark.parametrize("text, line", ERRORS, ids=[text for text, _ in ERRORS])
def test_a_spec_that_does_not_parse_is_one_line_saying_where(text, line):
    with pytest.raises(SpecError) as raised:
        parse(text)
    assert str(raised.value) == line
    assert "\n" not in str(raised.value)


def test_a_long_spec_is_shown_around_where_it_went_wrong():
    text = "hdf5 " + " ".join(f"+v{n}" for n in range(100)) + " !"
    with pytest.raises(SpecError) as raised:
        parse(text)
    assert str(raised.value).endswith(f"!: unexpected '!' (column {len(text)})")
    assert len(str(raised.value)) < 200


def test_what_does_not_parse_finds_nothing_in_sql():
    assert sql_parameters("hdf5 %") == {"_spec_error": "yes", "_spec_nodes": ""}
    assert sql_parameters("hdf5")["_spec_error"] == ""
