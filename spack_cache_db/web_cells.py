"""How a cell of our databases reads in a page: lists as lists, install commands as a block to copy, a hash
linking to its lookup and a package to its page. The same everywhere: tables, views and questions."""

import json
from urllib.parse import urlencode

from markupsafe import Markup, escape

from spack_cache_db.normalise import HASH

# Columns that hold a JSON list of names (a question's or a view's); hashes become links.
LIST_COLUMNS = {"stacks", "variants", "tags", "releases", "versions", "hashes"}
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
        items = _json_list(value)
        if items is not None:
            return _list(database_path, column, items)
    if column == "specs_per_tag" and value.startswith("{"):
        return _counts(value)
    return None


def _spec(spec):
    """A spec string that may break before each of its variants, not only at its spaces."""
    breakable = Markup("<wbr>+").join(
        Markup("<wbr>~").join(escape(part) for part in piece.split("~")) for piece in spec.split("+")
    )
    return Markup('<code class="spack-spec">{}</code>').format(breakable)


def package_url(database_path, package):
    return f"{database_path}/package?" + urlencode({"package": package})


def hash_url(database_path, spec_hash):
    return f"{database_path}/hash_lookup?" + urlencode({"hash": spec_hash})


def _package_link(database_path, package):
    return Markup('<a class="spack-package" href="{}">{}</a>').format(package_url(database_path, package), package)


def _hash_link(database_path, spec_hash):
    return Markup('<a class="spack-hash" href="{}" title="Look up {}"><code>{}</code></a>').format(
        hash_url(database_path, spec_hash), spec_hash, spec_hash
    )


def install_block(commands):
    """The install commands folded behind the last one, shortened (a hash's first 7 characters name it to
    Spack as well), with a button that copies them all. The button is in the summary: Datasette closes
    an open details element when a click lands outside it."""
    last = commands.rsplit("\n", 1)[-1]
    spec_hash = last.rsplit("/", 1)[-1]
    short = f"spack install /{spec_hash[:7]}" if HASH.match(spec_hash) else last
    return Markup(
        '<details class="spack-install"><summary><code>{}</code>'
        ' <button type="button" class="spack-copy" data-copy="{}">Copy</button></summary><pre>{}</pre></details>'
    ).format(short, commands, commands)


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
    html = Markup('<ul class="spack-list">{}</ul>').format(
        Markup("").join(Markup("<li>{}</li>").format(item) for item in shown[:SHOWN_OF_A_LIST])
    )
    if len(shown) > SHOWN_OF_A_LIST:
        rest = Markup("").join(Markup("<li>{}</li>").format(item) for item in shown[SHOWN_OF_A_LIST:])
        html += Markup(
            '<details class="spack-more"><summary>{} more</summary><ul class="spack-list">{}</ul></details>'
        ).format(len(shown) - SHOWN_OF_A_LIST, rest)
    return html


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
