-- title: Versions of a package across tags
-- description: >-
--   One row per version of a package, newest first in Spack's version order, with the number of
--   binaries in each tag that has it (specs_per_tag, tags in the usual order: develop, releases,
--   snapshots) and the newest and oldest of those tags. With no package: the first 20 packages by
--   name.
-- params: [package]
-- button: Show the versions
-- rows: [version, versions]
-- chart: package-history
WITH args AS (
    SELECT lower(trim(coalesce(:package, ''))) AS package
),
chosen AS (
    SELECT packages.id, packages.name FROM packages, args
    WHERE args.package = '' OR packages.name = args.package
    ORDER BY packages.name LIMIT 20
),
per_tag AS (
    SELECT chosen.name AS package, versions.version, versions.version_rank, tags.name AS tag,
        tags.sort_order, count(*) AS specs
    FROM chosen
    JOIN pages ON pages.package_id = chosen.id
    JOIN tags ON tags.id = pages.tag_id
    JOIN page_specs ON page_specs.page_id = pages.id
    JOIN specs ON specs.id = page_specs.spec_id
    JOIN configurations ON configurations.id = specs.configuration_id
    JOIN versions ON versions.id = configurations.version_id
    GROUP BY versions.id, tags.id
),
-- Window functions, unlike GROUP BY, promise the order the tags are listed in.
per_version AS (
    SELECT
        package,
        version,
        count(*) OVER tag_order AS tags,
        json_group_object(tag, specs) OVER tag_order AS specs_per_tag,
        first_value(tag) OVER tag_order AS newest_tag,
        last_value(tag) OVER tag_order AS oldest_tag,
        version_rank,
        row_number() OVER tag_order AS n
    FROM per_tag
    WINDOW tag_order AS (
        PARTITION BY package, version ORDER BY sort_order ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
    )
)
SELECT package, version, tags, specs_per_tag, newest_tag, oldest_tag, version_rank
FROM per_version
WHERE n = 1
ORDER BY package, version_rank DESC
LIMIT 1000
