"""The normalised records both readers produce and the loader consumes, whatever the input was.

A Document is one tag's binaries of one package: a cache page, or the part of a tag's build-cache
indexes that is about one package. A Binary is one spec in it; its Built is what was built, which
many binaries share. Build-cache indexes also give Nodes (specs that are only dependencies, such as
externals) and the dependency edges between hashes: (dependency hash, DependencyKind) pairs.
"""

import re
import sys
from dataclasses import dataclass, field
from typing import NamedTuple

from spack_cache_db.normalise import CONTROL_CHARACTERS, Compiler


class InputError(Exception):
    """An input that cannot be read: names the file or URL, the field and what was expected. Its text is one
    printable line whatever the parts hold (a file name with a newline, a server's reason phrase with escapes):
    control characters are written as escapes. The field and what was expected are kept (in problems) as
    printed; the path as given, since it is a file's name."""

    def __init__(self, location, field, expected):
        self.path = str(location)
        self.field = printable(str(field))
        self.expected = printable(str(expected))
        super().__init__(f"{printable(self.path)}: {self.field}: {self.expected}")


def one_line(error):
    """An error's text on one line: a message names one thing in one line."""
    return " ".join(str(error).split())


_UNPRINTABLE = re.compile(f"[{CONTROL_CHARACTERS}\\ud800-\\udfff]")


def printable(text):
    """text with each control character, line separator and lone surrogate written as Python writes it in a
    string ('\\n', '\\x1b', '\\u2028', '\\ud800'): safe to print on a terminal, one line, valid UTF-8."""
    return _UNPRINTABLE.sub(lambda found: repr(found[0])[1:-1], text)


class Built(NamedTuple):
    """What was built (a configuration); many binaries share one: the same configuration, rebuilt."""

    number: int | None  # one per configuration in a build, a cheap key for it (Configurations gives it)
    version: str
    compiler: Compiler
    compiler_exact: bool  # written 'name@=version'
    os: str
    platform: str
    target: str
    variants: tuple  # of Variant, in document order
    raw_variants: tuple  # the same, as written


class DependencyKind(NamedTuple):
    """How a spec depends on another, as Spack records it; many edges share one."""

    deptypes: tuple  # build, link, run, test (sorted)
    virtuals: tuple  # the virtual packages it provides to the dependent (mpi, c, cxx, ...; sorted)


class Binary(NamedTuple):
    """One spec listed in a tag: a binary in the build cache."""

    hash: str
    built: Built
    stacks: tuple  # sorted
    size: int | None
    extra: dict  # fields the format does not document (e.g. a page's tarball), kept
    dependencies: tuple | None = None  # of (hash, DependencyKind); None where the input does not say (pages)


class Node(NamedTuple):
    """A spec a build-cache index holds only as a dependency (an external, a build-only compiler)."""

    hash: str
    package: str
    built: Built
    external: bool
    dependencies: tuple  # of (hash, DependencyKind)


@dataclass
class Document:
    """One tag's binaries of one package, and how to write it back as a cache page."""

    source: str  # the file or URL it was read from, as the user named it
    tag: str
    package: str
    binaries: list  # of Binary, in the input's order
    binaries_per_stack: dict  # {stack: binaries}
    meta_text: str | None  # the page's meta as written; None where it is the text its binaries imply
    sorted_keys: bool  # written the way cache.spack.io's generator writes today
    key_order: list | None  # otherwise: the specs' keys in the order they first appear, for export
    extra: dict = field(default_factory=dict)  # front-matter fields we do not know, kept
    warnings: list = field(default_factory=list)  # (field, message): the input disagrees with itself
    binary_field: str = "spec_details[{position}].hash"  # where the input names a binary, for messages


@dataclass
class Configurations:
    """What binaries share, checked once per build rather than once per binary: configurations (Built), by the
    text a reader read them from, and sorted stack lists. One per build, used by every reader, so that
    Built.number is one per configuration within a build, however it was read."""

    built: dict = field(default_factory=dict)  # a reader's text of a configuration -> Built
    numbers: dict = field(default_factory=dict)  # configuration_identity(Built) -> its number
    stacks: dict = field(default_factory=dict)  # a page's list of stacks -> checked and sorted, within a tag

    def new_tag(self):
        """Stack lists are remembered within a tag only: they seldom come back in other tags, and kept for the
        whole history they grew with it (84k lists and 42 MiB after 20 tags of the spread shape; forgetting
        them at each tag took 83 MiB off the peak of 50 tags and no measurable time)."""
        self.stacks.clear()

    def add(self, text, make):
        """The Built for a reader's text of a configuration, made by make() the first time the text is seen
        (make raises on text that is not a valid configuration)."""
        built = self.built.get(text)
        if built is None:
            made = make()
            number = self.numbers.setdefault(configuration_identity(made), len(self.numbers))
            built = self.built[interned(text)] = made._replace(number=number)
        return built


def configuration_identity(built):
    """What makes two Builts one configuration: every field but its number, so that a field added to Built is
    part of it whatever its value."""
    return built._replace(number=None)


def interned(texts):
    """A cached key or Built keeps one copy of each text, not the copies of the document it was first read from:
    a whole history's configurations share a few thousand distinct texts."""
    return tuple(sys.intern(text) if type(text) is str else interned(text) for text in texts)
