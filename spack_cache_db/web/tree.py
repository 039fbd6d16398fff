"""The dependency tree page, /<database>/-/dependencies?hash=HASH (JSON: dependencies.json, the same
arguments): what `spack install /HASH` needs, nested or flat (flat=1: each spec once), without or with
(build=1) the dependencies needed only to build, each marked as in the tag's build cache (tag=, by
default the newest tag that has the binary) or not. The toggles are links: no script is needed.
"""

from urllib.parse import urlencode

from datasette.utils import path_with_replaced_args

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
        "tree_url": lambda spec_hash: views.page_url(
            datasette, database, views.DEPENDENCIES, {"hash": spec_hash, "tag": _tag_shown(found, tag), **toggles}
        ),
        "diff_url": lambda spec_hash: views.page_url(datasette, database, views.DIFF, {"hash": spec_hash}),
        "package_url": lambda package: cells.package_url(database_path, package),
        "hash_url": lambda spec_hash: cells.hash_url(database_path, spec_hash),
    }
    return await views.render(datasette, request, TEMPLATE, database, views.status_of(error), context)


def _tag_shown(found, asked):
    """The tag the statuses are about: the answer's, else the one asked for."""
    if found is None:
        return asked
    return found.tag.name if found.tag else None
