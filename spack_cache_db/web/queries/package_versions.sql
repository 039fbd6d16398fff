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
WITH per_version AS (
    SELECT
        package,
        version,
        count(*) OVER tag_order AS tags,
        json_group_object(tag, binaries) OVER tag_order AS specs_per_tag,
        first_value(tag) OVER tag_order AS newest_tag,
        last_value(tag) OVER tag_order AS oldest_tag,
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
SELECT package, version, tags, specs_per_tag, newest_tag, oldest_tag, version_rank
FROM per_version
WHERE n = 1
ORDER BY package, version_rank DESC
LIMIT 1000
