"""Spack's spec syntax as `spack buildcache list` takes a constraint, and the SQL parameters that answer it.

    hdf5@1.14: +mpi ~cxx api=default %gcc@13 arch=linux-ubuntu24.04-x86_64_v3 ^mpich@4: /abcd

The grammar and its tokens are Spack's (lib/spack/spack/spec_parser.py); what a constraint holds is Spack's
too (lib/spack/spack/version): @1.14 is the range 1.14:1.14, which holds 1.14.6 (and 1.15rc1: a range lo:hi
holds lo <= v < the version after hi), @1.14: and @:1.12 are open, @=1.14.6 is that version exactly, and
@1.2,1.4:1.6 is a list. A binary matches ^dep when its dependency DAG holds a spec that matches dep (a bare
^mpi also matches any provider of the virtual mpi; Spack 1.x's %c=gcc, a language's compiler, is %gcc).
Where Spack 0.x and 1.x read a spec differently (a variant after %gcc is the compiler's in 1.x, the package's
in 0.x), or where the cache cannot answer (compiler flags, namespaces, git versions, edge attributes, virtual
assignments but a language's), the spec is refused with a sentence that says why. Every error is one line that says where the spec went wrong:

    hdf5@1.14: +mpi %: expected a compiler name after '%' (column 17)
"""

import json
import re
from dataclasses import dataclass, field

from spack_cache_db import normalise

_IDENTIFIER = r"[a-zA-Z_0-9][a-zA-Z_0-9\-]*"
_NAME = r"[a-zA-Z_0-9][a-zA-Z_0-9\-.]*"
_VALUE = r"[a-zA-Z_0-9\-+*.,:=%^~/\\]+"
_QUOTED = r"""'(?:[^']|(?<=\\)')*'|"(?:[^"]|(?<=\\)")*\""""
_VERSION = r"=?[a-zA-Z0-9_][a-zA-Z_0-9\-.]*\b"
_RANGE = rf"(?:{_VERSION})?:(?:{_VERSION}(?!\s*=))?"
_LIST = rf"(?:{_RANGE}|{_VERSION})(?:\s*,\s*(?:{_RANGE}|{_VERSION}))*"
_GIT = r"(?:git\.[a-zA-Z_0-9][a-zA-Z_0-9./\-]*|[A-Fa-f0-9]{40})"

# Spack's tokens, in the order they are tried at each position.
_TOKENS = {
    "edge attributes": r"(?:\^|%%?)\[",
    "dependency": r"\^",
    "compiler everywhere": r"%%",
    "compiler": r"%",
    "git version": rf"@{_GIT}(?:={_VERSION})?",
    "version": rf"@\s*(?:{_LIST})",
    "propagated variant": rf"(?:\+\+|~~|--)\s*{_NAME}",
    "variant": rf"[~+-]\s*{_NAME}",
    "propagated value": rf"{_NAME}:?==(?:{_VALUE}|{_QUOTED})",
    "value": rf"{_NAME}:?=(?:{_VALUE}|{_QUOTED})",
    "file": r"(?:\.|/|[a-zA-Z0-9\-_]*/)[a-zA-Z0-9\-_./]*(?:\.json|\.yaml)",
    "namespaced name": rf"{_IDENTIFIER}(?:\.{_IDENTIFIER})+",
    "name": rf"{_IDENTIFIER}|\*",
    "hash": r"/[a-zA-Z_0-9]+",
    "space": r"\s+",
    "unexpected": r".",
}
_TOKEN = re.compile("|".join(f"(?P<t{number}>{pattern})" for number, pattern in enumerate(_TOKENS.values())), re.S)
_KINDS = list(_TOKENS)
_NODE_OPTIONS = {"version", "git version", "variant", "propagated variant", "value", "propagated value", "hash"}

COMPILER_FLAGS = ("cflags", "cppflags", "cxxflags", "fflags", "ldflags", "ldlibs")

# The virtuals of Spack 1.x a compiler provides: %c=gcc is %gcc.
LANGUAGES = ("c", "cxx", "fortran")
_ARCH_PARTS = {"platform": "platform", "os": "os", "operating_system": "os", "target": "target"}
_TARGET = re.compile(r"[A-Za-z0-9_.]+")
_HASH_ALPHABET = re.compile(r"[a-z2-7]{1,32}")
_ECHOED = 120  # characters of a long spec shown in an error, around where it went wrong

PARAMETERS = ("_spec_error", "_spec_nodes")  # what sql_parameters gives, as :_spec_error, :_spec_nodes


class SpecError(ValueError):
    """A spec that does not parse: str() is one line with the spec, what was expected and the column."""

    def __init__(self, text, message, column):
        self.text, self.message, self.column = text, message, column
        super().__init__(f"{_echo(text, column)}: {message} (column {column})")


def _echo(text, column):
    shown = re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", " ", text)
    if len(shown) <= _ECHOED:
        return shown
    start = max(column - _ECHOED // 2, 0)
    return ("…" if start else "") + shown[start : start + _ECHOED] + ("…" if start + _ECHOED < len(shown) else "")


@dataclass
class Node:
    """What one node of a spec asks for. Versions are ranges [lo, hi) of normalise.sortable_version keys ('' for
    no bound); targets are {"is": name} or {"from": lo, "to": hi} (archspec's ancestors and descendants)."""

    column: int
    name: str = ""
    versions: list | None = None
    variants: dict = field(default_factory=dict)  # name -> [name, operator, values]
    compiler: str = ""
    compiler_versions: list | None = None
    platform: str = ""
    os: str = ""
    targets: list | None = None
    hash: str = ""

    @property
    def bare(self):
        """Only a name: ^mpi may then be a virtual, matched by the providers of mpi."""
        return self == Node(self.column, self.name)

    def as_json(self):
        """The node for find_binaries.sql: a part it does not constrain is left out."""
        given = {
            "name": self.name,
            "bare": int(self.bare),
            "versions": self.versions,
            "variants": list(self.variants.values()) or None,
            "compilers": normalise.compiler_field_names(self.compiler) if self.compiler else None,
            "compiler_versions": self.compiler_versions,
            "platform": self.platform,
            "os": self.os,
            "targets": self.targets,
            "hash": self.hash,
        }
        return {key: value for key, value in given.items() if value not in (None, "")}


@dataclass
class Spec:
    root: Node
    dependencies: list  # Nodes, after ^

    @property
    def nodes(self):
        return [self.root, *self.dependencies]


@dataclass
class _Token:
    kind: str
    text: str
    start: int  # 0-based

    @property
    def column(self):
        return self.start + 1

    @property
    def end(self):
        return self.start + len(self.text)


def tokens(text):
    """Spack's tokens of text, without the spaces between them."""
    found = []
    for match in _TOKEN.finditer(text):
        kind = _KINDS[int(match.lastgroup[1:])]
        if kind != "space":
            found.append(_Token(kind, match.group(), match.start()))
    return found


def parse(text):
    """The Spec that text writes; raises SpecError."""
    return _Parser(text).spec()


def sql_parameters(text):
    """The :_spec_ parameters of text for find_binaries.sql; a spec that does not parse matches nothing."""
    try:
        spec = parse(text)
    except SpecError:
        return {"_spec_error": "yes", "_spec_nodes": ""}
    return {"_spec_error": "", "_spec_nodes": json.dumps([node.as_json() for node in spec.nodes])}


class _Parser:
    def __init__(self, text):
        self.text = text
        self.tokens = tokens(text)
        self.position = 0

    def fail(self, message, column):
        raise SpecError(self.text, message, column)

    def peek(self):
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, *kinds):
        token = self.peek()
        if token is not None and token.kind in kinds:
            self.position += 1
            return token
        return None

    def spec(self):
        root = self.node(Node(1))
        dependencies, current = [], root
        while (token := self.peek()) is not None:
            if self.take("dependency"):
                current = self.dependency(token, dependencies)
            elif self.take("compiler"):
                self.compiler(token, current)
            else:
                self.refuse(token)
        return Spec(root, dependencies)

    def refuse(self, token):
        if token.kind == "name":
            self.fail(f"'{token.text}' starts a second spec: give one, its dependencies after '^'", token.column)
        if token.kind == "edge attributes":
            self.fail("edge attributes ([deptypes=...], [virtuals=...]) are not answered: leave them out", token.column)
        if token.kind == "compiler everywhere":
            self.fail("'%%' (a compiler for every node) is not answered: write '%' and the compiler", token.column)
        if token.kind == "unexpected" and token.text == "@":
            self.fail("expected a version after '@'", token.column)
        if token.kind == "hash":
            self.fail("a node has one hash", token.column)
        self.fail(f"unexpected '{token.text.strip()}'", token.column)

    def node(self, node):
        token = self.peek()
        if self.take("name"):
            node.name = "" if token.text == "*" else token.text.lower()
        elif self.take("namespaced name"):
            name = token.text.rsplit(".", 1)[1]
            self.fail(f"namespaces are not recorded in the cache: write '{name}'", token.column)
        elif self.take("file"):
            self.fail("spec files are not read here: write the spec", token.column)
        while (token := self.peek()) is not None and token.kind in _NODE_OPTIONS:
            if token.kind == "hash" and node.hash:
                break
            self.position += 1
            self.option(node, token)
        return node

    def option(self, node, token):
        if token.kind == "version":
            if node.versions is not None:
                self.fail("a node has one version list: join the versions with ',' (@1.2,1.4:)", token.column)
            node.versions = self.versions(token)
        elif token.kind == "git version":
            self.fail("git versions are not in the build cache: give a version", token.column)
        elif token.kind in ("variant", "propagated variant"):
            sign = token.text[0]
            self.variant(node, token, token.text.lstrip("+~-").strip(), "+" if sign == "+" else "~", [])
        elif token.kind in ("value", "propagated value"):
            self.key_value(node, token, propagated=token.kind == "propagated value")
        else:
            node.hash = self.hash(token)

    def key_value(self, node, token, propagated):
        name, operator, value = re.match(r"([^:=]+)(:?==?)(.*)", token.text, re.S).groups()
        value = _unquoted(value)
        part = "arch" if name in ("arch", "architecture") else _ARCH_PARTS.get(name)
        if part and propagated:
            self.fail(f"the architecture does not propagate: write {name}= with one '='", token.column)
        if part == "arch":
            parts = value.split("-")
            given = zip(("platform", "os", "target"), parts, strict=True) if len(parts) == 3 else [("target", value)]
            for arch_part, arch_value in given:
                self.arch(node, token, arch_part, arch_value)
        elif part:
            self.arch(node, token, part, value)
        elif name in COMPILER_FLAGS:
            self.fail(f"compiler flags are not recorded in the cache: leave {name}= out", token.column)
        elif name == "namespace":
            self.fail("namespaces are not recorded in the cache: leave namespace= out", token.column)
        elif value.lower() in ("true", "false") and operator.rstrip("=") == "":
            self.variant(node, token, name, "+" if value.lower() == "true" else "~", [])
        else:
            operator = ":=" if operator.startswith(":") else "="
            self.variant(node, token, name, operator, list(dict.fromkeys(value.split(","))))

    def variant(self, node, token, name, operator, values):
        if name in node.variants:
            self.fail(f"the variant '{name}' is given twice", token.column)
        node.variants[name] = [name, operator, values]

    def arch(self, node, token, part, value):
        if part == "target":
            if node.targets is not None:
                self.fail("the target is given twice", token.column)
            node.targets = [self.target(token, item) for item in value.split(",")]
            return
        if getattr(node, part):
            self.fail(f"the {'operating system' if part == 'os' else part} is given twice", token.column)
        if not value or not normalise.NAME.fullmatch(value):
            self.fail(f"expected a name for the {part}, found '{value}'", token.column)
        setattr(node, part, value)

    def target(self, token, item):
        lo, colon, hi = item.partition(":")
        for name in (lo, hi) if colon else (lo,):
            if name and not _TARGET.fullmatch(name) or not (colon or name):
                self.fail(f"expected a target (zen3), or a range of them (x86_64_v3:), found '{item}'", token.column)
        return {"from": lo, "to": hi} if colon else {"is": lo}

    def hash(self, token):
        prefix = token.text[1:].lower()
        if not _HASH_ALPHABET.fullmatch(prefix):
            self.fail("expected a hash: up to 32 characters of Spack's base32 alphabet (a-z, 2-7)", token.column + 1)
        return prefix

    def versions(self, token):
        """The version list of an @ token as ranges of sortable keys."""
        ranges = []
        for element in re.sub(r"\s", "", token.text[1:]).split(","):
            if element.startswith("="):
                if ":" in element:
                    self.fail(f"'=' takes one exact version, found '{element}'", token.column)
                key = normalise.version_sort_key(element[1:])
                ranges.append([key, key + "00"])
            elif ":" in element:
                ranges.append(self.version_range(token, *element.split(":")))
            else:
                ranges.append(self.version_range(token, element, element))
        return ranges

    def version_range(self, token, lo, hi):
        if lo.startswith("=") or hi.startswith("="):
            self.fail(f"a range is lo:hi without '=', found '{lo}:{hi}'", token.column)
        lo_key = normalise.version_sort_key(lo) if lo else ""
        hi_key = normalise.sortable_version(normalise.next_version_key(normalise.version_key(hi))) if hi else ""
        if lo_key and hi_key and hi_key < lo_key:
            self.fail(f"{lo}:{hi} is an empty range", token.column)
        return [lo_key, hi_key]

    def dependency(self, caret, dependencies):
        node = self.node(Node(caret.column + 1))
        if not node.name and not (node.hash and node == Node(node.column, hash=node.hash)):
            self.fail("expected a package name (or /hash) after '^'", caret.column)
        if node.name and any(other.name == node.name for other in dependencies):
            self.fail(f"'{node.name}' is named twice after '^': give its constraints once", caret.column)
        dependencies.append(node)
        return node

    def compiler(self, percent, node):
        name = self._compiler_name(percent).lower()
        version = self.peek()
        versioned = version is not None and version.kind == "version"  # %gcc @13 too: Spack reads gcc@13
        # One compiler, named again for another language (%c=gcc@13 %cxx=gcc), by either of its names (oneapi,
        # intel-oneapi-compilers), its versions given once.
        named_again = node.compiler and name in normalise.compiler_field_names(node.compiler)
        if node.compiler and (not named_again or versioned and node.compiler_versions is not None):
            self.fail("a node has one compiler here: give one '%'", percent.column)
        node.compiler = node.compiler or name
        if versioned:
            self.position += 1
            node.compiler_versions = self.versions(version)
        after = self.peek()
        if after is not None and after.kind in _NODE_OPTIONS:
            self.fail(
                f"write '{after.text}' before '%{node.compiler}': after it, Spack 1.x reads it as the compiler's",
                after.column,
            )

    def _compiler_name(self, percent):
        """The compiler's name after '%': gcc, or Spack 1.x's c=gcc (the compiler of a language)."""
        name = self.take("name")
        if name is not None and name.text != "*":
            return name.text
        after = self.peek()
        if after is not None and after.kind == "value":
            compiler = _language_compiler(after)
            if compiler is None:
                self.fail(
                    f"only a language's compiler is answered of virtual assignments ({', '.join(LANGUAGES)}):"
                    " write %c=gcc, or ^mpich for %mpi=mpich",
                    percent.column,
                )
            self.position += 1
            return compiler
        self.fail("expected a compiler name after '%'", percent.column)


def _language_compiler(token):
    """The compiler of Spack 1.x's %c=gcc (a language's virtual assigned to it: c, cxx or fortran), or None."""
    language, _, compiler = token.text.partition("=")
    return compiler if language in LANGUAGES and re.fullmatch(_IDENTIFIER, compiler) else None


def _unquoted(value):
    match = re.fullmatch(r"""(['"])(.*)\1""", value, re.S)
    return match.group(2).replace("\\" + match.group(1), match.group(1)) if match else value
