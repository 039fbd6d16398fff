-- title: Binaries per tag over time
-- description: >-
--   How many binaries of a package each tag has (develop, releases, weekly snapshots by date):
--   the data behind the line chart on the package-history dashboard. With no package: all packages
--   together.
-- params: [package]
-- button: Count them
-- rows: [tag, tags]
-- chart: package-history
WITH args AS (
    SELECT lower(trim(coalesce(:package, ''))) AS package
),
-- Per tag: its pages of the package, or with no package its pages counted on their (tag, package) index and
-- its binaries as the build counted them (every page's binaries, without reading every page).
per_tag AS (
    SELECT pages.tag_id, 1 AS packages, pages.num_specs AS specs
    FROM args
    CROSS JOIN packages ON packages.name = args.package
    CROSS JOIN pages ON pages.package_id = packages.id
    UNION ALL
    SELECT tags.id, (SELECT count(*) FROM pages WHERE pages.tag_id = tags.id), coalesce((
        SELECT binaries FROM binaries_facet_counts WHERE facet = 'tag' AND value = tags.name
    ), 0)
    FROM args CROSS JOIN tags
    WHERE args.package = '' AND EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id)
)
SELECT
    tags.name AS tag,
    tags.kind,
    tags.snapshot_date,
    sum(per_tag.packages) AS packages,
    sum(per_tag.specs) AS specs,
    tags.sort_order AS tag_order
FROM per_tag
JOIN tags ON tags.id = per_tag.tag_id
GROUP BY tags.id
ORDER BY tags.sort_order
