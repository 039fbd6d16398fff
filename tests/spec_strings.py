"""A configuration's spec string written in Python from normalise's templates: the reference that the spec
strings the database's views write in SQL (with normalise.template_sql) are checked against."""

from spack_cache_db.normalise import COMPILER_TEMPLATE, NO_COMPILER, SPEC_TEMPLATE, spec_variants


def spec_string(package, version, variants, platform, os, target, compiler):
    text = SPEC_TEMPLATE.format(
        package=package, version=version, variants=spec_variants(variants), platform=platform, os=os, target=target
    )
    return text if compiler.name == NO_COMPILER else text + COMPILER_TEMPLATE.format(compiler=compiler)
