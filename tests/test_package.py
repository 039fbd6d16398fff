"""Installed the way people install a Python tool (a wheel, not editable), from any folder, it works."""

import json
import os
import sqlite3
import subprocess
import sys
import zipfile

import pytest
from paths import METADATA_YML, ROOT

from spack_cache_db.web import describe


def test_top_level_seeds_and_queries_are_the_package_data():
    for name, package in (("seeds", "spack_cache_db"), ("queries", "spack_cache_db/web")):
        assert (ROOT / name).is_symlink(), name
        assert (ROOT / name).resolve() == ROOT / package / name


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The package built as a wheel and installed (without its dependencies, which this venv has) into a
    folder of its own: where it runs, no checkout is near."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(work / "dist")],
        check=True,
        timeout=300,
    )
    (wheel,) = (work / "dist").glob("*.whl")
    target = work / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    return wheel, target


def test_the_wheel_carries_the_seeds_the_queries_and_the_base_metadata(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for seed in (ROOT / "seeds").iterdir():
        assert f"spack_cache_db/seeds/{seed.name}" in names
    for query in (ROOT / "queries").iterdir():
        assert f"spack_cache_db/web/queries/{query.name}" in names
    assert "spack_cache_db/web/metadata.base.yml" in names
    for folder in ("templates", "static"):
        for path in (ROOT / "spack_cache_db" / "web" / folder).iterdir():
            assert f"spack_cache_db/web/{folder}/{path.name}" in names


def test_the_installed_plugin_serves_its_pages(installed, tmp_path):
    """Datasette, run where only the installed copy is importable first, finds the plugin's templates,
    stylesheet and canned queries in the installed package."""
    _, target = installed
    built = run_installed(target, tmp_path, "build")
    assert built.returncode == 0, built.stderr
    script = (
        "import asyncio, spack_cache_db\n"
        "from datasette.app import Datasette\n"
        "async def main():\n"
        "    ds = Datasette(['cache.db'])\n"
        "    await ds.invoke_startup()\n"
        "    page = await ds.client.get('/cache/find_binaries?package=py-mpi4py')\n"
        "    style = await ds.client.get('/-/static-plugins/spack-cache-db/site.css')\n"
        "    print(spack_cache_db.__file__, page.status_code, 'spack-form' in page.text, style.status_code)\n"
        "asyncio.run(main())\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    module, status, has_form, style = result.stdout.split()
    assert module.startswith(str(target)) and (status, has_form, style) == ("200", "True", "200")


def run_installed(target, cwd, *args):
    # The console script pip wrote; the installed copy comes first on the path, before any checkout installed here.
    environment = {**os.environ, "PYTHONPATH": str(target)}
    return subprocess.run(
        [str(target / "bin" / "spack-cache-db"), *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_build_with_no_inputs_and_metadata_work_from_any_folder(installed, tmp_path):
    _, target = installed
    built = run_installed(target, tmp_path, "build")
    assert built.returncode == 0, built.stderr
    assert built.stdout.startswith("Built cache.db in ")
    assert (tmp_path / "cache.db").exists()
    (inputs,) = sqlite3.connect(tmp_path / "cache.db").execute("SELECT value FROM build_info WHERE key = 'inputs'")
    assert json.loads(inputs[0]) == [str(target / "spack_cache_db" / "seeds")]
    written = run_installed(target, tmp_path, "metadata")
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "metadata.yml").read_text() == METADATA_YML.read_text()
    assert describe.generate() == METADATA_YML.read_text()
