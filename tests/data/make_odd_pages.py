"""Pages for the bad/odd corpus that are made by program rather than by hand.

Importable from the tests (put tests/data on sys.path):

    from make_odd_pages import big_page_text, random_bytes_page

    big_page_text()        -> str: a valid page with 20,000 specs (about 7 MB, so not committed)
    random_bytes_page()    -> bytes: 4 KB of random.Random(1) bytes (bad/02-random-binary.md)

Run as a script to rewrite the committed bad/02-random-binary.md, and optionally
write the big page somewhere:

    python tests/data/make_odd_pages.py [--big PATH] [--specs N]

Everything is deterministic: same Python, same bytes.
"""

import argparse
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/, for pagemaker when this runs as a script
from pagemaker import page_text  # noqa: E402

RANDOM_BINARY_PATH = HERE / "bad" / "02-random-binary.md"

BASE32 = "abcdefghijklmnopqrstuvwxyz234567"  # Spack's hash alphabet
BIG_TITLE = "big-odd-package"
BIG_TAG = "develop-2025-06-29"
BIG_SPECS = 20_000


def random_bytes_page(size=4096, seed=1):
    """4 KB of random bytes: not UTF-8, and not starting with '---'."""
    data = random.Random(seed).randbytes(size)
    assert not data.startswith(b"---")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    raise AssertionError("random bytes happen to be valid UTF-8; pick another seed")


def new_hash(rng, taken):
    """A fresh 32-character hash in Spack's base32 alphabet, not in `taken` (which it joins)."""
    while True:
        value = "".join(rng.choice(BASE32) for _ in range(32))
        if value not in taken:
            taken.add(value)
            return value


_VERSIONS = ["0.9", "0.10", "1.2", "1.10", "1.9.1", "2.0", "2.0rc1", "develop"]
_COMPILERS = ["gcc@11.4.0", "gcc@13.3.0", "gcc@7.5.0", "intel-oneapi-compilers@2025.1.0", "llvm@18.1.8", "none"]
_OSS = ["ubuntu22.04", "ubuntu24.04", "rhel8", "sle_hpc15"]
_TARGETS = ["x86_64_v3", "x86_64_v4", "zen4", "neoverse_v2", "aarch64", "ppc64le"]
_STACKS = ["e4s", "e4s-oneapi", "e4s-neoverse-v2", "ml-linux-x86_64-cpu", "radiuss", "hep", "data-vis-sdk"]


def big_specs(count=BIG_SPECS, seed=20_000):
    """`count` valid, distinct spec entries with unique hashes."""
    rng = random.Random(seed)
    taken = set()
    specs = []
    for number in range(count):
        stacks = sorted({"root", *rng.sample(_STACKS, rng.randint(0, 3))})
        variants = [
            "build_system=cmake",
            f"build_type={rng.choice(['Release', 'RelWithDebInfo', 'Debug'])}",
            rng.choice(["+shared", "~shared"]),
            rng.choice(["+mpi", "~mpi"]),
        ]
        if rng.random() < 0.2:
            variants.append(f"cuda_arch={rng.choice(['70', '80', '70,80,90'])}")
        if rng.random() < 0.1:
            variants.append("patches:=db4173c,de0de41")
        specs.append(
            {
                "compiler": rng.choice(_COMPILERS),
                "hash": new_hash(rng, taken),
                "os": rng.choice(_OSS),
                "platform": "linux",
                "size": "-" if rng.random() < 0.9 else str(rng.randint(1000, 10**9)),
                "stacks": stacks,
                "target": rng.choice(_TARGETS),
                "variants": variants,
                "versions": [rng.choice(_VERSIONS)],
            }
        )
        if number % 1000 == 999:
            specs[-1]["checksum"] = f"sha256:{number:064x}"  # an undocumented field now and then
    return specs


def big_page_text(count=BIG_SPECS):
    """A valid page with `count` specs (default 20,000); meta agrees with spec_details."""
    return page_text(BIG_TITLE, BIG_TAG, big_specs(count))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=Path, help="also write the big page here")
    parser.add_argument("--specs", type=int, default=BIG_SPECS, help="specs in the big page")
    args = parser.parse_args(argv)
    RANDOM_BINARY_PATH.write_bytes(random_bytes_page())
    print(f"wrote {RANDOM_BINARY_PATH}")
    if args.big:
        args.big.write_text(big_page_text(args.specs), encoding="utf-8", newline="\n")
        print(f"wrote {args.big}")


if __name__ == "__main__":
    main()
