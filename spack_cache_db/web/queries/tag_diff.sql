-- title: Differences between two tags
-- description: >-
--   Packages and versions added, removed or changed from one tag (from_tag) to another (to_tag).
--   "configurations changed" means the version is in both tags but some of its configurations
--   (compiler, os, target, variants) were added or dropped; hashes are not compared, since weekly
--   snapshots rebuild everything. to_tag defaults to develop (or the newest tag); from_tag defaults
--   to the tag before to_tag of its kind: the release before a release, the snapshot before a
--   snapshot, the newest release (or snapshot) for develop. With no package: the first 100 packages
--   by name that either tag has. At most 1,000 rows.
-- params: [from_tag, to_tag, package]
-- button: Compare the tags
-- rows: [change, changes]
WITH newest AS (
    SELECT coalesce(nullif(trim(coalesce(:to_tag, '')), ''), (SELECT name FROM default_tag)) AS name
),
args AS (
    SELECT
        (SELECT id FROM tags WHERE tags.name = newest.name) AS to_id,
        (SELECT id FROM tags WHERE tags.name = coalesce(
            nullif(trim(coalesce(:from_tag, '')), ''), (SELECT before FROM tag_before WHERE tag_before.name = newest.name)
        )) AS from_id,
        lower(trim(coalesce(:package, ''))) AS package
    FROM newest
),
row_limit AS (SELECT 1000 AS rows),
-- The packages compared: the one asked for, or the first 100 by name that either tag has (read in
-- name order through their name index, so the rest of the packages are never looked at).
chosen AS (
    SELECT packages.id
    FROM packages
    CROSS JOIN args
    WHERE (args.package = '' OR packages.name = args.package)
      AND args.from_id IS NOT NULL AND args.to_id IS NOT NULL
      AND EXISTS (SELECT 1 FROM pages WHERE pages.package_id = packages.id AND pages.tag_id IN (args.from_id, args.to_id))
    ORDER BY packages.name
    LIMIT 100
),
sides_wanted(tag_id, in_to) AS (
    SELECT from_id, 0 FROM args
    UNION ALL
    SELECT to_id, 1 FROM args
),
-- One row per tag, package and configuration, with how many binaries it has there. Configurations
-- come through the listing (the spec's own), which spares reading every binary's row in specs.
sides AS (
    SELECT sides_wanted.in_to, pages.package_id, listings.configuration_id, count(*) AS specs
    FROM chosen
    CROSS JOIN sides_wanted
    CROSS JOIN pages ON pages.tag_id = sides_wanted.tag_id AND pages.package_id = chosen.id
    JOIN page_specs ON page_specs.page_id = pages.id
    JOIN listings ON listings.id = page_specs.listing_id
    GROUP BY sides_wanted.in_to, pages.package_id, listings.configuration_id
),
per_configuration AS (
    SELECT package_id, configuration_id,
        sum(CASE WHEN in_to THEN 0 ELSE specs END) AS specs_from,
        sum(CASE WHEN in_to THEN specs ELSE 0 END) AS specs_to
    FROM sides
    GROUP BY package_id, configuration_id
),
per_version AS (
    SELECT per_configuration.package_id, configurations.version_id,
        sum(specs_from) AS specs_from,
        sum(specs_to) AS specs_to,
        sum(specs_from = 0) AS configurations_added,
        sum(specs_to = 0) AS configurations_removed
    FROM per_configuration
    JOIN configurations ON configurations.id = per_configuration.configuration_id
    GROUP BY per_configuration.package_id, configurations.version_id
),
per_package AS (
    SELECT package_id, sum(specs_from) > 0 AS in_from, sum(specs_to) > 0 AS in_to
    FROM per_version GROUP BY package_id
)
SELECT
    packages.name AS package,
    versions.version,
    CASE
        WHEN per_version.specs_from = 0 AND NOT per_package.in_from THEN 'package added'
        WHEN per_version.specs_from = 0 THEN 'version added'
        WHEN per_version.specs_to = 0 AND NOT per_package.in_to THEN 'package removed'
        WHEN per_version.specs_to = 0 THEN 'version removed'
        ELSE 'configurations changed'
    END AS change,
    per_version.specs_from,
    per_version.specs_to,
    per_version.configurations_added,
    per_version.configurations_removed,
    (SELECT name FROM tags WHERE id = args.from_id) AS from_tag,
    (SELECT name FROM tags WHERE id = args.to_id) AS to_tag
FROM args, per_version
JOIN per_package ON per_package.package_id = per_version.package_id
JOIN packages ON packages.id = per_version.package_id
JOIN versions ON versions.id = per_version.version_id
WHERE per_version.configurations_added > 0 OR per_version.configurations_removed > 0
ORDER BY packages.name, versions.version_rank DESC
LIMIT (SELECT rows FROM row_limit)
