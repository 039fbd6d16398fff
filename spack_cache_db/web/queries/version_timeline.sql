-- title: Version timeline of a package
-- description: >-
--   For each version of a package, newest first: the first and last weekly snapshot that had it,
--   how many snapshots had it, the releases that ship it and whether develop has it now. With no
--   package: the first 20 packages by name. At most 1,000 rows.
-- params: [package]
-- button: Show the timeline
-- rows: [version, versions]
-- chart: package-history
WITH row_limit AS (SELECT 1000 AS rows)
SELECT
    package,
    version,
    json_extract(snapshots_newest_first, '$[#-1]') AS first_snapshot,
    json_extract(snapshots_newest_first, '$[0]') AS last_snapshot,
    json_array_length(snapshots_newest_first) AS snapshots,
    releases,
    in_develop,
    version_rank
FROM version_history
WHERE tags > 0 AND package_id IN (  -- the package asked for, or the first 20 by name
    SELECT id FROM packages WHERE lower(trim(coalesce(:package, ''))) IN ('', name) ORDER BY name LIMIT 20
)
ORDER BY package, version_rank DESC
LIMIT (SELECT rows FROM row_limit)
