-- title: Search binaries
-- description: >-
--   Full-text search over the binaries of a tag: package, version, compiler, os, platform, target,
--   variants and stacks (for example: hdf5 mpi, cuda_arch=80, neoverse_v2 gcc, e4s-oneapi). Every
--   word has to match; any text is safe to type. An empty search lists the whole tag. Tag defaults to
--   develop (or the newest tag). At most 1,000 rows, 100 for an empty search.
-- params: [q, tag]
-- button: Search
-- rows: [binary, binaries]
WITH args AS (
    SELECT
        substr(trim(coalesce(:q, '')), 1, 500) AS q,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (
            SELECT name FROM tags WHERE EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id)
            ORDER BY sort_order LIMIT 1
        )) AS tag
),
-- escape_fts quotes every word; text with nothing searchable left becomes '""', which finds nothing.
hits AS NOT MATERIALIZED (
    SELECT listings_fts.rowid AS listing_id
    FROM args, listings_fts
    WHERE args.q <> '' AND listings_fts MATCH coalesce(nullif(escape_fts(args.q), ''), '""')
),
-- A narrow search (few listings match) starts from the listings it found; an empty or a broad one
-- walks the tag's packages in name order, so SQLite sorts one package at a time and stops at the
-- LIMIT after the first packages. The two give the same rows; only one of them runs.
narrow(yes) AS (
    SELECT args.q <> '' AND (SELECT count(*) FROM (SELECT 1 FROM hits LIMIT 2001)) <= 2000 FROM args
),
found_narrow AS (
    SELECT
        packages.name AS package,
        versions.version,
        versions.version_rank,
        (SELECT spec FROM configuration_specs WHERE configuration_specs.configuration_id = configurations.id) AS spec,
        specs.hash,
        stack_sets.stacks,
        tags.name AS tag,
        tags.mirror_url
    FROM narrow
    CROSS JOIN args
    CROSS JOIN tags ON tags.name = args.tag
    CROSS JOIN hits
    CROSS JOIN listings ON listings.id = hits.listing_id
    CROSS JOIN page_specs ON page_specs.listing_id = listings.id
    CROSS JOIN pages ON pages.id = page_specs.page_id AND pages.tag_id = tags.id
    CROSS JOIN packages ON packages.id = pages.package_id
    CROSS JOIN configurations ON configurations.id = listings.configuration_id
    CROSS JOIN versions ON versions.id = configurations.version_id
    CROSS JOIN specs ON specs.id = page_specs.spec_id
    CROSS JOIN stack_sets ON stack_sets.id = listings.stack_set_id
    WHERE narrow.yes
),
-- Packages come first (CROSS JOIN keeps that order) and are read through their name index.
found_broad AS (
    SELECT
        packages.name AS package,
        versions.version,
        versions.version_rank,
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
    JOIN specs ON specs.id = page_specs.spec_id
    JOIN stack_sets ON stack_sets.id = listings.stack_set_id
    WHERE NOT (SELECT yes FROM narrow) AND packages.name >= ''
      AND (args.q = '' OR page_specs.listing_id IN (SELECT listing_id FROM hits))
    ORDER BY packages.name, versions.version_rank DESC, spec, specs.hash
    LIMIT (SELECT CASE WHEN q = '' THEN 100 ELSE 1000 END FROM args)
),
found AS (
    SELECT * FROM found_narrow
    UNION ALL
    SELECT * FROM found_broad
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
    tag
FROM found
ORDER BY package, version_rank DESC, spec, hash
LIMIT (SELECT CASE WHEN q = '' THEN 100 ELSE 1000 END FROM args)
