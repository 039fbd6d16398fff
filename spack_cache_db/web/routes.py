"""Pages of our own beside Datasette's, for the databases this project built: /<database>/-/dependencies
(a binary's dependency tree, tree.py), /<database>/-/diff (two specs compared, spec_diff.py) and
/<database>/-/packages (the package list with counts, package_list.py), each also as JSON with .json. Any
other /<database>/-/ address is no page of ours (Datasette would read it as a table called -)."""

from datasette import hookimpl
from datasette.utils.asgi import NotFound

from spack_cache_db.web import package_list, spec_diff, tree
from spack_cache_db.web.views import DEPENDENCIES, DIFF, PACKAGES, our_database

VIEWS = {DEPENDENCIES: tree.view, DIFF: spec_diff.view, PACKAGES: package_list.view}


@hookimpl
def register_routes():
    return [
        *((rf"^/(?P<database>[^/]+)/-/{page}(?P<format>\.json)?$", view) for page, view in VIEWS.items()),
        (r"^/(?P<database>[^/]+)/-/(?P<page>.*)$", no_such_page),
    ]


async def no_such_page(datasette, request):
    our_database(datasette, request)
    pages = ", ".join(f"/-/{page}" for page in VIEWS)
    raise NotFound(f"No page /-/{request.url_vars['page']} here: the pages are {pages}, each also as .json.")
