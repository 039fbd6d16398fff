"""Pages for tests, written the way cache.spack.io's generator writes them."""

import base64
import hashlib
import json


def spack_hash(seed):
    """A valid 32-character base32 hash, deterministic in seed."""
    return base64.b32encode(hashlib.sha256(str(seed).encode()).digest()).decode().lower()[:32]


def spec(seed, **fields):
    entry = {
        "compiler": "gcc@13.2.0",
        "hash": spack_hash(seed),
        "os": "ubuntu24.04",
        "platform": "linux",
        "size": "-",
        "stacks": ["e4s", "root"],
        "target": "x86_64_v3",
        "variants": ["build_system=cmake", "+mpi"],
        "versions": ["1.0"],
    }
    entry.update(fields)
    return entry


def meta_for(specs):
    by_stack = {}
    for entry in specs:
        for stack in entry["stacks"]:
            by_stack[stack] = by_stack.get(stack, 0) + 1
    return {
        "compilers": sorted({s["compiler"] for s in specs}),
        "num_specs": len(specs),
        "num_specs_by_stack": dict(sorted(by_stack.items())),
        "oss": sorted({s["os"] for s in specs}),
        "platforms": sorted({s["platform"] for s in specs}),
        "stacks": sorted(by_stack),
        "targets": sorted({s["target"] for s in specs}),
        "versions": sorted({s["versions"][0] for s in specs}),
    }


def page_text(package, tag, specs, meta=None):
    specs = sorted((dict(sorted(s.items())) for s in specs), key=lambda s: s["hash"])
    meta = meta_for(specs) if meta is None else meta
    return (
        f'---\ntitle: "{package}"\nlayout: cache\ncategories: [package, {tag}]\n'
        f"meta: {json.dumps(meta)}\nspec_details: {json.dumps(specs)}\n---"
    )


def write_page(root, package, tag, specs, meta=None):
    """Write root/_cache/<tag>/<package>/specs.md and return its path."""
    path = root / "_cache" / tag / package / "specs.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page_text(package, tag, specs, meta))
    return path


def write_corpus(root, tags, packages, specs_per_page):
    """A synthetic checkout: every package in every tag, distinct hashes per tag."""
    for tag in tags:
        for package_number in range(packages):
            package = f"pkg{package_number}"
            specs = [
                spec(
                    f"{tag}/{package}/{n}",
                    versions=[f"1.{n % 7}"],
                    target=("x86_64_v3", "zen3", "aarch64")[n % 3],
                    variants=["build_system=cmake", f"+opt{n % 5}", f"level={n % 4}"],
                )
                for n in range(specs_per_page)
            ]
            write_page(root, package, tag, specs)
    return root


def page_facts(path):
    """What a page says, in a form where two writings of the same facts compare equal:
    specs by hash with stacks sorted, and every scalar as text (block-style YAML has no numbers)."""
    from pathlib import Path

    from spack_cache_db.read.pages import SourceFile, exactly, read_page

    page = exactly(read_page(SourceFile(str(path), True), Path(path).read_bytes()))
    specs = sorted(({**s, "stacks": sorted(s["stacks"])} for s in page.specs), key=lambda s: s["hash"])
    return page.title, page.tag, _as_text(page.meta), _as_text(specs), _as_text(page.extra)


def _as_text(value):
    if isinstance(value, dict):
        return {key: _as_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_text(item) for item in value]
    return str(value)


SPREAD_OSS = ("ubuntu22.04", "ubuntu24.04", "rhel8", "rocky9")
SPREAD_TARGETS = ("x86_64_v3", "zen3", "zen4", "skylake_avx512", "x86_64_v4")
SPREAD_COMPILERS = ("gcc@13.2.0", "gcc@11.4.0", "oneapi@2025.1.0", "clang@18.1.0")
SPREAD_STACKS = ("e4s", "hep", "radiuss", "data-vis-sdk", "ml-linux-x86_64-cpu", "tools")


def spread_environment(rng, n):
    """(os, target, compiler, stacks) of the n-th binary of a spread-shaped page: the first ones go through
    every value, the others are drawn at random, each binary in root and one to three of the stacks."""
    values = (SPREAD_OSS, SPREAD_TARGETS, SPREAD_COMPILERS, SPREAD_STACKS)
    if n < max(map(len, values)):
        os_name, target, compiler, stack = (choices[n % len(choices)] for choices in values)
        return os_name, target, compiler, ["root", stack]
    stacks = rng.sample(SPREAD_STACKS, rng.randint(1, 3))
    return rng.choice(SPREAD_OSS), rng.choice(SPREAD_TARGETS), rng.choice(SPREAD_COMPILERS), ["root", *stacks]


def write_spread_corpus(root, tags, packages, specs_per_page):
    """A synthetic checkout in the spread shape: every package in every tag, each binary built in one of many
    os x target x compiler combinations and listed in a random subset of the tag's stacks, so that the
    binaries spread over many combinations of few distinct values (the same values whatever the size)."""
    import random

    for tag in tags:
        for package_number in range(packages):
            package = f"pkg{package_number}"
            rng = random.Random(f"{tag}/{package}")
            specs = []
            for n in range(specs_per_page):
                os_name, target, compiler, stacks = spread_environment(rng, n)
                specs.append(
                    spec(
                        f"{tag}/{package}/{n}",
                        versions=[f"1.{n % 3}"],
                        os=os_name,
                        target=target,
                        compiler=compiler,
                        stacks=stacks,
                        variants=["build_system=cmake", f"+opt{n % 4}"],
                    )
                )
            write_page(root, package, tag, specs)
    return root
