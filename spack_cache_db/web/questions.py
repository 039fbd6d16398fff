"""The forms of the questions (canned queries) and what they say back.

A field offers the values the database holds (tags, operating systems, targets, compilers, stacks, host
CPUs), as the fields settings of metadata.base.yml say. After an answer, a value the database does not
hold gets a sentence that says so, with the closest value it does hold; so does an empty answer whose
tag (given, or the default) lacks the package asked for. A capped answer says there may be more rows, and
links to the rows after its last one where the question goes on: under the page's rows, and in its JSON.
"""

import difflib
import fnmatch
import re
import weakref
from dataclasses import dataclass

from datasette import hookimpl
from datasette.renderer import json_renderer
from datasette.utils import path_with_replaced_args
from markupsafe import Markup

from spack_cache_db import normalise
from spack_cache_db.query import canned, find, lookup, spec
from spack_cache_db.web import metadata
from spack_cache_db.web import spec as web_spec

# The values a name is checked against, per parameter: SQL whose first column lists them.
_KNOWN = {
    "package": "SELECT name FROM packages",
    "tag": "SELECT name FROM tags",
    "from_tag": "SELECT name FROM tags",
    "to_tag": "SELECT name FROM tags",
    "os": "SELECT name FROM oss",
    "platform": "SELECT name FROM platforms",
    "target": "SELECT name FROM targets",
    "stack": "SELECT name FROM stacks",
    "host": "SELECT name FROM microarchitectures",
}
# What a value the database does not hold is said to be, per parameter.
_NOT_HERE = {
    "package": "No package here is called “{}”.",
    "tag": "No tag here is called “{}”.",
    "from_tag": "No tag here is called “{}”.",
    "to_tag": "No tag here is called “{}”.",
    "os": "No binary here was built on “{}”.",
    "platform": "No binary here was built for the platform “{}”.",
    "target": "No binary here was built for the target “{}”.",
    "stack": "No stack here is called “{}”.",
    "host": "archspec knows no CPU called “{}”.",
    "compiler": "No binary here was built with “{}”.",
}
DEFAULT_TAG_SQL = "SELECT name FROM default_tag"
_VARIANT_VALUES = (
    "SELECT name, value FROM variants UNION"
    " SELECT variants.name, variant_values.value FROM variant_values JOIN variants ON variants.id = variant_values.variant_id"
)
_TAGS_OF_A_PACKAGE = (
    "SELECT tags.name, pages.num_specs FROM packages JOIN pages ON pages.package_id = packages.id"
    " JOIN tags ON tags.id = pages.tag_id WHERE packages.name = ? ORDER BY tags.sort_order"
)
_VERSIONS_OF_A_PACKAGE = (
    "SELECT version FROM versions JOIN packages ON packages.id = versions.package_id WHERE packages.name = ?"
    " ORDER BY version_rank DESC"
)
TAGS_LISTED = 10  # tags named in a sentence before "and N more"
_GLUED_FLAGS = re.compile(r"^[+~][\w.-]+(?:[+~][\w.-]+)+$")  # +mpi~java, as a spec writes them


@dataclass
class Field:
    name: str
    label: str
    help: str
    value: str
    choices: list  # [(value, group)], or None for a text field
    suggest: bool  # offer the choices while typing instead of in a list
    empty: str  # what an empty field means, shown as the list's first choice

    @property
    def values(self):
        return [value for value, _ in self.choices or []]

    @property
    def groups(self):
        """[(group or None, [value, ...])] in the order of the choices."""
        groups = []
        for value, group in self.choices or []:
            if not groups or groups[-1][0] != group:
                groups.append((group, []))
            groups[-1][1].append(value)
        return groups


async def form_fields(datasette, database, query, request):
    """The fields of a question's form, filled in from the request."""
    configured = (datasette.plugin_config(metadata.PLUGIN) or {}).get("fields", {})
    fields = []
    for name in query.get("params", []):
        config = {**configured.get(name, {}), **query.get("fields", {}).get(name, {})}
        choices = None
        if config.get("choices"):
            choices = [
                (row[0], row[1] if len(row) > 1 else None) for row in await rows(datasette, database, config["choices"])
            ]
        empty = config.get("empty", "any")
        if empty == "default":
            default = await rows(datasette, database, DEFAULT_TAG_SQL)
            empty = f"{default[0][0]} (the default)" if default else "the newest tag"
        fields.append(
            Field(
                name=name,
                label=config.get("label", name),
                help=config.get("help", ""),
                value=request.args.get(name, ""),
                choices=choices,
                suggest=bool(config.get("suggest")),
                empty=empty,
            )
        )
    return fields


_cached = weakref.WeakKeyDictionary()  # Datasette -> {(database, file version, SQL): rows}


async def rows(datasette, database, sql, params=()):
    """The rows of a small query about what the database holds. Without parameters (lists of names) they
    are read once per version of the database file; with them (a list, or a dict of named ones: about one
    package, say) every time, so that what people type does not pile up in memory."""
    db = datasette.get_database(database)
    if params:
        return [
            tuple(row) for row in (await db.execute(sql, params if isinstance(params, dict) else list(params))).rows
        ]
    cache = _cached.setdefault(datasette, {})
    key = (database, db.mtime_ns if db.is_mutable else None, sql)
    if key not in cache:
        cache[key] = [tuple(row) for row in (await db.execute(sql)).rows]
    return cache[key]


async def has_more(datasette, database, name, request, row_count):
    """Whether the canned query called name may have more rows than the row_count its answer gave: as many
    as its row_limit allows for the request's arguments, as Datasette gives them to the query."""
    if row_count == 0:
        return False
    given = {param: request.args.get(param, "") for param in canned.named(name).params}
    most = await most_rows(datasette, database, name, {**web_spec.magic_parameters(request), **given})
    return canned.reaches_its_limit(row_count, most)


def asked_in_the_form(name, query):
    """The canned query called name (Datasette's dict), with the parameters its form asks for: not those that
    go on after a capped answer (next_page), which the page's link sets: a question asked anew starts from
    the start."""
    going_on = canned.named(name).next_page
    return {
        **query,
        "params": [param for param in query.get("params", []) if not going_on or param not in going_on.parameters],
    }


def next_page(name, request):
    """For a question that goes on after its capped answer (next_page): spack_next_page, the link to the rows
    after a row, and spack_continued, the row this answer went on after ("" at the start)."""
    going_on = canned.named(name).next_page
    if going_on is None:
        return {"spack_next_page": None, "spack_continued": ""}
    return {
        "spack_next_page": lambda row: path_with_replaced_args(
            request, {parameter: row[column] for parameter, column in going_on.columns}
        ),
        "spack_continued": _went_on_after(going_on, request),
    }


@hookimpl
def register_output_renderer(datasette):
    """.json as Datasette writes it, and for one of our questions what its page says beside the rows: messages
    (what it says of the values asked, and why nothing was found: a spec that does not parse, a name the
    database does not hold), and for a capped answer truncated (there may be more rows) and next_url (with the
    Link header Datasette gives a table's next page) for a question that goes on after its last row. Every
    other page's JSON is Datasette's own."""
    return {"extension": "json", "render": render_json}


async def render_json(datasette, database, query_name, request, data, args, view_name):
    rows = data.get("rows") or []
    lacking = metadata.blamed_on_schema(datasette, database, data.get("error"))
    if lacking:
        data["messages"] = [lacking]
    if query_name in metadata.query_names() and database in metadata.ours(datasette) and not data.get("error"):
        going_on = next_page(query_name, request)
        query = await datasette.get_canned_query(database, query_name, request.actor)
        said = await sentences(datasette, database, query, request, len(rows), going_on["spack_continued"])
        if said:
            data["messages"] = [sentence.striptags() for sentence in said]
        if await has_more(datasette, database, query_name, request, len(rows)):
            data["truncated"] = True
            if going_on["spack_next_page"]:
                data["next_url"] = datasette.absolute_url(request, going_on["spack_next_page"](rows[-1]))
    return json_renderer(args, data, view_name)


def _went_on_after(going_on, request):
    """The row an answer went on after, as its heading names it: the values of the next_page parameters, but
    for one that only repeats what the question asks of its column (after_stack, when a stack is asked)."""
    given = [
        (request.args.get(parameter, "").strip(), request.args.get(column, "").strip())
        for parameter, column in going_on.columns
    ]
    return ", ".join(value for value, asked in given if value and value != asked)


async def most_rows(datasette, database, name, params):
    """The most rows the canned query called name answers with these parameters, or None if uncapped."""
    return await datasette.get_database(database).execute_fn(
        lambda conn: canned.most_rows(conn, canned.named(name), params)
    )


async def sentences(datasette, database, query, request, row_count, continued):
    """What to tell the person who asked: values the database does not hold, and why nothing was found;
    continued: the row the answer went on after (next_page's spack_continued), after which none may come."""
    said = []
    given = {name: request.args.get(name, "").strip() for name in query.get("params", [])}
    for name, value in given.items():
        if value:
            said.extend(await _unknown(datasette, database, query, request, name, value, given))
    if row_count == 0 and not said:
        said.extend(_none_after(query, continued) or await _why_nothing(datasette, database, query, request, given))
    return said


def _none_after(query, continued):
    """An answer that went on after a row (the link under a full answer) and has no rows: none come after it."""
    if not continued:
        return []
    return [Markup("No {} come after {}.").format(query.get("rows", ["row", "rows"])[1], continued)]


async def _unknown(datasette, database, query, request, name, value, given):
    if name == "spec":
        return await _unknown_in_spec(datasette, database, value)
    if name == "tag" and query.get("tag_patterns") and (set(value) & set("*?[ ")):
        return await _unknown_tag_patterns(datasette, database, value)
    if name in _KNOWN:
        known = [row[0] for row in await rows(datasette, database, _KNOWN[name])]
        # In the case the query compares it in: lowered where its SQL lowers the parameter.
        wanted = value.lower() if re.search(rf"lower\(trim\(coalesce\(:{name}\b", query.get("sql", "")) else value
        if wanted not in known:
            return [_no_such(request, name, value, known)]
    elif name == "compiler":
        return await _unknown_compiler(datasette, database, request, value)
    elif name == "variant":
        return await _unknown_variants(datasette, database, value)
    elif name == "version" and given.get("package"):
        return await _unknown_version(datasette, database, given["package"].lower(), value.lstrip("@"))
    elif name == "hash":
        prefix = value.lower().lstrip("/")
        if len(prefix) < 4:
            return [Markup("Give at least 4 characters of the hash: fewer match too many binaries to tell.")]
    elif name == "q" and _SIGNED_VARIANT.search(value):
        return [_as_a_spec(datasette, database, given, "+mpi and ~mpi both match the word mpi")]
    return []


# A word of a search that a spec would read as a variant's sign: the search's words do not keep it.
_SIGNED_VARIANT = re.compile(r"(?:^|\s)[+~][A-Za-z]")


def _as_a_spec(datasette, database, given, why):
    """That a search matches words, not a spec (why: what it reads otherwise), and the link that asks Find
    binaries for the search's text as a spec, in the same tag."""
    from spack_cache_db.web import views  # which imports this module

    url = views.question_url(datasette, database, "find_binaries", {"spec": given["q"], "tag": given.get("tag", "")})
    return Markup(
        'A search matches words, not a spec: {}. <a href="{}">Find binaries</a> reads “{}” as a spec.'
    ).format(why, url, given["q"])


async def _unknown_in_spec(datasette, database, value):
    """Where a spec does not parse, or which of its names the database does not hold (find's rules)."""
    try:
        parsed = spec.parse(value)
    except spec.SpecError as error:
        return [Markup("The spec does not parse: {}.").format(str(error))]
    known = {
        kind: sorted({row[0] for row in await rows(datasette, database, sql)}) for kind, sql in find.KNOWN_NAMES.items()
    }
    has_edges = bool(await rows(datasette, database, lookup.HAS_EDGES))
    said = [*find.unknown_names(parsed, (), "", known.__getitem__), *find.unanswerable(parsed, has_edges)]
    return [Markup("{}").format(sentence) for sentence in said]


async def _unknown_tag_patterns(datasette, database, value):
    tags = [row[0] for row in await rows(datasette, database, _KNOWN["tag"])]
    return [
        Markup("No tag here matches “{}”.").format(pattern)
        for pattern in value.split()
        if not any(fnmatch.fnmatchcase(tag, pattern) for tag in tags)
    ]


def _no_such(request, name, value, known):
    close = difflib.get_close_matches(value, known, n=3, cutoff=0.6)
    sentence = Markup(_NOT_HERE[name]).format(value)
    if close:
        links = Markup(" or ").join(
            Markup('<a href="{}">{}</a>').format(path_with_replaced_args(request, {name: match}), match)
            for match in close
        )
        sentence += Markup(" Did you mean {}?").format(links)
    return sentence


async def _unknown_compiler(datasette, database, request, value):
    named = normalise.compiler_field_names(value.strip().lstrip("%").replace("@=", "@"))
    compilers = await rows(datasette, database, "SELECT label, name FROM compilers")
    if any(
        label == wanted or name == wanted or label.startswith(wanted + ".")  # as find_binaries' field_compilers
        for label, name in compilers
        for wanted in named
    ):
        return []
    return [_no_such(request, "compiler", value, sorted({label for label, _ in compilers}))]


async def _unknown_variants(datasette, database, value):
    raws = [row[0] for row in await rows(datasette, database, "SELECT raw FROM variants")]
    raw_set = set(raws)
    name_values = set(await rows(datasette, database, _VARIANT_VALUES))
    said = []
    for term in dict.fromkeys(value[:500].split()):
        if _GLUED_FLAGS.match(term):
            apart = " ".join(re.findall(r"[+~][^+~]+", term))
            said.append(Markup("Write the variants apart, separated by spaces: {}.").format(apart))
            continue
        if term[0] in "+~":
            found = term in raw_set
        elif "=" in term:
            name, _, wanted = term.partition("=")
            found = (name.rstrip(":"), wanted) in name_values
        else:
            found = "+" + term in raw_set
        if not found:
            close = difflib.get_close_matches(term if term[0] in "+~" or "=" in term else "+" + term, raws, n=3)
            sentence = Markup("No binary has the variant “{}”.").format(term)
            if close:
                sentence += Markup(" Did you mean {}?").format(
                    Markup(" or ").join(Markup("{}").format(c) for c in close)
                )
            said.append(sentence)
    return said


async def _unknown_version(datasette, database, package, version):
    versions = [row[0] for row in await rows(datasette, database, _VERSIONS_OF_A_PACKAGE, [package])]
    if not versions or any(known == version or known.startswith(version + ".") for known in versions):
        return []
    return [Markup("{} has no version {}: its versions are {}.").format(package, version, ", ".join(versions))]


async def _why_nothing(datasette, database, query, request, given):
    if given.get("hash"):
        prefix = given["hash"].lower().lstrip("/")
        specs, binaries = await datasette.get_database(database).execute_fn(lambda conn: _specs_of(conn, prefix))
        if not binaries:
            return [_no_binary_with_hash(datasette, database, prefix, specs)]
    if given.get("q"):
        said = Markup("No binary has every word of “{}”: search for fewer words.").format(given["q"])
        if "@" in given["q"] and not _SIGNED_VARIANT.search(given["q"]):  # a signed variant has said it
            return [said, _as_a_spec(datasette, database, given, "a word does not span two fields, as name@version")]
        return [said]
    package = given.get("package", "").lower() or _package_of(given.get("spec", ""))
    if package and "tag" in given:
        tags = await rows(datasette, database, _TAGS_OF_A_PACKAGE, [package])
        default = await rows(datasette, database, DEFAULT_TAG_SQL)
        tag = given["tag"] or (default[0][0] if default else "")
        if tags and not any(fnmatch.fnmatchcase(name, pattern) for name, _ in tags for pattern in tag.split()):
            return [_tags_that_have(request, package, tag, not given["tag"], tags)]
    if "from_tag" in given:
        compared = await _not_compared(datasette, database, given)
        if compared:
            return compared
    if package and not await rows(datasette, database, _TAGS_OF_A_PACKAGE, [package]):
        if await rows(datasette, database, "SELECT 1 FROM packages WHERE name = ?", [package]):
            return [Markup("{} has no binaries here: it is {}").format(package, _ONLY_A_DEPENDENCY)]
    if any(given.values()):
        noun = query.get("rows", ["row", "rows"])[1]
        return [Markup("No {} match all of these fields: leave one empty to see more.").format(noun)]
    return []


# Of a spec, or a package's specs, that the database holds only as what binaries depend on.
_ONLY_A_DEPENDENCY = "only a dependency of binaries (an external, or a compiler they were built with)."


def _specs_of(conn, prefix):
    """(the first specs whose hash starts with prefix, how many of them a page lists as a binary)."""
    ids = lookup.hashes_starting(conn, prefix)
    return list(lookup.describe(conn, ids).values()), sum(bool(lookup.appearances(conn, i)) for i in ids)


def _no_binary_with_hash(datasette, database, prefix, specs):
    """Why no binary's hash starts with prefix, of these specs whose hash does (all dependencies only): the one
    such spec is named, with its page."""
    from spack_cache_db.web import views  # which imports this module

    said = Markup("No binary's hash starts with “{}”.").format(prefix)
    if len(specs) != 1:
        return said
    url = views.page_url(datasette, database, views.DEPENDENCIES, {"hash": specs[0].hash})
    return said + Markup(' <a href="{}">{} /{}</a> is {}').format(
        url, specs[0].spec, specs[0].hash[:7], _ONLY_A_DEPENDENCY
    )


async def _not_compared(datasette, database, given):
    """Why a comparison of two tags has no rows when it is for want of two tags to compare."""
    to_tag = given.get("to_tag") or next(iter(await rows(datasette, database, DEFAULT_TAG_SQL)), [""])[0]
    if given["from_tag"] == to_tag:
        return [Markup("“{}” is compared with itself: choose another tag to compare it with.").format(to_tag)]
    before = await rows(datasette, database, "SELECT before FROM tag_before WHERE name = ?", [to_tag])
    if not given["from_tag"] and before and before[0][0] is None:
        return [
            Markup("No tag here comes before “{}” of its kind: choose a From tag to compare it with.").format(to_tag)
        ]
    return []


def _package_of(text):
    try:
        return spec.parse(text).root.name
    except spec.SpecError:
        return ""


def _tags_that_have(request, package, tag, is_default, tags):
    links = Markup(", ").join(
        Markup('<a href="{}">{}</a> ({:,})').format(path_with_replaced_args(request, {"tag": name}), name, count)
        for name, count in tags[:TAGS_LISTED]
    )
    more = Markup(" and {} more").format(len(tags) - TAGS_LISTED) if len(tags) > TAGS_LISTED else ""
    which = Markup("{}, the default tag,").format(tag) if is_default else Markup("{}").format(tag)
    return Markup("{} has no binaries of {}. The tags that have them: {}{}.").format(which, package, links, more)
