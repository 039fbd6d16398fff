"""Pages of our own beside Datasette's, for the databases this project built: /<database>/-/dependencies
(a binary's dependency tree, tree.py), /<database>/-/diff (two specs compared, spec_diff.py) and
/<database>/-/packages (the package list with counts, package_list.py), each also as JSON with .json."""

from datasette import hookimpl

from spack_cache_db.web import package_list, spec_diff, tree
from spack_cache_db.web.views import DEPENDENCIES, DIFF, PACKAGES


@hookimpl
def register_routes():
    return [
        (rf"^/(?P<database>[^/]+)/-/{DEPENDENCIES}(?P<format>\.json)?$", tree.view),
        (rf"^/(?P<database>[^/]+)/-/{DIFF}(?P<format>\.json)?$", spec_diff.view),
        (rf"^/(?P<database>[^/]+)/-/{PACKAGES}(?P<format>\.json)?$", package_list.view),
    ]
