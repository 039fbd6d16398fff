"""The command line: build (the default), export and check."""

import signal
import sys
import time
from importlib import resources
from pathlib import Path

import click
from click_default_group import DefaultGroup

from . import check as check_module
from . import describe as describe_module
from . import export as export_module
from .build import BuildError
from .build import build as build_database
from .records import InputError

BUNDLED_SEEDS = Path(str(resources.files(__package__) / "seeds"))


def _default_inputs():
    try:
        return (str(BUNDLED_SEEDS.relative_to(Path.cwd())),)
    except ValueError:
        return (str(BUNDLED_SEEDS),)


@click.group(cls=DefaultGroup, default="build", default_if_no_args=True)
@click.version_option(package_name="spack-cache-db")
def cli():
    """Normalise Spack build-cache pages (cache.spack.io) into one SQLite database."""


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option(
    "-o", "--output", default="cache.db", show_default=True, type=click.Path(dir_okay=False), help="Database to write."
)
@click.option("--keep-going", is_flag=True, help="Record pages that cannot be read in 'problems' and build the rest.")
@click.option(
    "--strict", is_flag=True, help="Fail on warnings too (meta that disagrees with spec_details, skipped pages)."
)
@click.option("--overwrite", is_flag=True, help="Replace OUTPUT even if spack-cache-db did not build it.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def build(paths, output, keep_going, strict, overwrite, quiet):
    """Build OUTPUT from PATHS: page files, folders, a cache.spack.io checkout or its _cache/.

    With no PATHS, builds from the bundled seeds/. When OUTPUT exists, only pages that changed are read
    again. The new database replaces OUTPUT in one atomic rename: a failed or interrupted build leaves
    the previous OUTPUT exactly as it was.
    """
    paths = paths or _default_inputs()
    signal.signal(signal.SIGTERM, _interrupt)
    show_progress = not quiet and sys.stderr.isatty()
    try:
        with _progress(show_progress) as progress:
            summary = build_database(
                paths, output, keep_going=keep_going, strict=strict, overwrite=overwrite, progress=progress
            )
    except (InputError, BuildError) as error:
        click.echo(f"Error: {error}", err=True)
        click.echo(f"{output} was left as it was.", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo(f"Interrupted: {output} was left as it was.", err=True)
        sys.exit(130)
    if not quiet:
        click.echo(format_summary(summary))


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class _progress:
    """A progress bar of pages, with pages and specs per second, shown on a terminal only."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.bar = None
        self.pages = self.specs = 0
        self.started = time.monotonic()

    def __enter__(self):
        return self if self.enabled else None

    def start(self, total):
        self.started = time.monotonic()
        self.bar = click.progressbar(
            length=total, label="Reading pages", file=sys.stderr, show_pos=True, item_show_func=self._rates
        )
        self.bar.__enter__()

    def advance(self, pages, specs):
        self.pages += pages
        self.specs += specs
        self.bar.update(pages, self.pages)

    def _rates(self, _):
        elapsed = max(time.monotonic() - self.started, 1e-6)
        return f"{self.specs:,} specs, {self.pages / elapsed:,.0f} pages/s, {self.specs / elapsed:,.0f} specs/s"

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
    if summary.old_layout:
        lines.append(f"  warning: skipped {summary.old_layout} page(s) of the old per-package layout")
    for error in summary.rejected[:5]:
        lines.append(f"  rejected: {error}")
    if errors > 5:
        lines.append(f"  ... and {errors - 5} more rejected page(s)")
    for path, field_name, message in summary.warnings[:5]:
        lines.append(f"  warning: {path}: {field_name}: {message}")
    if len(summary.warnings) > 5:
        lines.append(f"  ... and {len(summary.warnings) - 5} more warning(s)")
    return "\n".join(lines)


@cli.command()
@click.argument("database", type=click.Path(exists=True, dir_okay=False))
@click.argument("outdir", type=click.Path(file_okay=False))
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def export(database, outdir, quiet):
    """Write OUTDIR/_cache/<tag>/<package>/specs.md for every page in DATABASE."""
    try:
        written = export_module.export(database, outdir)
    except (export_module.ExportError, InputError) as error:
        click.echo(f"Error: {error}", err=True)
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
    try:
        if check:
            up_to_date = describe_module.is_up_to_date(output)
            click.echo(f"{output} is {'up to date' if up_to_date else 'out of date: run python build_db.py metadata'}")
            sys.exit(0 if up_to_date else 1)
        describe_module.write(output)
    except describe_module.MetadataError as error:
        click.echo(f"Error: {error}", err=True)
        sys.exit(1)
    click.echo(f"Wrote {output} ({len(describe_module.read_queries())} canned queries)")
