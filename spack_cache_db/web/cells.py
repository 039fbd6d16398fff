"""How a cell of our databases reads in a page: lists as lists, install commands as a block to copy, a hash
linking to its lookup, a package to its page, a question's links column (Markdown links) as links. The same
everywhere: tables, views and questions.

A page of the binaries view renders 1,600 cells: each is built as text around escaped values, without
Markup.format's slower escaping of every argument. A question's answer (up to 1,000 rows) is put together
here too, not cell by cell in a template: Jinja's async rendering costs more per cell than the cell.
"""

import functools
import json
import re
from urllib.parse import quote_plus

from datasette.utils import to_css_class
from markupsafe import Markup, escape

from spack_cache_db.normalise import HASH

# Columns that hold a JSON list of names (a question's or a view's); hashes become links.
LIST_COLUMNS = {"stacks", "variants", "tags", "releases", "versions", "hashes"}
# Every column this module may render (name: of the packages table only).
RENDERED = {"package", "name", "hash", "install", "spec", "specs_per_tag", "links", *LIST_COLUMNS}
LINKING = {"package", "name", "hash", "hashes"}  # columns whose cells need the database's address
SHOWN_OF_A_LIST = 8  # items shown before the rest fold away


def cell_html(database_path, table, column, value):
    """The HTML of a cell, or None to leave it to Datasette."""
    if not isinstance(value, str):
        return None
    if column == "package" or (table == "packages" and column == "name"):
        return _package_link(database_path, value)
    if column == "hash" and HASH.match(value):
        return _hash_link(database_path, value)
    if column == "install" and value.startswith("spack "):
        return install_block(value)
    if column == "spec":
        return _spec(value)
    if column in LIST_COLUMNS and value.startswith("["):
        return _list_cell(database_path, column, value)
    if column == "specs_per_tag" and value.startswith("{"):
        return _counts(value)
    if column == "links":
        return _links(value)
    return None


def package_url(database_path, package):
    return f"{database_path}/package?package={quote_plus(package)}"


def hash_url(database_path, spec_hash):
    return f"{database_path}/hash_lookup?hash={spec_hash}"


def _spec(spec):
    """A spec string that may break before each of its variants, not only at its spaces (+ and ~ are
    left as they are by escaping)."""
    breakable = str(escape(spec)).replace("+", "<wbr>+").replace("~", "<wbr>~")
    return Markup(f'<code class="spack-spec">{breakable}</code>')


# A package, or a list of stacks, repeats from row to row and page to page (a few hundred kinds in 1,000 rows):
# each is put together once.
@functools.lru_cache(maxsize=4096)
def _package_link(database_path, package):
    return Markup(
        f'<a class="spack-package" href="{escape(package_url(database_path, package))}">{escape(package)}</a>'
    )


def _hash_link(database_path, spec_hash):
    """A hash (checked: 32 characters of a-z and 2-7, nothing to escape) linking to its lookup."""
    return Markup(
        f'<a class="spack-hash" href="{hash_url(database_path, spec_hash)}" title="Look up {spec_hash}">'
        f"<code>{spec_hash}</code></a>"
    )


def install_block(commands):
    """The install commands folded behind the last one, shortened (a hash's first 7 characters name it to
    Spack as well), with a button that copies them all. The button is in the summary: Datasette closes
    an open details element when a click lands outside it."""
    last = commands.rsplit("\n", 1)[-1]
    spec_hash = last.rsplit("/", 1)[-1]
    short = f"spack install /{spec_hash[:7]}" if HASH.match(spec_hash) else last
    shown = escape(commands)
    return Markup(
        f'<details class="spack-install"><summary><code>{escape(short)}</code>'
        f' <button type="button" class="spack-copy" data-copy="{shown}">Copy</button></summary><pre>{shown}</pre></details>'
    )


# A question's links column: Markdown links to pages of the same database, "[text](address)", the address
# relative (no scheme: a link elsewhere is left as text) and without spaces or characters HTML would need.
_LINK = re.compile(r"\[([^\[\]]+)\]\(([A-Za-z0-9_./?=&%+~-]+)\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _links(value):
    """The links column as HTML: each Markdown link to one of our pages an anchor, all else text."""
    html, start = [], 0
    for link in _LINK.finditer(value):
        text, address = link.groups()
        if _SCHEME.match(address):
            continue
        html += [escape(value[start : link.start()]), f'<a href="{escape(address)}">{escape(text)}</a>']
        start = link.end()
    html.append(escape(value[start:]))
    return Markup("".join(html))


@functools.lru_cache(maxsize=1024)
def _list_cell(database_path, column, value):
    items = _json_list(value)
    return None if items is None else _list(database_path, column, items)


def _json_list(value):
    try:
        items = json.loads(value)
    except ValueError:
        return None
    if isinstance(items, list) and all(isinstance(item, str | int | float) for item in items):
        return [str(item) for item in items]
    return None


def _list(database_path, column, items):
    shown = [
        _hash_link(database_path, item) if column == "hashes" and HASH.match(item) else escape(item) for item in items
    ]
    html = f'<ul class="spack-list">{_items(shown[:SHOWN_OF_A_LIST])}</ul>'
    if len(shown) > SHOWN_OF_A_LIST:
        html += (
            f'<details class="spack-more"><summary>{len(shown) - SHOWN_OF_A_LIST} more</summary>'
            f'<ul class="spack-list">{_items(shown[SHOWN_OF_A_LIST:])}</ul></details>'
        )
    return Markup(html)


def _items(shown):
    return "".join(f"<li>{item}</li>" for item in shown)


def _counts(value):
    """A JSON object of counts ({"develop": 18, ...}) as a list of "name: count"."""
    try:
        counts = json.loads(value)
    except ValueError:
        return None
    if not isinstance(counts, dict):
        return None
    return _list(
        "",
        "counts",
        [f"{name}: {count:,}" if isinstance(count, int) else f"{name}: {count}" for name, count in counts.items()],
    )


def table_rows(columns, shown, rows):
    """The rows of a table as HTML: in each, the cells of the columns shown (Markup as it is, anything else
    escaped), each in its column's class."""
    kept = [(n, f'<td class="col-{to_css_class(column)}">') for n, column in enumerate(columns) if column in shown]
    return Markup("".join("<tr>" + "".join(f"{td}{escape(row[n])}</td>" for n, td in kept) + "</tr>\n" for row in rows))
