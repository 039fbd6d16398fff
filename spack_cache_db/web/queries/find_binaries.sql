-- title: Find binaries
-- description: >-
--   Binaries in one tag of the build cache, with their spec string, hash, stacks and the three
--   commands that install one. Leave a field empty to not filter on it. Version takes an exact
--   version or a prefix (1.14 finds 1.14.6); compiler takes gcc, gcc@13 or gcc@13.2.0; variant takes
--   one or more of +mpi, ~cuda, cuda_arch=80, separated by spaces; host takes your CPU (zen3,
--   neoverse_v2, m1: what `spack arch -t` says) and keeps the binaries it can run. Tag defaults to
--   develop (or the newest tag with pages). At most 1,000 rows for a package, 100 without.
-- params: [package, version, variant, compiler, os, target, host, tag]
-- button: Find binaries
-- rows: [binary, binaries]
WITH args AS (
    SELECT
        lower(trim(coalesce(:package, ''))) AS package,
        ltrim(trim(coalesce(:version, '')), '@') AS version,
        trim(coalesce(:os, '')) AS os,
        trim(coalesce(:target, '')) AS target,
        lower(trim(coalesce(:host, ''))) AS host,
        replace(ltrim(trim(coalesce(:compiler, '')), '%'), '@=', '@') AS compiler,
        substr(trim(coalesce(:variant, '')), 1, 500) AS variant,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (SELECT name FROM default_tag)) AS tag
),
-- The variant field split at spaces: every term has to match one of a binary's variants.
terms(term, rest) AS (
    SELECT '', variant || ' ' FROM args
    UNION ALL
    SELECT substr(rest, 1, instr(rest, ' ') - 1), ltrim(substr(rest, instr(rest, ' ') + 1))
    FROM terms WHERE rest <> ''
),
wanted AS (SELECT DISTINCT term FROM terms WHERE term <> ''),
-- +mpi and ~mpi match exactly; name=value also matches name:=value and one value of a
-- multi-valued variant (cuda_arch=80 matches cuda_arch=70,80); a bare word means +word.
matching_variants AS (
    SELECT wanted.term, variants.id AS variant_id
    FROM wanted CROSS JOIN variants ON CASE
        WHEN substr(wanted.term, 1, 1) IN ('+', '~') THEN variants.raw = wanted.term
        WHEN instr(wanted.term, '=') > 0 THEN
            variants.name = rtrim(substr(wanted.term, 1, instr(wanted.term, '=') - 1), ':')
            AND (variants.value = substr(wanted.term, instr(wanted.term, '=') + 1)
                OR EXISTS (SELECT 1 FROM variant_values
                           WHERE variant_values.variant_id = variants.id
                             AND variant_values.value = substr(wanted.term, instr(wanted.term, '=') + 1)))
        ELSE variants.raw = '+' || wanted.term
    END
),
matching_variant_sets AS (
    SELECT variant_set_members.variant_set_id
    FROM matching_variants
    CROSS JOIN variant_set_members ON variant_set_members.variant_id = matching_variants.variant_id
    GROUP BY variant_set_members.variant_set_id
    HAVING count(DISTINCT matching_variants.term) = (SELECT count(*) FROM wanted)
),
matching_versions AS (
    SELECT versions.id, versions.package_id FROM versions, args
    WHERE versions.version = args.version
       OR substr(versions.version, 1, length(args.version) + 1) = args.version || '.'
),
matching_compilers AS (
    SELECT compilers.id FROM compilers, args
    WHERE compilers.label = args.compiler OR compilers.name = args.compiler
       OR substr(compilers.label, 1, length(args.compiler) + 1) = args.compiler || '.'
),
-- The rows in order, LIMIT applied. Packages come first (CROSS JOIN keeps that order) and are read
-- in name order through their name index, so SQLite sorts one package at a time and stops at the
-- LIMIT: without a package it reads the first few packages of the tag, not all of it. Versions
-- filter whole packages first. Configurations come through the listing (the spec's own).
found AS (
    SELECT
        packages.name AS package,
        versions.version,
        versions.version_rank,
        compilers.label AS compiler,
        oss.name AS os,
        targets.name AS target,
        (SELECT spec FROM configuration_specs WHERE configuration_specs.configuration_id = configurations.id) AS spec,
        specs.hash,
        stack_sets.stacks,
        tags.name AS tag,
        tags.mirror_url
    FROM packages
    CROSS JOIN args
    JOIN tags ON tags.name = args.tag
    CROSS JOIN pages ON pages.tag_id = tags.id AND pages.package_id = packages.id
    JOIN page_specs ON page_specs.page_id = pages.id
    JOIN listings ON listings.id = page_specs.listing_id
    JOIN configurations ON configurations.id = listings.configuration_id
    JOIN versions ON versions.id = configurations.version_id
    JOIN compilers ON compilers.id = configurations.compiler_id
    JOIN oss ON oss.id = configurations.os_id
    JOIN targets ON targets.id = configurations.target_id
    JOIN specs ON specs.id = page_specs.spec_id
    JOIN stack_sets ON stack_sets.id = listings.stack_set_id
    WHERE packages.name >= (SELECT package FROM args) AND (args.package = '' OR packages.name = args.package)
      AND (args.version = '' OR packages.id IN (SELECT package_id FROM matching_versions))
      AND (args.version = '' OR configurations.version_id IN (SELECT id FROM matching_versions))
      AND (args.os = '' OR oss.name = args.os)
      AND (args.target = '' OR targets.name = args.target)
      AND (args.host = '' OR targets.name IN (SELECT target FROM runs_on WHERE runs_on.host = args.host))
      AND (args.compiler = '' OR configurations.compiler_id IN (SELECT id FROM matching_compilers))
      AND (args.variant = '' OR configurations.variant_set_id IN (SELECT variant_set_id FROM matching_variant_sets))
    ORDER BY packages.name, versions.version_rank DESC, compilers.label, oss.name, targets.name, specs.hash
    LIMIT (SELECT CASE WHEN package = '' THEN 100 ELSE 1000 END FROM args)
)
SELECT
    package,
    version,
    spec,
    hash,
    stacks,
    'spack mirror add ' || tag || ' ' || mirror_url || char(10)
        || 'spack buildcache keys --install --trust' || char(10)
        || 'spack install --use-buildcache only /' || hash AS install,
    tag,
    -- Links to the package's other pages, on its first row only: rendering them costs time. The addresses
    -- are relative to this page's (so they work whatever the database is called), and the package name
    -- in them is percent-encoded where URLs or Markdown give a character a meaning.
    CASE WHEN row_number() OVER (
        PARTITION BY package ORDER BY version_rank DESC, compiler, os, target, hash
    ) = 1 THEN (
        SELECT '[versions](package_versions?package=' || name || ') · [timeline](version_timeline?package='
            || name || ') · [chart](../-/dashboards/package-history?package=' || name || ')'
        FROM (SELECT replace(replace(replace(replace(replace(replace(replace(replace(replace(
              replace(replace(replace(replace(replace(replace(replace(replace(replace(
                  package,
                  '%', '%25'), ' ', '%20'), '"', '%22'), '#', '%23'), '&', '%26'), '''', '%27'),
                  '(', '%28'), ')', '%29'), '+', '%2B'), '<', '%3C'), '>', '%3E'), '[', '%5B'),
                  '\', '%5C'), ']', '%5D'), '`', '%60'), char(9), '%09'), char(10), '%0A'), char(13), '%0D') AS name)
    ) END AS links
FROM found
ORDER BY package, version_rank DESC, compiler, os, target, hash
