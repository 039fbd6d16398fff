"""The pages reader: find cache.spack.io pages in the inputs, read each one's front matter as text, and check
its spec_details into a Document (records.py)."""

import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import yaml

from spack_cache_db.normalise import (
    HASH,
    HASH_LENGTH,
    NAME,
    PLAIN_TEXT,
    derived_meta,
    is_storable_text,
    meta_text,
    name_problem,
    parse_compiler,
    parse_variant,
    text_problem,
)
from spack_cache_db.read.files import (
    FolderListing,
    display_path,
    folder_listing,
    kind_of,
    read_regular_file,
    same_listing,
)
from spack_cache_db.records import Binary, Built, Document, InputError, interned, one_line

SPEC_FIELDS = ("compiler", "hash", "os", "platform", "size", "stacks", "target", "variants", "versions")


class PageError(InputError):
    """A page that cannot be read: names the file, the field and what was expected."""


class NotACachePage(Exception):
    """A file found in a folder that is some other kind of document (skipped, counted)."""


class OldLayoutPage(Exception):
    """A page of the old per-package layout ('category: package' with 'spec_files'): skipped with a warning."""


@dataclass(slots=True)
class SourceFile:
    path: str  # as the user will recognise it: the input argument joined with the path inside it
    explicit: bool  # named on the command line, or where only a cache page can be
    folder_tag: str | None = None  # from _cache/<tag>/<package>/specs.md
    folder_package: str | None = None
    listing: FolderListing | None = None  # of its folder, when the next build need not list that again


@dataclass
class RecordedFolder:
    """A folder as an earlier build listed it: while it is the same (same_listing), it holds these files."""

    listing: FolderListing
    paths: list


@dataclass
class Page:
    path: str
    digest: str
    title: str
    tag: str
    meta: dict
    meta_text: str
    specs: list
    sorted_keys: bool  # written the way cache.spack.io's generator writes today
    key_order: list | None  # otherwise: the specs' keys in the order they first appear, for export
    extra: dict = field(default_factory=dict)  # front-matter fields we do not know, kept


@dataclass
class Inputs:
    files: list
    tags_yaml: list  # paths of _data/tags.yaml files
    problems: list = field(default_factory=list)  # PageError: what could not be listed or named


def find_inputs(paths, recorded=None):
    """Expand files, folders and checkouts into page files (sorted, for a deterministic build). recorded:
    {folder: RecordedFolder} of an earlier build (recorded_folders), whose files are taken as they were, without
    listing the folder, while the folder is the same."""
    files, tags_yaml, problems = {}, [], []
    for given in paths:
        root = Path(given)
        if os.path.isfile(root):  # os.path's tests say False where pathlib's raise (a folder not searchable)
            _add_source(files, problems, SourceFile(str(root), explicit=True))
            continue
        if not os.path.isdir(root):
            raise PageError(given, "path", _neither_file_nor_folder(root))
        for data_dir in (root / "_data", root.parent / "_data"):
            if _may_exist(data_dir / "tags.yaml") and str(data_dir / "tags.yaml") not in tags_yaml:
                tags_yaml.append(str(data_dir / "tags.yaml"))
        top = os.path.realpath(root)
        for path, entry, listing in _walk(str(root), problems, recorded or {}):
            source = _source_file(path)
            source.listing = listing
            if entry is None:  # a file of a folder found as it was recorded: a regular file, no link
                files.setdefault(path, source)
                continue
            if entry.is_symlink() and not _within(top, target := os.path.realpath(path)):
                if source.explicit:  # elsewhere no page has to be: passed over, as a FIFO is, and never read
                    problems.append(_link_out(path, "file", root, target))
                continue
            if source.explicit or _is_regular(entry):  # elsewhere a FIFO, a device or a dangling link is no page
                _add_source(files, problems, source)
    return Inputs(sorted(files.values(), key=lambda f: f.path), tags_yaml, problems)


def recorded_folders(listings):
    """{folder: RecordedFolder} of (path, FolderListing or None) of the files an earlier build recorded: the
    folders of which it recorded as many files with one listing as that listing had entries. (A file recorded
    with another listing was listed in another state of the folder: the folder is listed again.)"""
    by_folder = {}
    for path, listing in listings:
        if listing is not None:
            folder = path.rpartition(os.sep)[0]
            found = by_folder.get(folder)
            if found is None:
                by_folder[folder] = RecordedFolder(listing, [path])
            elif found.listing == listing:
                found.paths.append(path)
    return {folder: found for folder, found in by_folder.items() if len(found.paths) == found.listing.entries}


def _add_source(files, problems, source):
    """A file to read, unless its name cannot be stored as text (not UTF-8): that is a problem naming it."""
    if is_storable_text(source.path):
        files.setdefault(source.path, source)
    else:
        problems.append(
            PageError(display_path(source.path), "file", "expected a file name in UTF-8 (names are stored as text)")
        )


def _may_exist(path):
    """False when path is not there; True otherwise, also when it cannot be looked at (reading it says why)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


def _neither_file_nor_folder(path):
    try:
        return f"expected a regular file or a folder, found {kind_of(os.stat(path).st_mode)}"
    except OSError as error:
        return f"expected an existing file or folder ({error.strerror})"


# A folder changed this shortly before the walk started is listed again by the next build: a change within the
# same tick of the file system's clock as the one before it (a few milliseconds; 2 s on FAT) can leave the
# folder's change time as it was. (Compared with this machine's clock: a network file system whose server's
# clock is behind it by more than this can have a folder that changed just before recorded all the same.)
RECENT_NS = 2_000_000_000


def _walk(root, problems, recorded):
    """(path, DirEntry or None, FolderListing or None) of the files under root, in sorted order. Folders that are
    links are followed when they lead inside root, each folder once; a link that leads out of root, or a folder
    that cannot be read, goes to problems. A folder of recorded that is as it was is not listed: its files come
    with no DirEntry. A folder of files only, none a link, that did not change in the RECENT_NS before the walk
    gives its FolderListing with each file; other files come with None."""
    top = os.path.realpath(root)
    recent = time.time_ns() - RECENT_NS
    seen, pending = {top}, [(root, top)]  # folders as given, and where they really are
    while pending:
        folder, real = pending.pop()
        try:
            before = os.stat(folder)  # before the listing: a change after it is one the next build sees
            known = recorded.get(folder)
            if known is not None and same_listing(before, known.listing):
                for path in known.paths:
                    yield path, None, known.listing
                continue
            with os.scandir(folder) as listing:
                entries = sorted((entry.name, entry) for entry in listing if not entry.name.startswith("."))
        except OSError as error:
            problems.append(PageError(display_path(folder), "folder", f"expected a readable folder ({error.strerror})"))
            continue
        listed = _listing_to_record(before, entries, recent)
        subfolders = []
        for name, entry in entries:
            if not _is_folder(entry):
                yield entry.path, entry, listed
            elif name not in ("_data", "_site"):
                where = _inside(top, root, entry, real, problems)
                if where is not None and where not in seen:  # a link to a folder already walked is walked once
                    seen.add(where)
                    subfolders.append((entry.path, where))
        pending.extend(reversed(subfolders))


def _listing_to_record(before, entries, recent):
    """The FolderListing of a folder listed as entries, if the next build may take its files from the sources
    recorded instead of listing it: entries that are regular files only, none a link (a file taken from the
    record is not checked for a link out of the input), and a folder that did not change just before the walk.
    A file of it that the build does not record (its name not UTF-8, say) leaves the record short of the
    folder's entries, so recorded_folders leaves the folder out."""
    if before.st_ctime_ns >= recent:
        return None
    if all(_is_plain_file(entry) for _, entry in entries):
        return folder_listing(before, len(entries))
    return None


def _is_plain_file(entry):
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def _is_folder(entry):
    try:
        return entry.is_dir()
    except OSError:  # cannot be looked at: read as a file, which says why
        return False


def _is_regular(entry):
    """Whether a folder's entry is a regular file (after links); False when it cannot be looked at. is_file()
    tests the mode for S_IFREG, from the folder's listing where that names the type: no stat per file."""
    try:
        return entry.is_file()
    except OSError:
        return False


def _inside(top, root, entry, real_parent, problems):
    """Where a folder entry really is, when that is inside the input root (top, after links); None for a link
    out of it, which is not followed, so that a link to / does not walk the whole machine."""
    if not entry.is_symlink():
        return _joined(real_parent, entry.name)
    target = os.path.realpath(entry.path)
    if _within(top, target):
        return target
    problems.append(_link_out(entry.path, "folder", root, target))
    return None


def _joined(folder, name):
    """os.path.join(folder, name) for a name with no separator, a fifth of its time (90,000 folders a walk)."""
    return folder + name if folder.endswith(os.sep) else folder + os.sep + name


def _within(top, path):
    return os.path.commonpath([top, path]) == top


def _link_out(path, kind, root, target):
    return PageError(
        display_path(path),
        kind,
        f"expected a {kind} inside {display_path(root)}, found a link to {display_path(target)}"
        " (not followed: name it as an input to read it)",
    )


def _source_file(path):
    parts = path.split(os.sep)
    if "_cache" in parts:
        inside = parts[parts.index("_cache") + 1 :]
        if len(inside) == 3 and inside[2] == "specs.md":
            return SourceFile(path, True, inside[0], inside[1])
        return SourceFile(path, True)
    return SourceFile(path, explicit=parts[-1] == "specs.md")


def file_digest(data):
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# How a page starts (after a byte order mark, perhaps): a file found in a folder that starts otherwise is no
# page, and is read no further.
_PAGE_STARTS = (b"---", b"\xef\xbb\xbf---")


def read_source(source):
    """The bytes of a source file and the Identity of what was read; raises FileError (an InputError)."""
    return read_regular_file(source.path, starts_with=None if source.explicit else _PAGE_STARTS)


def read_page(source, data):
    """Parse one file's bytes into a Page; raises PageError, NotACachePage or OldLayoutPage."""
    path = source.path
    text = _decode(path, data, source.explicit)
    fields, meta_text = _front_matter(path, text, source.explicit)
    title = _title(path, fields)
    tag = _tag(path, fields)
    if source.folder_tag is not None and tag != source.folder_tag:
        raise PageError(
            path, "categories", f"expected tag '{source.folder_tag}' as in the page's folder, found '{tag}'"
        )
    if source.folder_package is not None and title != source.folder_package:
        raise PageError(path, "title", f"expected '{source.folder_package}' as in the page's folder, found '{title}'")
    meta = fields.pop("meta")
    specs = fields.pop("spec_details")
    if not isinstance(meta, dict):
        raise PageError(path, "meta", "expected a JSON object")
    if not isinstance(specs, list):
        raise PageError(path, "spec_details", "expected a JSON list of specs")
    for key in ("title", "layout", "categories"):
        fields.pop(key)
    if meta_text is None or not _plainly_shallow(meta_text):
        _check_nested(path, "meta", meta)
    _check_extra_fields(path, fields)
    key_orders = list(dict.fromkeys(tuple(spec) for spec in specs if type(spec) is dict))  # a page's specs share a few
    sorted_keys = meta_text is not None and _written_sorted(meta, key_orders)  # only the generator's form is
    if meta_text is None:
        meta_text = json.dumps(meta, sort_keys=True)
    return Page(
        path=path,
        digest=file_digest(data),
        title=title,
        tag=tag,
        meta=meta,
        meta_text=meta_text,
        specs=specs,
        sorted_keys=sorted_keys,
        key_order=None if sorted_keys else list(dict.fromkeys(key for keys in key_orders for key in keys)),
        extra=fields,
    )


def _check_extra_fields(path, fields):
    """Fields we do not know are kept and written back as 'name: <JSON>' lines: each name must be one."""
    for key, value in fields.items():
        if type(key) is not str or not _FIELD_NAME.fullmatch(key):
            raise PageError(path, "front matter", f"expected field names of letters, digits and '_', found {key!r:.80}")
        _check_nested(path, key, value)


def _decode(path, data, explicit):
    if not data.strip():
        raise PageError(path, "file", "expected a page with YAML front matter, found an empty file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        if not explicit and not data.startswith(b"---"):
            raise NotACachePage(path) from error
        raise PageError(path, "encoding", f"expected UTF-8 text (invalid byte at offset {error.start})") from error
    text = text.removeprefix("\ufeff")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    return text


_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CATEGORIES = re.compile(rf"\[({NAME.pattern}), ({NAME.pattern})\]")  # anything else: YAML decides
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_FRAME_FIELDS = ("title", "layout", "categories", "meta", "spec_details")


def _front_matter(path, text, explicit):
    """The front matter as a dict of values, and the meta's JSON text when the page is in the generator's
    form (None when it is not)."""
    if not text.startswith("---\n"):
        if not explicit:
            raise NotACachePage(path)
        raise PageError(path, "front matter", "expected the file to start with a '---' line")
    end = text.find("\n---", 3)
    while end != -1 and text[end + 4 : end + 5] not in ("", "\n"):
        end = text.find("\n---", end + 4)
    if end == -1:
        raise PageError(path, "front matter", "expected a closing '---' line")
    body = text[4 : end + 1]
    fields = _generator_form(body)
    meta_text = None
    if fields is None:
        fields = _yaml_form(path, body)
    else:
        meta_text = fields["meta"]
        fields["meta"], fields["spec_details"] = _quick_json(path, fields["meta"], fields["spec_details"])
    _check_layout(path, fields, explicit)
    if text[end + 4 :].strip():
        raise PageError(path, "front matter", "expected nothing after the closing '---' line")
    return fields, meta_text


def _generator_form(body):
    """Fast path for pages in the form the generator writes: one 'key: value' line per field."""
    fields = {}
    for line in body.splitlines():
        # A name has no ': ', so the first one ends it: a partition, where a pattern would read the whole value
        # (the spec_details' JSON, a line of megabytes) to find the line's end.
        key, separator, value = line.partition(": ")
        if not separator or not _FIELD_NAME.fullmatch(key) or key in fields:
            return None
        fields[key] = value
    if tuple(fields) != _FRAME_FIELDS:
        return None
    title = _QUOTED.fullmatch(fields["title"])
    categories = _CATEGORIES.fullmatch(fields["categories"])
    if not title or not categories or fields["layout"] != "cache":
        return None
    try:
        fields["title"] = json.loads(f'"{title.group(1)}"')
    except ValueError:  # an escape YAML has and JSON has not, such as \a: the YAML reading decides
        return None
    fields["categories"] = [categories.group(1), categories.group(2)]
    return fields


def _quick_json(path, meta, spec_details):
    """(meta, spec_details) of a page in the generator's form, parsed by orjson, three times faster than the
    standard parser; a QuickJson list when it has the spec_details' text, which page_document parses again
    exactly when orjson's reading may differ (it turns 1.10 into 1.1). Text orjson refuses is parsed
    exactly at once: the standard parser says what is wrong, or keeps what orjson cannot read."""
    try:
        specs = orjson.loads(spec_details)
        return orjson.loads(meta), QuickJson(specs, spec_details) if type(specs) is list else specs
    except orjson.JSONDecodeError:
        return _json(path, "meta", meta), _json(path, "spec_details", spec_details)


class QuickJson(list):
    """spec_details read by orjson, with the text they were read from."""

    def __init__(self, values, text):
        super().__init__(values)
        self.text = text


class _Inexact(Exception):
    """A number with a fraction in a value kept as it is: orjson read it as a float."""


def _json(path, field, text):
    """Numbers written with a fraction keep their text: 1.10 must not become 1.1."""
    try:
        return json.loads(text, parse_float=str, parse_constant=_not_json)
    except json.JSONDecodeError as error:
        raise PageError(path, field, f"expected valid JSON ({error})") from error
    except ValueError as error:  # NaN or Infinity; a number past int()'s 4,300 digits
        raise PageError(path, field, f"expected valid JSON ({one_line(error).split(';')[0]})") from error
    except RecursionError as error:
        raise PageError(path, field, f"expected JSON nested at most {MAX_DEPTH} deep") from error


def _not_json(name):
    raise ValueError(f"{name} is not a JSON value")


# How deep a value in a page may nest. Real pages nest 3 deep (spec_details, a spec, its lists); values
# that nest deeper than Python's recursion limit cannot even be written back.
MAX_DEPTH = 32


def nested_value_problem(value):
    """None, or what is wrong with a value a page gives as it is (meta, fields we do not know): nested too
    deep, or text that is not Unicode (a lone UTF-16 surrogate such as \\ud800 cannot be stored)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > MAX_DEPTH:
            return f"expected values nested at most {MAX_DEPTH} deep"
        if type(item) is str:
            if not is_storable_text(item):
                return f"expected Unicode text, found {item!r:.80} (a lone surrogate)"
        elif type(item) is dict:
            pending.extend((key, depth + 1) for key in item)
            pending.extend((entry, depth + 1) for entry in item.values())
        elif type(item) is list:
            pending.extend((entry, depth + 1) for entry in item)
    return None


def _plainly_shallow(json_text):
    """Whether the value read from this JSON text is sure to pass nested_value_problem, which walks all of it (11
    of the 191 us of reading a page of the usual shape): text of a page is UTF-8, so only an escape (\\u) can
    make a lone surrogate, and fewer brackets than MAX_DEPTH cannot nest deeper."""
    return "\\u" not in json_text and json_text.count("[") + json_text.count("{") < MAX_DEPTH


def _check_nested(path, field_name, value):
    problem = nested_value_problem(value)
    if problem:
        raise PageError(path, field_name, problem)


_USUAL_SPEC_KEYS = tuple(sorted(SPEC_FIELDS))


def _written_sorted(meta, key_orders):
    keys = list(meta)
    if keys != sorted(keys):
        return False
    return all(keys == _USUAL_SPEC_KEYS or list(keys) == sorted(keys) for keys in key_orders)


# Front matter in any form but the generator's one-line JSON is read by PyYAML in Python, at about 0.3 MB/s.
MAX_YAML_BYTES = 16 * 1024 * 1024


class RefusedYaml(Exception):
    """YAML that pages never need and that would cost too much to read."""

    def __init__(self, expected, mark):
        super().__init__(f"{expected} (line {mark.line + 1}, column {mark.column + 1})")


class PageYamlLoader(yaml.BaseLoader):
    """BaseLoader (every scalar stays the text the document has) that refuses what pages never need: anchors
    and aliases (a kilobyte of nested aliases stands for gigabytes of values), and values nested deeper than
    MAX_DEPTH (PyYAML composes a node with one recursive call per level)."""

    def __init__(self, stream):
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise RefusedYaml("expected no YAML anchors or aliases (&name, *name)", event.start_mark)
        if self.depth >= MAX_DEPTH:
            raise RefusedYaml(f"expected YAML nested at most {MAX_DEPTH} deep", event.start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_yaml(text):
    """A YAML document as text values; raises yaml.YAMLError or RefusedYaml."""
    return yaml.load(text, Loader=PageYamlLoader)


def _yaml_form(path, body):
    """Any other YAML: every scalar is kept as the text the document has."""
    if len(body) > MAX_YAML_BYTES:
        raise PageError(
            path,
            "front matter",
            f"expected YAML front matter of at most {MAX_YAML_BYTES // 2**20} MiB (the generator's one-line form"
            f" may be longer), found {len(body):,} characters",
        )
    try:
        fields = load_yaml(body)
    except RefusedYaml as error:
        raise PageError(path, "front matter", str(error)) from error
    except yaml.YAMLError as error:
        raise PageError(path, "front matter", f"expected valid YAML ({one_line(error)})") from error
    if not isinstance(fields, dict):
        raise PageError(path, "front matter", "expected a YAML mapping of fields")
    if fields.get("category") == "package" and "spec_files" in fields:
        raise OldLayoutPage(path)
    for key in ("meta", "spec_details"):
        if isinstance(fields.get(key), str):
            fields[key] = _json(path, key, fields[key])
    return fields


def _check_layout(path, fields, explicit):
    if fields.get("layout") != "cache":
        if not explicit:
            raise NotACachePage(path)
        found = fields.get("layout")
        raise PageError(path, "layout", f"expected 'cache', found {found!r}" if found else "expected 'cache'")
    for key in _FRAME_FIELDS:
        if key not in fields:
            raise PageError(path, key, "expected this field in the front matter")


def _title(path, fields):
    title = fields["title"]
    problem = name_problem(title, "a package name")
    if problem:
        raise PageError(path, "title", problem)
    return title


def _tag(path, fields):
    categories = fields["categories"]
    if (
        not isinstance(categories, list)
        or len(categories) != 2
        or categories[0] != "package"
        or not isinstance(categories[1], str)
    ):
        raise PageError(path, "categories", "expected [package, <tag>]")
    problem = name_problem(categories[1], "a tag name")
    if problem:
        raise PageError(path, "categories", problem)
    return categories[1]


def read_tags_yaml(path):
    """[(tag name, [stack, ...]), ...] from a cache.spack.io _data/tags.yaml, names kept as text."""
    data, _ = read_regular_file(path, limit=MAX_YAML_BYTES)
    try:
        entries = load_yaml(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError, RefusedYaml) as error:
        raise PageError(path, "tags", f"expected a readable YAML list of tags ({one_line(error)})") from error
    if not isinstance(entries, list):
        raise PageError(path, "tags", "expected a YAML list of {name, stacks} entries")
    tags = []
    for number, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        problem = name_problem(name, "a tag name")
        if problem:
            raise PageError(path, f"[{number}].name", problem)
        stacks = entry.get("stacks", [])
        if not isinstance(stacks, list) or not all(isinstance(s, str) and s for s in stacks):
            raise PageError(path, f"[{number}].stacks", "expected a list of stack names")
        for position, stack in enumerate(stacks):
            problem = name_problem(stack, "a stack name")
            if problem:
                raise PageError(path, f"[{number}].stacks[{position}]", problem)
        tags.append((name, stacks))
    return tags


class SpecError(Exception):
    def __init__(self, field_name, expected):
        super().__init__(f"{field_name}: {expected}")
        self.field = field_name
        self.expected = expected


def _text(entry, key, where):
    value = entry[key]
    if type(value) is not str or not value:
        raise SpecError(f"{where}.{key}", "expected non-empty text")
    if not PLAIN_TEXT.fullmatch(value):
        raise SpecError(f"{where}.{key}", text_problem(value))
    return value


def _text_list(entry, key, where):
    values = entry[key]
    if type(values) is not list:
        raise SpecError(f"{where}.{key}", "expected a list of non-empty strings")
    for value in values:
        if type(value) is not str or not value:
            raise SpecError(f"{where}.{key}", "expected a list of non-empty strings")
    if values and not PLAIN_TEXT.fullmatch("".join(values)):  # one look at all of them; which one, if not
        position, problem = next((n, text_problem(v)) for n, v in enumerate(values) if text_problem(v))
        raise SpecError(f"{where}.{key}[{position}]", problem)
    return values


_SPEC_FIELD_SET = frozenset(SPEC_FIELDS)


def page_document(page, configurations):
    """The Document a page gives: every spec_details entry checked; raises PageError."""
    if isinstance(page.specs, QuickJson):
        try:
            document = _page_document(page, configurations)
            if not document.warnings:  # numbers read as floats would show as disagreements with the meta
                return document
        except (PageError, _Inexact):  # said again, or not at all, once read exactly
            pass
        page = exactly(page)
    return _page_document(page, configurations)


def exactly(page):
    """The page with every value read exactly, as the text the document has (1.10 stays 1.10)."""
    if not isinstance(page.specs, QuickJson):
        return page
    return dataclasses.replace(
        page, meta=_json(page.path, "meta", page.meta_text), specs=_json(page.path, "spec_details", page.specs.text)
    )


def _page_document(page, configurations):
    binaries = _known_binaries(page.specs, configurations)
    if binaries is None:
        binaries = _checked_binaries(page, configurations)
    derived = derived_meta(binaries)
    return Document(
        source=page.path,
        tag=page.tag,
        package=page.title,
        binaries=binaries,
        binaries_per_stack=derived["num_specs_by_stack"],
        meta_text=None if _implied(page, derived) else page.meta_text,
        sorted_keys=page.sorted_keys,
        key_order=page.key_order,
        extra=page.extra,
        warnings=meta_disagreements(page.meta, derived),
    )


# A page's hashes, one space between each two: checked with one match, and by the length of the whole, without
# which one hash holding a space between two hashes' worth of characters would pass as two.
_HASHES = re.compile(rf"{HASH.pattern}(?: {HASH.pattern})*")


def _known_binaries(specs, configurations):
    """The Binaries of spec_details, where every spec is as the generator writes it and each hash is its spec's
    alone; None where one is not, and _checked_binaries reads them one by one to say what is wrong with the first.
    A spec's configuration and stacks are checked once per build (Configurations): parse_spec checks those this
    build has not seen before, and the others are looked up as they were. Page after page, almost every spec is one
    of those: read here without a call per spec, the checks that remain (its hash) made once for the whole page."""
    built_of, stacks_of = configurations.built.get, configurations.stacks.get
    binaries = []
    append = binaries.append
    try:
        for number, entry in enumerate(specs):
            variants, versions, stacks = entry["variants"], entry["versions"], entry["stacks"]
            built = sorted_stacks = None
            if type(variants) is list and type(versions) is list and type(stacks) is list:
                built = built_of(_configuration_text(entry, variants, versions))
                sorted_stacks = stacks_of(tuple(stacks))
            extra = {} if len(entry) == len(SPEC_FIELDS) else _usual_extra(entry)
            if built is None or sorted_stacks is None or entry["size"] != "-" or extra is None:
                append(parse_spec(entry, f"spec_details[{number}]", configurations))
            else:
                append(Binary(entry["hash"], built, sorted_stacks, None, extra))
        hashes = [binary.hash for binary in binaries]
        joined = " ".join(hashes)
        if (
            len(joined) == (HASH_LENGTH + 1) * len(hashes) - 1
            and _HASHES.fullmatch(joined)
            and len(set(hashes)) == len(hashes)
        ):
            return binaries
    except (KeyError, TypeError, SpecError):  # a spec that is not a JSON object, or that lacks a field
        pass
    return None


def _checked_binaries(page, configurations):
    """The Binaries of spec_details, each spec checked in turn: raises PageError at the first that cannot be read."""
    binaries, seen = [], {}
    for number, entry in enumerate(page.specs):
        where = f"spec_details[{number}]"
        try:
            binary = parse_spec(entry, where, configurations)
        except SpecError as error:
            raise PageError(page.path, error.field, error.expected) from error
        first = seen.get(binary.hash)
        if first is not None:
            raise PageError(
                page.path,
                f"{where}.hash",
                f"expected each hash once per page: {binary.hash} is also spec_details[{first}]",
            )
        seen[binary.hash] = number
        binaries.append(binary)
    return binaries


def _implied(page, derived):
    """Whether the page's meta is the one its binaries imply, so that export writes it again (meta_text): the same
    facts, and, written the way the generator writes today, the same text."""
    return page.meta == derived and (not page.sorted_keys or page.meta_text == meta_text(derived, sorted_keys=True))


def parse_spec(entry, where, configurations):
    """Check one spec_details entry into a Binary; configurations is the build's records.Configurations."""
    if type(entry) is not dict:
        raise SpecError(where, "expected a JSON object")
    if not _SPEC_FIELD_SET <= entry.keys():
        missing = next(key for key in SPEC_FIELDS if key not in entry)
        raise SpecError(f"{where}.{missing}", "expected this field")
    built = _built(entry, where, configurations)
    spec_hash = entry["hash"]
    if type(spec_hash) is not str or not HASH.fullmatch(spec_hash):
        if type(spec_hash) is not str or not spec_hash:
            raise SpecError(f"{where}.hash", "expected non-empty text")
        raise SpecError(
            f"{where}.hash", f"expected 32 characters of Spack's base32 alphabet (a-z, 2-7), found {spec_hash[:60]!r}"
        )
    stacks, sorted_stacks = entry["stacks"], None
    if type(stacks) is list:
        try:
            sorted_stacks = configurations.stacks.get(tuple(stacks))  # only lists already checked are in it
        except TypeError:  # unhashable values, named by _text_list
            pass
    if sorted_stacks is None:
        stacks = _text_list(entry, "stacks", where)
        for position, stack in enumerate(stacks):  # a stack is a mirror's folder: <tag>/<stack>
            problem = name_problem(stack, "a stack name")
            if problem:
                raise SpecError(f"{where}.stacks[{position}]", problem)
        sorted_stacks = configurations.stacks[tuple(stacks)] = tuple(sorted(set(stacks)))
    size = entry["size"]
    return Binary(
        spec_hash,
        built,
        sorted_stacks,
        None if size == "-" else _size(size, where),
        _spec_extra(entry, where) if len(entry) > len(SPEC_FIELDS) else {},
    )


def _usual_extra(entry):
    """The usual field the format does not document, a tarball URL, beside SPEC_FIELDS (which the caller reads); None
    where a spec has other fields than those."""
    if len(entry) == len(SPEC_FIELDS) + 1:
        tarball = entry.get("tarball")
        if type(tarball) is str and is_storable_text(tarball):
            return {"tarball": tarball}
    return None


def _spec_extra(entry, where):
    """A spec's fields the format does not document (such as tarball), kept as they are."""
    usual = _usual_extra(entry)  # parse_spec checked SPEC_FIELDS
    if usual is not None:
        return usual
    extra = {k: entry[k] for k in entry.keys() - _SPEC_FIELD_SET}
    for key, value in extra.items():
        if type(value) is str and is_storable_text(key + value):  # the usual one (a tarball URL): no walk
            continue
        if _has_float(value):
            raise _Inexact(key)
        problem = nested_value_problem(key) or nested_value_problem(value)
        if problem:
            raise SpecError(f"{where}.{key}" if is_storable_text(key) else where, problem)
    return extra


def _has_float(value):
    pending = [value]
    while pending:
        item = pending.pop()
        if type(item) is float:
            return True
        if type(item) is dict:
            pending.extend(item.values())
        elif type(item) is list:
            pending.extend(item)
    return False


def _configuration_text(entry, variants, versions):
    """A spec's configuration as the page writes it (variants and versions its lists): what Configurations keeps a
    checked configuration by, so it holds every field _check_built reads."""
    return (entry["compiler"], entry["os"], entry["platform"], entry["target"], tuple(variants), tuple(versions))


def _built(entry, where, configurations):
    variants, versions = entry["variants"], entry["versions"]
    if type(variants) is list and type(versions) is list:
        try:
            text = _configuration_text(entry, variants, versions)
            return configurations.built.get(text) or configurations.add(text, lambda: _check_built(entry, where))
        except TypeError:  # unhashable values, named by _check_built
            pass
    return _check_built(entry, where)


def _check_built(entry, where):
    versions = _text_list(entry, "versions", where)
    if len(versions) != 1:
        raise SpecError(f"{where}.versions", f"expected exactly one version, found {len(versions)}")
    compiler = parse_compiler(_text(entry, "compiler", where))
    if compiler is None:
        raise SpecError(f"{where}.compiler", f"expected 'none' or name@version, found {entry['compiler']!r:.80}")
    compiler, compiler_exact = compiler
    raw_variants = _text_list(entry, "variants", where)
    variants = []
    for position, raw in enumerate(raw_variants):
        variant = parse_variant(raw)
        if variant is None:
            raise SpecError(
                f"{where}.variants[{position}]", f"expected +name, ~name, name=value or name:=value, found {raw[:60]!r}"
            )
        variants.append(variant)
    return Built(
        number=None,
        version=sys.intern(versions[0]),
        compiler=compiler,
        compiler_exact=compiler_exact,
        os=sys.intern(_text(entry, "os", where)),
        platform=sys.intern(_text(entry, "platform", where)),
        target=sys.intern(_text(entry, "target", where)),
        variants=tuple(variants),
        raw_variants=interned(raw_variants),
    )


_SIZE_TEXT = re.compile(r"[0-9]{1,19}")
MAX_SIZE = 2**63 - 1  # SQLite's largest integer


def _size(value, where):
    if type(value) is str and _SIZE_TEXT.fullmatch(value):
        value = int(value)
    if type(value) is int and 0 <= value <= MAX_SIZE:
        return value
    raise SpecError(
        f"{where}.size",
        f"expected '-' (unknown) or a whole number of bytes up to {MAX_SIZE}, found {_short(value, 80)}",
    )


def meta_disagreements(declared, derived):
    """[(field, message)] where the page's meta says something its spec_details do not (their derived_meta)."""
    found = []
    for key, expected in derived.items():
        if key not in declared:
            found.append((f"meta.{key}", "missing from meta"))
            continue
        value = declared[key]
        if isinstance(expected, list):
            same = isinstance(value, list) and sorted(map(str, value)) == expected
        elif isinstance(expected, dict):
            same = isinstance(value, dict) and {k: str(v) for k, v in value.items()} == {
                k: str(v) for k, v in expected.items()
            }
        else:
            same = str(value) == str(expected)
        if not same:
            found.append((f"meta.{key}", f"meta says {_short(value)} but spec_details give {_short(expected)}"))
    return found


def _short(value, limit=300):
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."
