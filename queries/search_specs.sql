-- title: Search binaries
-- description: >-
--   Full-text search over the binaries of a tag: package, version, compiler, os, platform, target,
--   variants and stacks (for example: hdf5 mpi, cuda_arch=80, neoverse_v2 gcc, e4s-oneapi). Every
--   word has to match; any text is safe to type. An empty search lists the whole tag. Tag defaults to
--   develop (or the newest tag). At most 1,000 rows, 100 for an empty search.
-- params: [q, tag]
WITH args AS (
    SELECT
        substr(trim(coalesce(:q, '')), 1, 500) AS q,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (
            SELECT name FROM tags WHERE EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id)
            ORDER BY sort_order LIMIT 1
        )) AS tag
),
-- escape_fts quotes every word; text with nothing searchable left becomes '""', which finds nothing.
hits AS (
    SELECT listings_fts.rowid AS listing_id
    FROM args, listings_fts
    WHERE args.q <> '' AND listings_fts MATCH coalesce(nullif(escape_fts(args.q), ''), '""')
)
SELECT
    packages.name AS package,
    versions.version,
    configurations.spec,
    specs.hash,
    stack_sets.stacks,
    'spack mirror add ' || tags.name || ' ' || tags.mirror_url || char(10)
        || 'spack buildcache keys --install --trust' || char(10)
        || 'spack install --use-buildcache only /' || specs.hash AS install,
    tags.name AS tag
FROM args
JOIN tags ON tags.name = args.tag
JOIN pages ON pages.tag_id = tags.id
JOIN packages ON packages.id = pages.package_id
JOIN page_specs ON page_specs.page_id = pages.id
JOIN specs ON specs.id = page_specs.spec_id
JOIN configurations ON configurations.id = specs.configuration_id
JOIN versions ON versions.id = configurations.version_id
JOIN listings ON listings.id = page_specs.listing_id
JOIN stack_sets ON stack_sets.id = listings.stack_set_id
WHERE args.q = '' OR page_specs.listing_id IN (SELECT listing_id FROM hits)
ORDER BY packages.name, versions.version_rank DESC, configurations.spec, specs.hash
LIMIT (SELECT CASE WHEN q = '' THEN 100 ELSE 1000 END FROM args)
