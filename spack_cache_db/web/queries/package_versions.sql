-- title: Versions of a package across tags
-- description: >-
--   One row per version of a package, newest first in Spack's version order, with the number of
--   binaries in each tag that has it (specs_per_tag, tags in the usual order: develop, releases,
--   snapshots) and the newest and oldest of those tags. With no package: the first 20 packages by
--   name. At most 1,000 rows.
-- params: [package]
-- button: Show the versions
-- rows: [version, versions]
-- chart: package-history
WITH row_limit AS (SELECT 1000 AS rows)
SELECT package, version, tags, specs_per_tag, newest_tag, oldest_tag, version_rank
FROM version_history
WHERE tags > 0 AND package_id IN (  -- the package asked for, or the first 20 by name
    SELECT id FROM packages WHERE lower(trim(coalesce(:package, ''))) IN ('', name) ORDER BY name LIMIT 20
)
ORDER BY package, version_rank DESC
LIMIT (SELECT rows FROM row_limit)
