"""What our own pages share (tree.py: a binary's dependency tree; spec_diff.py: two specs compared): the
database an address names, asking spack_cache_db.query as the terminal does, and answering as HTML or as
JSON (the same address with .json, the same arguments)."""

from urllib.parse import urlencode

from datasette.utils import tilde_decode
from datasette.utils.asgi import NotFound, Response
from markupsafe import Markup

from spack_cache_db.query.lookup import QueryError
from spack_cache_db.web import metadata, questions

DEPENDENCIES, DIFF, PACKAGES = "dependencies", "diff", "packages"  # the pages' names in their addresses
PAGES = (DEPENDENCIES, DIFF, PACKAGES)


def page_url(datasette, database, page, args=(), as_json=False):
    """The address of one of these pages, with these arguments ([(name, value)] or a dict)."""
    return _with_args(f"{datasette.urls.database(database)}/-/{page}{'.json' if as_json else ''}", args)


def question_url(datasette, database, name, args=()):
    """The address of the canned query called name, asked with these arguments ([(name, value)] or a dict)."""
    return _with_args(datasette.urls.query(database, name), args)


def _with_args(address, args):
    """The address with the arguments that have a value (an empty one asks for nothing)."""
    items = list(args.items()) if isinstance(args, dict) else list(args)
    query = urlencode([(name, value) for name, value in items if value not in (None, "")])
    return address + (f"?{query}" if query else "")


def our_database(datasette, request):
    """The name of the database the address names; 404 unless this project built it."""
    name = tilde_decode(request.url_vars["database"])
    if name not in metadata.ours(datasette):
        raise NotFound(f"No database built by spack-cache-db is called {name!r}.")
    return name


async def answer(datasette, database, question):
    """(question(conn)'s answer, None), or (None, the QueryError that says what was wrong)."""
    try:
        return await datasette.get_database(database).execute_fn(question), None
    except QueryError as error:
        return None, error


def status_of(error):
    return 200 if error is None else 404 if error.not_found else 400


def json_response(found, error):
    if error is not None:
        return Response.json({"error": str(error)}, status=status_of(error))
    return Response.json(found.as_json())


async def form_fields(datasette, database, request, params, fields=None):
    """The fields of a form for these parameters, configured as the questions' fields are."""
    return await questions.form_fields(datasette, database, {"params": params, "fields": fields or {}}, request)


def hidden_inputs(args):
    """Hidden form inputs that keep these arguments ({name: value}) when the form is sent."""
    return Markup("").join(
        Markup('<input type="hidden" name="{}" value="{}">').format(name, value)
        for name, value in args.items()
        if value
    )


async def render(datasette, request, template, database, status, context):
    html = await datasette.render_template(template, {"database": database, **context}, request=request)
    return Response.html(html, status=status)
