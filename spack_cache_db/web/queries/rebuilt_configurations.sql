-- title: Configurations built more than once
-- description: >-
--   Configurations (package, version, compiler, os, target, variants) that a tag lists several
--   times under different hashes: rebuilds, common in develop. Tag defaults to develop (or the
--   newest tag). With no package: the first 100 packages by name that the tag has. At most 500
--   rows.
-- params: [tag, package]
-- button: Show the rebuilds
-- rows: [configuration, configurations]
WITH args AS (
    SELECT
        lower(trim(coalesce(:package, ''))) AS package,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (SELECT name FROM default_tag)) AS tag
),
row_limit AS (SELECT 500 AS rows),
chosen AS (SELECT tags.id, tags.name FROM tags, args WHERE tags.name = args.tag),
-- The pages read: the package's, or those of the first 100 packages by name (read in name order
-- through their name index, so the rest of the tag is never looked at).
chosen_pages AS (
    SELECT pages.id, pages.package_id
    FROM packages
    CROSS JOIN chosen
    CROSS JOIN args
    CROSS JOIN pages ON pages.tag_id = chosen.id AND pages.package_id = packages.id
    WHERE args.package = '' OR packages.name = args.package
    ORDER BY packages.name
    LIMIT 100
),
repeated AS (
    SELECT chosen_pages.package_id, specs.configuration_id, count(*) AS builds,
        json_group_array(specs.hash) AS hashes
    FROM chosen_pages
    CROSS JOIN page_specs ON page_specs.page_id = chosen_pages.id
    JOIN specs ON specs.id = page_specs.spec_id
    GROUP BY chosen_pages.package_id, specs.configuration_id
    HAVING count(*) > 1
)
SELECT
    configuration_specs.package,
    configuration_specs.version,
    repeated.builds,
    configuration_specs.spec,
    repeated.hashes,
    (SELECT name FROM chosen) AS tag
FROM repeated
JOIN configuration_specs ON configuration_specs.configuration_id = repeated.configuration_id
ORDER BY repeated.builds DESC, configuration_specs.package, configuration_specs.version_rank DESC, spec
LIMIT (SELECT rows FROM row_limit)
