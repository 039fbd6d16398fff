"""Where the tests' inputs are, as absolute paths: the suite runs from any working directory."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEEDS = str(ROOT / "seeds")
SITE = str(ROOT / "tests" / "data" / "cache.spack.io")  # a cache.spack.io checkout in small
DATA = ROOT / "tests" / "data"
METADATA_YML = ROOT / "metadata.yml"
