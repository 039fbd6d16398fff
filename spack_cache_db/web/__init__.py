"""The Datasette plugin: serves any database this project built with its metadata (metadata.py), its pages
(pages.py: questions with forms, answers that read as text, the package page; templates/ and static/), the
JSON of a capped answer saying so and linking to the rest (questions.py), row counts and facets of the big
views from counts taken at build time (counts.py, facets.py), caps on what one SQL statement may build
(limits.py), bad requests answered with what was wrong (errors.py), pages of our own (routes.py: a binary's
dependency tree, two specs compared) and the spec field's parameters (spec.py).

Each hook lives beside its concern; this module gathers them for Datasette, and at start-up finds which
served databases this project built, reads their searches in their full-text index's order (search.py), offers
sorts only where they answer in time (sorting.py), leaves datasette-render-markdown out of their cells
(pages.py) and keeps what start-up made out of the garbage collector's walks.
"""

import functools
import gc

from datasette import hookimpl

from spack_cache_db.web import counts, errors, metadata, pages, search, sorting
from spack_cache_db.web.errors import handle_exception
from spack_cache_db.web.facets import register_facet_classes
from spack_cache_db.web.limits import prepare_connection
from spack_cache_db.web.metadata import get_metadata
from spack_cache_db.web.pages import extra_css_urls, extra_js_urls, extra_template_vars, render_cell
from spack_cache_db.web.questions import register_output_renderer
from spack_cache_db.web.routes import register_routes
from spack_cache_db.web.spec import register_magic_parameters

__all__ = [
    "extra_css_urls",
    "extra_js_urls",
    "extra_template_vars",
    "filters_from_request",
    "get_metadata",
    "handle_exception",
    "prepare_connection",
    "register_facet_classes",
    "register_routes",
    "register_magic_parameters",
    "register_output_renderer",
    "render_cell",
    "startup",
]


@hookimpl
def filters_from_request(request, database, table, datasette):
    """A table page's arguments checked before its query runs (errors.py), and its sort (sorting.py); then its
    row count and the filters that narrow it (counts.py), and a search by those the full-text index can check
    (search.py)."""
    errors.check_before_the_query(request)
    count_and_narrow = counts.filters_from_request(request, database, table, datasette)

    async def check_sort_then_narrow():
        await sorting.refuse_sorting_too_many_rows(datasette, database, table, request)
        in_index = await search.filters_in_index(request, database, table, datasette)
        return counts.combined(await count_and_narrow(), in_index)

    return check_sort_then_narrow


@hookimpl
def startup(datasette):
    pages.route_our_cells()

    async def serve_our_databases():
        names = [
            name for name, db in datasette.databases.items() if not db.is_memory and await metadata.built_by_us(db)
        ]
        metadata.remember(datasette, names)
        await metadata.note_outdated(datasette, names)
        for name in names:
            db = datasette.databases[name]
            search.lead_with_matches(datasette, db, name)
            sortable = await sorting.columns_sorted_by_an_index(db, functools.partial(datasette.table_metadata, name))
            metadata.limit_sorting(datasette, name, sortable)
            if not db.is_mutable and name not in (datasette.inspect_data or {}):
                await counts.use_stored_row_counts(datasette, name, db)
            if not db.is_mutable:
                counts.answer_counts(datasette, db, name)
        # What start-up made lives as long as the server: kept out of the collector's full collections, which
        # would walk all of it (tens of thousands of objects: 40 ms, the time of a whole page) every few pages.
        gc.collect()
        gc.freeze()

    return serve_our_databases
