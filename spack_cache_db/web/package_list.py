"""The package list page, /<database>/-/packages (JSON: packages.json, the same arguments): every package
with its binaries in a tag (tag=, by default the default tag of the questions) and over all tags, sortable
(sort=in_tag, binaries or tags), filtered by any part of a name (name=); apart, the packages that are only
dependencies of binaries."""

from datasette.utils import path_with_replaced_args

from spack_cache_db.query import packages
from spack_cache_db.web import cells, questions, views

TEMPLATE = "spack_packages.html"
FIELDS = {"name": {"label": "Name", "help": "any part of a package name: hdf, numpy"}}


async def view(datasette, request):
    database = views.our_database(datasette, request)
    tag = request.args.get("tag", "").strip()
    if not tag:
        default = await questions.rows(datasette, database, questions.DEFAULT_TAG_SQL)
        tag = default[0][0] if default else None
    name, sort = request.args.get("name", ""), request.args.get("sort", "name")
    found, error = await views.answer(datasette, database, lambda conn: packages.package_list(conn, tag, name, sort))
    if request.url_vars.get("format"):
        return views.json_response(found, error)
    database_path = datasette.urls.database(database)
    context = {
        "found": found,
        "error": error,
        "sort": sort if sort in packages.SORTS else "name",
        "fields": await views.form_fields(datasette, database, request, ["name", "tag"], FIELDS),
        "hidden": views.hidden_inputs({"sort": request.args.get("sort", "")}),
        "sort_url": lambda by: path_with_replaced_args(request, {"sort": None if by == "name" else by}),
        "json_url": path_with_replaced_args(request, {}, path=request.path + ".json"),
        "package_url": lambda package: cells.package_url(database_path, package),
        "dependents_url": lambda package: views.question_url(
            datasette, database, "dependents", {"package": package, "tag": tag}
        ),
    }
    return await views.render(datasette, request, TEMPLATE, database, views.status_of(error), context)
