-- title: Version timeline of a package
-- description: >-
--   For each version of a package, newest first: the first and last weekly snapshot that had it,
--   how many snapshots had it, the releases that ship it and whether develop has it now. With no
--   package: the first 20 packages by name.
-- params: [package]
-- button: Show the timeline
-- rows: [version, versions]
-- chart: package-history
WITH per_version AS (
    SELECT
        package,
        version,
        json_group_array(tag) FILTER (WHERE kind = 'snapshot') OVER tag_order AS snapshots_newest_first,
        json_group_array(tag) FILTER (WHERE kind = 'release') OVER tag_order AS releases,
        max(kind = 'develop') OVER tag_order AS in_develop,
        version_rank,
        row_number() OVER tag_order AS n
    FROM version_tags
    WHERE package_id IN (  -- the package asked for, or the first 20 by name
        SELECT id FROM packages WHERE lower(trim(coalesce(:package, ''))) IN ('', name) ORDER BY name LIMIT 20
    )
    WINDOW tag_order AS (
        PARTITION BY package_id, version_id ORDER BY tag_order ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
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
