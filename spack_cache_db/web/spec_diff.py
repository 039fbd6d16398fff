"""The spec diff page, /<database>/-/diff?hash=A&hash=B (JSON: diff.json, the same arguments): two specs
compared part by part, as `build_db.py diff A B` compares them. With one hash, a form asks for the other.
"""

from spack_cache_db.query import diff
from spack_cache_db.query.lookup import QueryError
from spack_cache_db.web import cells, views
from spack_cache_db.web.tree import chips

TEMPLATE = "spack_diff.html"


async def view(datasette, request):
    database = views.our_database(datasette, request)
    hashes = [value.strip() for value in request.args.getlist("hash") if value.strip()]
    found, error = None, None
    if len(hashes) == 2:
        found, error = await views.answer(datasette, database, lambda conn: diff.spec_diff(conn, *hashes))
    elif len(hashes) > 2 or request.url_vars.get("format"):
        error = QueryError(f"hash: expected two hashes to compare (hash=…&hash=…), found {len(hashes)}")
    if request.url_vars.get("format"):
        return views.json_response(found, error)
    database_path = datasette.urls.database(database)
    context = {
        "diff": found,
        "error": error,
        "hashes": (hashes + ["", ""])[:2],
        "json_url": views.page_url(
            datasette, database, views.DIFF, [("hash", value) for value in hashes], as_json=True
        ),
        "tree_url": lambda spec_hash: views.page_url(datasette, database, views.DEPENDENCIES, {"hash": spec_hash}),
        "package_url": lambda package: cells.package_url(database_path, package),
        "hash_url": lambda spec_hash: cells.hash_url(database_path, spec_hash),
        "chips": chips,
    }
    return await views.render(datasette, request, TEMPLATE, database, views.status_of(error), context)
