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
)
SELECT
    tags.name AS tag,
    tags.kind,
    tags.snapshot_date,
    count(*) AS packages,
    sum(pages.num_specs) AS specs,
    tags.sort_order AS tag_order
FROM args
JOIN packages ON args.package = '' OR packages.name = args.package
JOIN pages ON pages.package_id = packages.id
JOIN tags ON tags.id = pages.tag_id
GROUP BY tags.id
ORDER BY tags.sort_order
