-- title: Binaries per version and tag
-- description: >-
--   The version × tag matrix of a package as rows (one per version and tag that has it), the data
--   behind the heatmap on the package-history dashboard. With no package: the first 20 packages by
--   name. At most 2,000 rows.
-- params: [package]
-- button: Count them
-- rows: [version in a tag, versions in tags]
-- chart: package-history
WITH args AS (
    SELECT lower(trim(coalesce(:package, ''))) AS package
),
chosen AS (
    SELECT packages.id, packages.name FROM packages, args
    WHERE args.package = '' OR packages.name = args.package
    ORDER BY packages.name LIMIT 20
)
SELECT
    chosen.name AS package,
    versions.version,
    tags.name AS tag,
    count(*) AS specs,
    versions.version_rank,
    tags.sort_order AS tag_order
FROM chosen
JOIN pages ON pages.package_id = chosen.id
JOIN tags ON tags.id = pages.tag_id
JOIN page_specs ON page_specs.page_id = pages.id
JOIN specs ON specs.id = page_specs.spec_id
JOIN configurations ON configurations.id = specs.configuration_id
JOIN versions ON versions.id = configurations.version_id
GROUP BY versions.id, tags.id
ORDER BY chosen.name, versions.version_rank DESC, tags.sort_order
LIMIT 2000
