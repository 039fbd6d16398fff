"""The command line: build (the default), export, check and metadata; questions asked of a built database
(find, deps, dependents, diff: spack_cache_db.query answers them, as it does on the web)."""

import csv
import json
import os
import signal
import sqlite3
import sys
import time
from importlib import resources
from pathlib import Path

import click
from click_default_group import DefaultGroup

from spack_cache_db.build import BuildError, Interrupted
from spack_cache_db.build import build as build_database
from spack_cache_db.db import check as check_module
from spack_cache_db.db import export as export_module
from spack_cache_db.query import dependencies, lookup
from spack_cache_db.query import diff as diff_module
from spack_cache_db.query import find as find_module
from spack_cache_db.query import spec as spec_module
from spack_cache_db.read import inputs
from spack_cache_db.records import InputError, printable

BUNDLED_SEEDS = Path(str(resources.files(__package__) / "seeds"))


def _default_inputs():
    try:
        return (str(BUNDLED_SEEDS.relative_to(Path.cwd())),)
    except ValueError:
        return (str(BUNDLED_SEEDS),)


@click.group(cls=DefaultGroup, default="build", default_if_no_args=True)
@click.version_option(package_name="spack-cache-db")
def cli():
    """Spack's binary build cache (cache.spack.io pages, build-cache indexes) as one SQLite database."""


def _existing_or_remote(context, parameter, paths):
    """Paths must exist; URLs and TAG=LOCATION are read later."""
    for path in paths:
        if not (inputs.is_remote(path) or Path(path).exists()):
            raise click.BadParameter(f"{path!r} does not exist (and is not a URL or TAG=LOCATION).")
    return paths


@cli.command()
@click.argument("paths", nargs=-1, callback=_existing_or_remote)
@click.option(
    "-o", "--output", default="cache.db", show_default=True, type=click.Path(dir_okay=False), help="Database to write."
)
@click.option(
    "--keep-going",
    is_flag=True,
    help="Record inputs that cannot be read (pages, indexes) in 'problems' and build the rest.",
)
@click.option(
    "--strict", is_flag=True, help="Fail on warnings too (meta that disagrees with spec_details, skipped pages)."
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="PATTERN",
    help="Read only tags matching this shell-style pattern (repeatable: develop, 'v2025.*').",
)
@click.option("--overwrite", is_flag=True, help="Replace OUTPUT even if spack-cache-db did not build it.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def build(paths, output, keep_going, strict, tags, overwrite, quiet):
    """Build OUTPUT from PATHS: cache pages (files, folders, a cache.spack.io checkout) and build-cache
    indexes (a cache_spack_io_index.json file or URL, a mirror folder or URL, or TAG=LOCATION).

    With no PATHS, builds from the bundled seeds. When a tag comes from pages and from an index, the index
    wins. When OUTPUT exists, only what changed is read again. The new database replaces OUTPUT in one
    atomic rename: a failed or interrupted build leaves the previous OUTPUT exactly as it was.
    """
    paths = paths or _default_inputs()
    signal.signal(signal.SIGTERM, _interrupt)
    show_progress = not quiet and sys.stderr.isatty()
    try:
        with _progress(show_progress) as progress:
            summary = build_database(
                paths, output, keep_going=keep_going, strict=strict, tags=tags, overwrite=overwrite, progress=progress
            )
    except (InputError, BuildError) as error:
        click.echo(f"Error: {printable(str(error))}", err=True)
        click.echo(_left_as_it_was(output), err=True)
        sys.exit(1)
    except Interrupted as interrupted:
        replaced = f"{printable(output)} is the new database: it was in place when the build was interrupted."
        click.echo(f"Interrupted: {replaced if interrupted.replaced else _left_as_it_was(output)}", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo(f"Interrupted: {_left_as_it_was(output)}", err=True)
        sys.exit(130)
    if not quiet:
        click.echo(format_summary(summary))


def _left_as_it_was(output):
    """What a build that stopped did to its output: nothing, whether or not there was one."""
    if os.path.lexists(output):
        return f"{printable(output)} was left as it was."
    return f"{printable(output)} was not created."


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class _progress:
    """Progress bars shown on a terminal only: pages, with pages and specs per second; then indexes, with the
    bytes downloaded and the tag being read."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.bar = None
        self.pages = self.specs = self.bytes = 0
        self.started = time.monotonic()

    def __enter__(self):
        return self if self.enabled else None

    def start(self, total):
        self.pages = self.specs = 0  # a build that plans again reads again from the first page
        self._open("Reading pages", total, self._rates)

    def advance(self, pages, specs):
        self.pages += pages
        self.specs += specs
        self.bar.update(pages, self.pages)

    def start_indexes(self, total):
        self._open("Reading indexes", total, self._downloads)

    # click draws the bar again only once a step is made: what changes within a step is drawn here.
    def downloaded(self, size):
        self.bytes += size
        self.bar.render_progress()

    def index_started(self, source):
        self.bar.current_item = source
        self.bar.render_progress()

    def index_read(self):
        self.bar.update(1)

    def _open(self, label, total, show):
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
        self.started = time.monotonic()
        self.bar = click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True, item_show_func=show)
        self.bar.__enter__()

    def _rates(self, _):
        elapsed = max(time.monotonic() - self.started, 1e-6)
        return f"{self.specs:,} specs, {self.pages / elapsed:,.0f} pages/s, {self.specs / elapsed:,.0f} specs/s"

    def _downloads(self, source):
        read = f"{self.bytes / 1e6:,.1f} MB downloaded"
        return f"{read}, {source.tag} {source.label}" if source else read

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)


def format_summary(summary):
    counts = summary.counts
    if summary.up_to_date:
        head = f"{summary.output} is up to date ({summary.pages_unchanged} pages unchanged) [{summary.seconds:.2f} s]"
    else:
        head = f"Built {summary.output} in {summary.seconds:.2f} s" + (" (incremental)" if summary.incremental else "")
    errors = len(summary.rejected)
    lines = [
        head,
        f"  pages     {counts['pages']:>9,}  ({summary.pages_read} read, {summary.pages_unchanged} unchanged, "
        f"{summary.pages_removed} removed, {errors} rejected)",
        f"  specs     {counts['specs']:>9,}  distinct hashes; {counts['binaries']:,} binaries (spec x tag)",
        f"  tags      {counts['tags']:>9,}",
        f"  packages  {counts['packages']:>9,}",
        f"  problems  {counts['problems']:>9,}  (see the problems table)",
    ]
    lines.extend(_index_lines(summary))
    if summary.old_layout:
        lines.append(f"  warning: skipped {summary.old_layout} page(s) of the old per-package layout")
    for error in summary.rejected[:5]:
        lines.append(f"  rejected: {error}")
    if errors > 5:
        lines.append(f"  ... and {errors - 5} more rejected page(s)")
    for path, field_name, message in summary.warnings[:5]:
        lines.append(printable(f"  warning: {path}: {field_name}: {message}"))
    if len(summary.warnings) > 5:
        lines.append(f"  ... and {len(summary.warnings) - 5} more warning(s)")
    return "\n".join(lines)


def _index_lines(summary):
    failed = len(summary.index_failures)
    lines = []
    if summary.index_tags_read or summary.index_tags_unchanged or failed:
        lines.append(
            f"  indexes   {summary.indexes_read:>9,}  read for {len(summary.index_tags_read)} tag(s); "
            f"{summary.index_tags_unchanged} tag(s) unchanged, {failed} failed"
        )
    skipped = summary.skipped_pages
    if skipped:
        tags = ", ".join(sorted(skipped)[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
        lines.append(
            f"  note: {sum(skipped.values()):,} page(s) of {tags} not read: an index gives the tag, or --tag leaves it out"
        )
    lines.extend(f"  failed: {error}" for error in summary.index_failures[:5])
    if failed > 5:
        lines.append(f"  ... and {failed - 5} more failed index(es)")
    return lines


@cli.command()
@click.argument("spec", nargs=-1, required=True)
@click.option("--db", "database", default="cache.db", show_default=True, type=click.Path(), help="Database to ask.")
@click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="PATTERN",
    help="Search only tags matching this shell-style pattern (repeatable: develop, 'v2025.*'); without it, every tag.",
)
@click.option("--host", default="", metavar="CPU", help="Keep binaries that run on this CPU (zen3, neoverse_v2, m1).")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
    help="A table as `spack buildcache list -L -v` shows (hash, spec, tag, stacks), or every column.",
)
def find(spec, database, tags, host, output_format):
    """Binaries matching SPEC, written as `spack buildcache list` takes it (hdf5@1.14: +mpi %gcc@13
    ^mpich@4), with the answer the web's find question gives: the same SQL, at most 1,000 binaries of a
    package and 100 without one.

    Exit status: 0 when something matched; 1 when nothing did (saying which names the database does not
    hold, and the closest it does); 2 when SPEC does not parse or DATABASE cannot be read.
    """
    text, host = " ".join(spec), host.strip().lower()
    try:
        parsed = spec_module.parse(text)
        conn = find_module.open_database(database)
    except (spec_module.SpecError, find_module.FindError) as error:
        click.echo(f"Error: {printable(str(error))}", err=True)
        sys.exit(2)
    try:
        found = find_module.find(conn, text, tags, host)
        unknown = (
            []
            if found.rows
            else [
                *find_module.unknown_names(parsed, tags, host, find_module.known_in(conn)),
                *find_module.unanswerable(parsed, conn.execute(lookup.HAS_EDGES).fetchone() is not None),
            ]
        )
    except KeyboardInterrupt:
        sys.exit(130)
    except sqlite3.DatabaseError as error:
        click.echo(f"Error: {printable(f'{database}: {error}')}", err=True)
        sys.exit(2)
    _write_found(found, output_format)
    if not found.rows:
        click.echo("\n".join([f"No binary matches {text!r}.", *(printable(str(line)) for line in unknown)]), err=True)
        sys.exit(1)
    _say_if_limited(found, "narrow the spec or --tag for the rest")


def _say_if_limited(answer, what_then, after=None):
    if answer.limited:
        starting = f" after {after}" if after else ""
        click.echo(f"These are the first {len(answer.rows):,} binaries{starting}: {what_then}.", err=True)


TABLE_HEADER = ("hash", "spec", "tag", "stacks")


def _write_found(found, output_format):
    if output_format == "json":
        click.echo(json.dumps(found.rows, indent=2, ensure_ascii=False))
    elif output_format == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(found.columns)
        writer.writerows([_csv_cell(row[column]) for column in found.columns] for row in found.rows)
    elif found.rows:
        _write_table(
            [TABLE_HEADER, *((row["hash"], row["spec"], row["tag"], ", ".join(row["stacks"])) for row in found.rows)]
        )


def _write_table(lines):
    """Columns aligned, two spaces apart; the last one as it is."""
    widths = [max(len(line[column]) for line in lines) for column in range(len(lines[0]) - 1)]
    for line in lines:
        click.echo("  ".join([*(cell.ljust(width) for cell, width in zip(line, widths, strict=False)), line[-1]]))


def _csv_cell(value):
    """Lists as the JSON text the database and the web's CSV have."""
    return json.dumps(value) if isinstance(value, list) else value


@cli.command()
@click.argument("database", type=click.Path(exists=True, dir_okay=False))
@click.argument("outdir", type=click.Path(file_okay=False))
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def export(database, outdir, quiet):
    """Write OUTDIR/_cache/<tag>/<package>/specs.md for every page in DATABASE."""
    try:
        written = export_module.export(database, outdir)
    except (export_module.ExportError, InputError) as error:
        click.echo(f"Error: {printable(str(error))}", err=True)
        sys.exit(1)
    if not quiet:
        click.echo(f"Wrote {written} page(s) under {Path(outdir) / '_cache'}")


@cli.command()
@click.argument("database", type=click.Path(exists=True, dir_okay=False))
def check(database):
    """Check DATABASE: integrity, foreign keys, schema version and recorded problems. Exit 1 if anything is wrong."""
    report = check_module.check(database)
    for line in report.lines:
        click.echo(line)
    sys.exit(0 if report.ok else 1)


@cli.command()
@click.option(
    "-o", "--output", default="metadata.yml", show_default=True, type=click.Path(dir_okay=False), help="File to write."
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 when OUTPUT is not what the package's metadata and queries make.",
)
def metadata(output, check):
    """Write Datasette's metadata.yml from the package's metadata.base.yml and canned queries (queries/*.sql)."""
    from spack_cache_db.web import describe as describe_module  # Datasette: slow to import, a build needs none

    try:
        if check:
            up_to_date = describe_module.is_up_to_date(output)
            click.echo(f"{output} is {'up to date' if up_to_date else 'out of date: run python build_db.py metadata'}")
            sys.exit(0 if up_to_date else 1)
        describe_module.write(output)
    except describe_module.MetadataError as error:
        click.echo(f"Error: {printable(str(error))}", err=True)
        sys.exit(1)
    click.echo(f"Wrote {output} ({len(describe_module.read_queries())} canned queries)")


_DATABASE = click.option(
    "--db",
    "database",
    default="cache.db",
    show_default=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Database to ask (one the build command made).",
)
_FORMAT = click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="json: what the web page's .json gives.",
)


def _ask(database, question):
    """question(conn) on the database; a question it cannot answer is one line on stderr and exit status 1
    (nothing found) or 2 (the question is wrong)."""
    try:
        conn = lookup.open_database(database)
        try:
            return question(conn)
        finally:
            conn.close()
    except lookup.QueryError as error:
        click.echo(f"Error: {printable(str(error))}", err=True)
        for spec in error.candidates:
            click.echo(f"  /{spec.hash}  {spec.spec}", err=True)
        sys.exit(1 if error.not_found else 2)


def _print_json(answer):
    click.echo(json.dumps(answer, indent=2, ensure_ascii=False))


@cli.command()
@click.argument("spec_hash", metavar="HASH")
@_DATABASE
@click.option("--tree", "nested", is_flag=True, help="Nested, as `spack spec` shows it: each spec expanded once.")
@click.option("--build", is_flag=True, help="Include build-only dependencies (compilers, cmake) and theirs.")
@click.option("--tag", help="Whose build cache to mark them in (default: the newest tag that has the binary).")
@_FORMAT
def deps(spec_hash, database, nested, build, tag, output_format):
    """What `spack install /HASH` needs: the binary's link and run dependencies, transitively, each once, marked
    [+] in the tag's build cache, [e] external or - not in it. HASH may be its first 4 or more characters."""
    tree = _ask(database, lambda conn: dependencies.dependency_tree(conn, spec_hash, tag, build))
    if output_format == "json":
        _print_json(tree.as_json())
    else:
        click.echo(tree.text(nested))


@cli.command()
@click.argument("target", metavar="PACKAGE|HASH")
@_DATABASE
@click.option("--tag", help="The tag whose binaries to list (default: develop, or the newest tag).")
@click.option("--after", metavar="HASH", help="List those after this binary of the answer (the last one listed).")
@_FORMAT
def dependents(target, database, tag, after, output_format):
    """Which binaries of a tag link against PACKAGE (any of its builds the tag has) or against one binary
    (/HASH), directly or through other binaries of the tag: the dependents question's answer, as many at a
    time as the web shows. Exit 1 when none does."""
    found = _ask(database, lambda conn: dependencies.dependents(conn, target, tag, after))
    if output_format == "json":
        _print_json(found.rows)
    else:
        for row in found.rows:
            how = "directly" if row["directly"] == "yes" else "through others"
            click.echo(f"{row['hash'][:7]}  {row['spec']}  ({how}; {', '.join(json.loads(row['stacks']))})")
    if not found.rows:
        click.echo(
            f"No binary of {tag or 'the default tag'} links against {target}{' after ' + after if after else ''}.",
            err=True,
        )
        sys.exit(1)
    _say_if_limited(found, f"--after {found.rows[-1]['hash']} lists those after them", after)


@cli.command()
@click.argument("hash_a", metavar="HASH1")
@click.argument("hash_b", metavar="HASH2")
@_DATABASE
@_FORMAT
def diff(hash_a, hash_b, database, output_format):
    """What differs between two specs: version, compiler, os, platform, target, variants, direct
    dependencies, tags and stacks. Each HASH may be its first 4 or more characters."""
    found = _ask(database, lambda conn: diff_module.spec_diff(conn, hash_a, hash_b))
    if output_format == "json":
        _print_json(found.as_json())
    else:
        click.echo(found.text())
