-- title: A package
-- description: >-
--   Everything the build cache has of one package: its versions in every tag (newest first, in
--   Spack's version order), its binaries with their install commands, and its history. As data:
--   one row per version and tag that has it, with its number of binaries.
-- params: [package]
-- button: Show the package
-- rows: [version in a tag, versions in tags]
WITH args AS (
    SELECT lower(trim(coalesce(:package, ''))) AS package
),
-- Configurations come through the listing (the spec's own), which spares reading every binary's row
-- in specs.
per_listing AS (
    SELECT pages.tag_id, page_specs.listing_id, count(*) AS binaries
    FROM args
    CROSS JOIN packages ON packages.name = args.package
    CROSS JOIN pages ON pages.package_id = packages.id
    CROSS JOIN page_specs ON page_specs.page_id = pages.id
    GROUP BY pages.tag_id, page_specs.listing_id
)
SELECT
    packages.name AS package,
    versions.version,
    tags.name AS tag,
    tags.kind,
    tags.snapshot_date,
    sum(per_listing.binaries) AS binaries,
    versions.version_rank,
    tags.sort_order AS tag_order
FROM per_listing
JOIN listings ON listings.id = per_listing.listing_id
JOIN configurations ON configurations.id = listings.configuration_id
JOIN versions ON versions.id = configurations.version_id
JOIN packages ON packages.id = versions.package_id
JOIN tags ON tags.id = per_listing.tag_id
GROUP BY versions.id, tags.id
ORDER BY versions.version_rank DESC, tags.sort_order
