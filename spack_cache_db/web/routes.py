"""Pages of our own beside Datasette's, for the databases this project built: /<database>/-/dependencies
(a binary's dependency tree, tree.py) and /<database>/-/diff (two specs compared, spec_diff.py), each
also as JSON with .json."""

from datasette import hookimpl

from spack_cache_db.web import spec_diff, tree
from spack_cache_db.web.views import DEPENDENCIES, DIFF


@hookimpl
def register_routes():
    return [
        (rf"^/(?P<database>[^/]+)/-/{DEPENDENCIES}(?P<format>\.json)?$", tree.view),
        (rf"^/(?P<database>[^/]+)/-/{DIFF}(?P<format>\.json)?$", spec_diff.view),
    ]
