"""The dependency tree page, /<database>/-/dependencies?hash=HASH (JSON: dependencies.json, the same
arguments): what `spack install /HASH` needs, nested or flat (flat=1: each spec once), without or with
(build=1) the dependencies needed only to build, each marked as in the tag's build cache (tag=, by
default the newest tag that has the binary) or not. The toggles are links: no script is needed.
"""

import functools
from urllib.parse import urlencode

from datasette.utils import path_with_replaced_args
from markupsafe import Markup, escape

from spack_cache_db.query import dependencies
from spack_cache_db.query.lookup import QueryError
from spack_cache_db.web import cells, views

TEMPLATE = "spack_dependencies.html"
FIELDS = {"tag": {"empty": "the newest tag that has the binary"}}  # the form's, beside the questions' fields
QUESTION = "dependency_tree"  # the canned query that lists the same as rows


async def view(datasette, request):
    database = views.our_database(datasette, request)
    hash_text = request.args.get("hash", "").strip()
    tag = request.args.get("tag", "").strip() or None
    build, flat = request.args.get("build") == "1", request.args.get("flat") == "1"
    found, error = None, None
    if hash_text:
        found, error = await views.answer(
            datasette, database, lambda conn: dependencies.dependency_tree(conn, hash_text, tag, build)
        )
    elif request.url_vars.get("format"):
        error = QueryError("hash: expected a hash, or its first 4 or more characters")
    if request.url_vars.get("format"):
        return views.json_response(found, error)
    toggles = {"build": "1" if build else "", "flat": "1" if flat else ""}
    database_path = datasette.urls.database(database)
    context = {
        "tree": found,
        "error": error,
        "build": build,
        "flat": flat,
        "fields": await views.form_fields(datasette, database, request, ["hash", "tag"], FIELDS),
        "hidden": views.hidden_inputs(toggles),
        "toggle_build_url": path_with_replaced_args(request, {"build": None if build else "1"}),
        "toggle_flat_url": path_with_replaced_args(request, {"flat": None if flat else "1"}),
        "json_url": views.page_url(
            datasette, database, views.DEPENDENCIES, {"hash": hash_text, "tag": tag, **toggles}, as_json=True
        ),
        "question_url": datasette.urls.query(database, QUESTION)
        + "?"
        + urlencode({"hash": hash_text, "tag": tag or ""}),
        "tree_url": _tree_urls(datasette, database, {"tag": _tag_shown(found, tag), **toggles}),
        "diff_url": lambda spec_hash: views.page_url(datasette, database, views.DIFF, {"hash": spec_hash}),
        "package_url": lambda package: cells.package_url(database_path, package),
        "hash_url": lambda spec_hash: cells.hash_url(database_path, spec_hash),
        "chips": chips,
        "status_html": lambda status: Markup(_status_html(status)),
        "nested_html": nested_html,
    }
    return await views.render(datasette, request, TEMPLATE, database, views.status_of(error), context)


def _tree_urls(datasette, database, args):
    """The address of a spec's tree with these other arguments, by hash (made once: a tree has many specs)."""
    base = views.page_url(datasette, database, views.DEPENDENCIES, args)
    joined = base + ("&" if "?" in base else "?") + "hash="
    return lambda spec_hash: joined + spec_hash


def _tag_shown(found, asked):
    """The tag the statuses are about: the answer's, else the one asked for."""
    if found is None:
        return asked
    return found.tag.name if found.tag else None


def _status_html(status):
    return f'<span class="spack-status spack-status-{status.replace(" ", "-")}">{status}</span>'


@functools.cache
def _chips_html(deptypes, virtuals, build_only):
    """Deptypes, the virtual packages provided and "only to build" as chips."""
    chips = [
        f'<span class="spack-chip spack-deptype-{escape(deptype)}">{escape(deptype)}</span>' for deptype in deptypes
    ]
    chips += [
        f'<span class="spack-chip spack-virtual" title="provides the virtual package {escape(v)}">{escape(v)}</span>'
        for v in virtuals
    ]
    if build_only:
        chips.append(
            '<span class="spack-chip spack-build-only" title="installing the binary does not need it">only to build</span>'
        )
    return " ".join(chips)


def chips(deptypes, virtuals, build_only=False):
    return Markup(_chips_html(tuple(deptypes), tuple(virtuals), bool(build_only)))


def nested_html(tree, tree_url, package_url):
    """The nested view as an ordered list, one item per line of the tree, indented by depth. Built as text
    around escaped values: the largest trees have tens of thousands of lines."""
    items = []
    for line in tree.lines:
        spec, depth = line.dependency.spec, line.depth
        caret = '<span class="spack-caret">^</span>' if depth else ""
        how = _chips_html(line.deptypes, line.virtuals, bool(depth and line.dependency.build_only))
        if line.repeat:
            arrow = "↑ shown above" if line.repeat == "above" else "↓ shown below"
            items.append(
                f'<li class="spack-repeat" style="--depth: {depth}"><a href="#spec-{spec.hash}">{caret}'
                f'{escape(spec.package)}@{escape(spec.version)}</a> {how} <span class="spack-see">{arrow}</span></li>'
            )
            continue
        items.append(
            f'<li class="spack-node" style="--depth: {depth}" id="spec-{spec.hash}">{_status_html(line.dependency.status)}'
            f' <a class="spack-hash" href="{escape(tree_url(spec.hash))}" title="its own dependencies"><code>{spec.hash[:7]}</code></a>'
            f' {caret}<a class="spack-package" href="{escape(package_url(spec.package))}">{escape(spec.package)}</a>'
            f'<code class="spack-spec">{escape(spec.spec[len(spec.package) :])}</code> {how}</li>'
        )
    return Markup(f'<ol class="spack-tree">{"".join(items)}</ol>')
