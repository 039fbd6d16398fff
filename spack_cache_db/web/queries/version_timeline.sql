-- title: Version timeline of a package
-- description: >-
--   For each version of a package, newest first: the first and last weekly snapshot that had it,
--   how many snapshots had it, the releases that ship it and whether develop has it now. With no
--   package: the first 20 packages by name.
-- params: [package]
-- button: Show the timeline
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
presence AS (
    SELECT DISTINCT chosen.name AS package, versions.version, versions.version_rank, tags.name AS tag,
        tags.kind, tags.sort_order
    FROM chosen
    JOIN pages ON pages.package_id = chosen.id
    JOIN tags ON tags.id = pages.tag_id
    JOIN page_specs ON page_specs.page_id = pages.id
    JOIN specs ON specs.id = page_specs.spec_id
    JOIN configurations ON configurations.id = specs.configuration_id
    JOIN versions ON versions.id = configurations.version_id
),
-- Window functions, unlike GROUP BY, promise the order the tags are listed in (newest first).
per_version AS (
    SELECT
        package,
        version,
        json_group_array(tag) FILTER (WHERE kind = 'snapshot') OVER tag_order AS snapshots_newest_first,
        json_group_array(tag) FILTER (WHERE kind = 'release') OVER tag_order AS releases,
        max(kind = 'develop') OVER tag_order AS in_develop,
        version_rank,
        row_number() OVER tag_order AS n
    FROM presence
    WINDOW tag_order AS (
        PARTITION BY package, version ORDER BY sort_order ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
    )
)
SELECT
    package,
    version,
    json_extract(snapshots_newest_first, '$[#-1]') AS first_snapshot,
    json_extract(snapshots_newest_first, '$[0]') AS last_snapshot,
    json_array_length(snapshots_newest_first) AS snapshots,
    releases,
    in_develop,
    version_rank
FROM per_version
WHERE n = 1
ORDER BY package, version_rank DESC
LIMIT 1000
