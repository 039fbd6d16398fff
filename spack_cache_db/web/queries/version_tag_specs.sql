-- title: Binaries per version and tag
-- description: >-
--   The version × tag matrix of a package as rows (one per version and tag that has it), the data
--   behind the heatmap on the package-history dashboard. With no package: the first 20 packages by
--   name. At most 2,000 rows.
-- params: [package]
-- button: Count them
-- rows: [version in a tag, versions in tags]
-- chart: package-history
WITH row_limit AS (SELECT 2000 AS rows)
SELECT package, version, tag, binaries AS specs, version_rank, tag_order
FROM version_tags
WHERE package_id IN (  -- the package asked for, or the first 20 by name
    SELECT id FROM packages WHERE lower(trim(coalesce(:package, ''))) IN ('', name) ORDER BY name LIMIT 20
)
ORDER BY package, version_rank DESC, tag_order
LIMIT (SELECT rows FROM row_limit)
