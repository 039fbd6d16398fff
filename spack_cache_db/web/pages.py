"""The pages of our databases: templates, what they are given, and the site's stylesheet and script.

The package's templates/ replace Datasette's index.html, database.html and query.html; each extends
Datasette's own ("default:...") for anything that is not ours, so other databases served beside ours
look as Datasette makes them; _table.html is Datasette's, but that a search too broad to sort offers no
sorts (sorting.py). Ours get: on the index and database pages, the questions people ask first and the
internal tables under a heading of their own; on a question's page, a form that offers choices, answers
that read as text and sentences about what was not found; the package page.
"""

from urllib.parse import urlencode

from datasette import hookimpl
from datasette.utils import tilde_decode

from spack_cache_db.query import lookup
from spack_cache_db.web import cells, metadata, package, questions, sorting, views
from spack_cache_db.web.metadata import PLUGIN

# What a question's page shows after its answer, for questions that have a page of their own to go on to.
AFTER_ANSWER = {"dependency_tree": "_spack_tree_link.html", "hash_lookup": "_spack_hash_links.html"}


@hookimpl
def extra_css_urls(template, database, datasette):
    return _static_urls(datasette, template, database, "css")


@hookimpl
def extra_js_urls(template, database, datasette):
    return _static_urls(datasette, template, database, "js")


def _static_urls(datasette, template, database, kind):
    """The site's stylesheet or script (static/), on the pages of our databases and on an index that lists one."""
    ours = metadata.ours(datasette)
    if database in ours or (template == "index.html" and ours):
        return [{"url": datasette.urls.static_plugins(metadata.PLUGIN, f"site.{kind}")}]
    return []


@hookimpl
def render_cell(value, column, table, database, datasette):
    return cell(datasette, database, table, column, value)


# Installed plugins that render no cell of our databases, yet look their settings up for every cell of every
# page: datasette-render-markdown (which datasette-dashboards installs) took half the CPU of a 613-row answer
# to find no Markdown column (runs_on_host for cit in the history from indexes, in process, alternating: 150-185
# ms of CPU a request, 80-120 without).
NOT_ASKED_FOR_OUR_CELLS = ("datasette_render_markdown",)


def route_our_cells():
    """From now on Datasette's render_cell hook asks the plugins above for the cells of other databases only, and
    where no other plugin renders cells, renders ours itself."""
    # Imported here, not with this module: importing datasette.plugins loads the installed plugins, this
    # package among them; were that to happen while this package is being imported (a program that imports
    # it before Datasette), Datasette would register it half made, with none of its hooks.
    from datasette.plugins import pm

    hook = pm.hook.render_cell
    if isinstance(hook, _RenderCell):
        return
    left_out = [plugin for plugin in pm.get_plugins() if getattr(plugin, "__name__", "") in NOT_ASKED_FOR_OUR_CELLS]
    ours = pm.subset_hook_caller("render_cell", remove_plugins=left_out) if left_out else hook
    pm.hook.render_cell = _RenderCell(hook, ours)


class _RenderCell:
    """The render_cell hook: every plugin's for other databases' cells, those that render ours for ours. When
    that is this plugin alone, its cells are rendered here, as pluggy would give them ([what it renders], or []
    for None): pluggy's call took 6 of the 10 µs of each of a page's cells (find_binaries of a package in every
    tag: 13,000 cells, 130 ms of a 233 ms page)."""

    def __init__(self, every, ours):
        self._every, self._ours = every, ours

    def __call__(self, **kwargs):
        if kwargs["database"] not in metadata.ours(kwargs["datasette"]):
            return self._every(**kwargs)
        if not self._ours_alone():
            return self._ours(**kwargs)
        rendered = cell(kwargs["datasette"], kwargs["database"], kwargs["table"], kwargs["column"], kwargs["value"])
        return [] if rendered is None else [rendered]

    def _ours_alone(self):
        """Asked at each call, as pluggy would: a plugin may be registered once the hook is wrapped."""
        implementations = self._ours.get_hookimpls()
        return len(implementations) == 1 and implementations[0].function is render_cell

    def __getattr__(self, name):  # the rest of a hook caller: pluggy adds and removes implementations through it
        return getattr(self._every, name)


def cell(datasette, database, table, column, value):
    if column not in cells.RENDERED:
        return None
    path = metadata.ours(datasette).get(database)
    if path is None:
        return None
    return cells.cell_html(path if column in cells.LINKING else "", table, column, value)


@hookimpl
def extra_template_vars(template, database, table, request, datasette):
    async def our_pages_vars():
        return await template_vars(datasette, template, database, table, request)

    return our_pages_vars


async def template_vars(datasette, template, database, table, request):
    ours = metadata.ours(datasette)
    given = {"spack_ours": ours}
    if template == "table.html" and table:  # its headings sort it, unless it is a search too broad to sort
        given["spack_unsortable_search"] = await sorting.search_too_broad_to_sort(datasette, database, table, request)
    if template == "index.html" and ours:
        given["spack_questions"] = {name: await question_sections(datasette, name) for name in ours}
    elif template == "database.html" and database in ours:
        given["spack_questions"] = {database: await question_sections(datasette, database)}
        tables = datasette.metadata("tables", database=database) or {}
        given["spack_descriptions"] = {name: table.get("description", "") for name, table in tables.items()}
    elif template == "query.html" and database in ours:
        given.update(await _question_vars(datasette, database, request))
    return given


async def question_sections(datasette, database):
    """[{heading, items: [{title, description, url}]}] of the questions setting (canned queries by name, tables,
    pages of our own), and the names of the queries and tables it lists."""
    queries = await datasette.get_canned_queries(database, None)
    sections, listed = [], set()
    for section in (datasette.plugin_config(PLUGIN) or {}).get("questions", []):
        items = []
        for item in section["items"]:
            if isinstance(item, str) and item in queries:
                query = queries[item]
                url = datasette.urls.query(database, item)
                items.append(
                    {"title": query.get("title", item), "description": query.get("description", ""), "url": url}
                )
            elif isinstance(item, dict) and "page" in item:
                url = views.page_url(datasette, database, item["page"])
                items.append({"title": item["title"], "description": item.get("description", ""), "url": url})
                continue
            elif isinstance(item, dict):
                description = datasette.table_metadata(database, item["table"]).get("description", "")
                url = datasette.urls.table(database, item["table"])
                if item.get("columns"):
                    url += "?" + urlencode([("_col", column) for column in item["columns"]])
                items.append({"title": item["title"], "description": description, "url": url})
                item = item["table"]
            listed.add(item)
        sections.append({"heading": section["heading"], "items": items})
    return {"sections": sections, "listed": listed}


async def _question_vars(datasette, database, request):
    name = tilde_decode(request.url_vars.get("table", ""))
    if name not in metadata.query_names():
        return {}
    query = await datasette.get_canned_query(database, name, request.actor)
    if query is None:
        return {}

    going_on = questions.next_page(name, request)

    async def sentences(row_count):
        return await questions.sentences(datasette, database, query, request, row_count, going_on["spack_continued"])

    async def has_more(row_count):
        return await questions.has_more(datasette, database, name, request, row_count)

    given = {
        "spack_layout": "spack_question.html",
        "spack_fields": await questions.form_fields(
            datasette, database, questions.asked_in_the_form(name, query), request
        ),
        "spack_sentences": sentences,
        "spack_blamed_on_schema": lambda error: metadata.blamed_on_schema(datasette, database, error),
        "spack_has_more": has_more,
        **going_on,
        "spack_database_path": datasette.urls.database(database),
        "spack_after_answer": AFTER_ANSWER.get(name),
        "spack_has_dependencies": bool(await questions.rows(datasette, database, lookup.HAS_EDGES)),
        "spack_tree_url": lambda args: views.page_url(datasette, database, views.DEPENDENCIES, args),
        "spack_diff_url": lambda args: views.page_url(datasette, database, views.DIFF, args),
        "spack_table_rows": cells.table_rows,
    }
    if name == "package":
        page = await package.package_page(datasette, database, request)
        page_url = views.question_url(datasette, database, "package", {"package": page.package}) if page else ""

        database_path = given["spack_database_path"]

        def spack_cell(column, value):
            return cells.cell_html(database_path, None, column, value) or value

        given.update(
            {
                "spack_layout": "spack_package.html",
                "spack_package": page,
                "spack_matrix": lambda rows: package.matrix(rows, page_url),
                "spack_page_url": page_url,
                "spack_list_url": views.page_url(datasette, database, views.PACKAGES),
                "spack_cell": spack_cell,
                "spack_binary_rows": lambda columns: package.binary_rows(page, columns, spack_cell),
                "spack_dependency_rows": lambda: package.dependency_rows(page, database_path),
                "spack_absolute_url": datasette.absolute_url(request, datasette.urls.instance()),
            }
        )
    return given
