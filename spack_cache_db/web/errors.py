"""Requests that Datasette 0.65 fails with a 500 although the fault is in the request: say what was wrong.

Mostly once Datasette has raised: the request is then checked against what Datasette expects of its
arguments; a fault found gives a 400 (405 for a POST to a question) naming the argument and what it should
be, and so does any DatasetteError, which Datasette raises about the request. Anything else stays
Datasette's 500, since then the fault is not the request's. Datasette's own handler, which prints the
traceback of what it handles to the server's log, is left out for the requests answered here: a bad
request is the client's business, not the log's.

A table page's arguments that no page can take are refused before its query runs (check_before_the_query),
so that nothing of them reaches SQLite or its error log: NUL characters, a _timelimit that is no number, a
list filter that is no list of values, and a _next past SQLite's integers (which would fail inside SQLite, or
answer an empty page as though there were one).
"""

import json
import re
import urllib.parse

from datasette import hookimpl
from datasette.database import QueryInterrupted
from datasette.utils import await_me_maybe, tilde_decode
from datasette.utils.asgi import BadRequest, Response
from datasette.views.base import DatasetteError

from spack_cache_db.records import one_line
from spack_cache_db.web import metadata

# The filters that take a list: a JSON list or values separated by commas.
_LIST_FILTERS = ("__in", "__notin")
_INTEGER = re.compile(r"-?[0-9]+")
_SQLITE_INTEGERS = range(-(2**63), 2**63)


class BadArgument(BadRequest):
    """A request argument found wrong before Datasette used it: its message says which and why."""


@hookimpl(hookwrapper=True)
def handle_exception(datasette, request, exception):
    """Around every plugin's handle_exception (Datasette's own is one): a request at fault is answered here
    alone; any other exception goes to them all, as Datasette would send it."""
    outcome = yield
    theirs = outcome.get_result()

    async def ours_or_theirs():
        response = await response_for(datasette, request, exception)
        if response is not None:
            return response
        answers = [await await_me_maybe(answer) for answer in theirs]
        return next((answer for answer in answers if answer is not None), None)

    outcome.force_result([ours_or_theirs])


def check_before_the_query(request):
    """Raise BadArgument for arguments that no table page can take."""
    faults = [*_faults_in_any_request(request), *_faults_in_table_arguments(request)]
    if faults:
        raise BadArgument("; ".join(faults))


async def response_for(datasette, request, exception):
    """The response that says what was wrong with the request, or None when the request is not at fault."""
    # A POST to a question is at fault whatever it ran into (under load, Datasette's handling of it can
    # run past the time limit first).
    route = request.url_vars or {}
    database, name = _database(datasette, route), route.get("table")
    if request.method == "POST" and database and name and await _is_read_only_query(datasette, database, name):
        return await _error(
            datasette,
            request,
            405,
            "Method not allowed",
            f"{name} is a question: it writes nothing, so it takes GET (its form or a link), not POST.",
            headers={"Allow": "GET"},
        )
    if isinstance(exception, BadArgument):
        return await _error(datasette, request, 400, "Bad request", exception.args[0])
    if isinstance(exception, QueryInterrupted):
        limit = datasette.setting("sql_time_limit_ms")
        return await _error(
            datasette,
            request,
            400,
            "SQL query took too long",
            f"{request.path} ran past the time limit of {limit:,} ms: ask for fewer rows (filter the page, or"
            " add _size) and try again.",
        )
    faults = list(_faults_in_any_request(request))
    if database and name and not faults:
        faults = await _faults_in_a_table_request(datasette, database, tilde_decode(name), request)
    if not faults and _is_about_the_request(exception):
        faults = [one_line(exception.message)]
    if faults:
        return await _error(datasette, request, 400, "Bad request", "; ".join(faults))
    lacking = metadata.blamed_on_schema(datasette, database.name, exception) if database else None
    if lacking:  # not the request's fault, nor ours
        return await _error(datasette, request, 503, "Database out of date", lacking)
    return None


def _is_about_the_request(exception):
    """A DatasetteError that Datasette gives a 500 is about the request all the same: it raises them for
    arguments it cannot use (_sort with _sort_desc, a column it cannot sort by, a _through it cannot follow);
    what fails in Datasette itself raises other exceptions."""
    return isinstance(exception, DatasetteError) and exception.status == 500 and not exception.message_is_html


def _database(datasette, route):
    try:
        return datasette.get_database(route=tilde_decode(route["database"])) if "database" in route else None
    except KeyError:
        return None


async def _is_read_only_query(datasette, database, name):
    query = await datasette.get_canned_query(database.name, tilde_decode(name), None)
    return query is not None and not query.get("write")


def _pairs(request):
    return urllib.parse.parse_qsl(request.query_string, keep_blank_values=True)


def _faults_in_any_request(request):
    for key, value in _pairs(request):
        if "\x00" in key or "\x00" in value:
            yield f"{_named(key)}: contains a NUL character (%00), which no name or value here can hold"
        elif key == "_timelimit" and not value.isdigit():
            yield f"_timelimit: expected a number of milliseconds, not {_shown(value)}"


def _faults_in_table_arguments(request):
    """Arguments no table page can take (NUL characters aside: _faults_in_any_request names them)."""
    for key, value in _pairs(request):
        if "\x00" in key + value:
            continue
        if key.endswith(_LIST_FILTERS) and not _is_a_list(value):
            yield f'{key}: expected a JSON list of values such as ["a", "b"], or values separated by commas'
        elif key == "_next" and any(_INTEGER.fullmatch(p) and int(p) not in _SQLITE_INTEGERS for p in value.split(",")):
            yield (
                "_next: expected the place to go on from, as the page's next link gives it, within SQLite's"
                f" integers (-2**63 to 2**63 - 1), not {_shown(value)}"
            )


async def _faults_in_a_table_request(datasette, database, table, request):
    if not (await database.table_exists(table) or table in await database.view_names()):
        return []
    columns = await database.table_columns(table)
    is_view = table in await database.view_names()
    faults = list(_faults_in_table_arguments(request))
    if "_sort" in request.args and "_sort_desc" in request.args:
        faults.append("_sort and _sort_desc: expected one of them, not both (a page is sorted by one column)")
    for key, value in _pairs(request):
        if key in ("_sort", "_sort_desc") or key.startswith("_facet") and key != "_facet_size":
            if value not in columns:
                faults.append(f"{key}: {table} has no column {_shown(value)}; its columns are {', '.join(columns)}")
            elif key in ("_sort", "_sort_desc"):
                sortable = datasette.table_metadata(database.name, table).get("sortable_columns", columns)
                if value not in sortable:  # sorting.py left it out
                    faults.append(
                        f"{key}: {table} is too big to sort by {_shown(value)} in time (no index gives that order);"
                        f" it can be sorted by {', '.join(sortable)}"
                    )
        elif key == "_next" and is_view and not value.isdigit():
            faults.append(
                f"_next: expected the number of rows to skip, as the page's next link gives it, not {_shown(value)}"
            )
        elif key == "_through" and not await _is_a_through(database, value):
            faults.append(
                '_through: expected JSON such as {"table": "...", "column": "...", "value": "..."} naming a table of'
                f" {database.name}"
            )
    return faults


def _is_a_list(value):
    if not value.startswith("["):
        return True
    try:
        values = json.loads(value)
    except ValueError:
        return False
    return isinstance(values, list) and all(isinstance(item, str | int | float) for item in values)


async def _is_a_through(database, value):
    try:
        through = json.loads(value)
    except ValueError:
        return False
    return (
        isinstance(through, dict)
        and all(isinstance(through.get(key), str) for key in ("table", "column", "value"))
        and await database.table_exists(through["table"])
    )


def _named(key):
    return key if key.isprintable() else _shown(key)


def _shown(text, limit=60):
    """Text quoted for a message, control characters escaped and long text cut."""
    shown = json.dumps(text[:limit], ensure_ascii=False)
    return shown if len(text) <= limit else shown[:-1] + '…"'


async def _error(datasette, request, status, title, message, headers=None):
    info = {"ok": False, "error": message, "status": status, "title": title}
    if request.path.endswith(".json"):
        return Response.json(info, status=status, headers=headers)
    html = await datasette.render_template("error.html", info, request=request)
    return Response.html(html, status=status, headers=headers)
