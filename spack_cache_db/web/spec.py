"""The spec field of the find question: Datasette's magic parameters :_spec_error and :_spec_nodes, made from
the request's spec by query/spec.py, as `python build_db.py find` makes them for the same SQL."""

import functools

from datasette import hookimpl

from spack_cache_db.query import spec


@functools.lru_cache(maxsize=256)
def _parameters(text):
    return spec.sql_parameters(text)


def magic_parameters(request):
    """{":_spec_... parameter's name": value} of the request's spec."""
    return _parameters(request.args.get("spec", ""))


def _from_request(key, request):
    parameters = magic_parameters(request)
    if f"_spec_{key}" not in parameters:
        raise KeyError(key)
    return parameters[f"_spec_{key}"]


@hookimpl
def register_magic_parameters(datasette):
    return [("spec", _from_request)]
