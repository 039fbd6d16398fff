-- title: Binaries in a stack but not in root
-- description: >-
--   Binaries listed in a stack's mirror but not in the tag's root mirror, which should hold every
--   binary of the tag. Empty fields do not filter (all tags). At most 1,000 rows.
-- params: [tag, package]
WITH args AS (
    SELECT trim(coalesce(:tag, '')) AS tag, lower(trim(coalesce(:package, ''))) AS package
),
without_root AS (
    SELECT listings.id
    FROM listings
    WHERE listings.stack_set_id NOT IN (
        SELECT stack_set_members.stack_set_id
        FROM stacks JOIN stack_set_members ON stack_set_members.stack_id = stacks.id
        WHERE stacks.name = 'root'
    )
)
SELECT
    tags.name AS tag,
    packages.name AS package,
    versions.version,
    specs.hash,
    stack_sets.stacks,
    configurations.spec,
    pages.path
FROM args, without_root
JOIN page_specs ON page_specs.listing_id = without_root.id
JOIN pages ON pages.id = page_specs.page_id
JOIN tags ON tags.id = pages.tag_id
JOIN packages ON packages.id = pages.package_id
JOIN specs ON specs.id = page_specs.spec_id
JOIN configurations ON configurations.id = specs.configuration_id
JOIN versions ON versions.id = configurations.version_id
JOIN listings ON listings.id = without_root.id
JOIN stack_sets ON stack_sets.id = listings.stack_set_id
WHERE (args.tag = '' OR tags.name = args.tag)
  AND (args.package = '' OR packages.name = args.package)
ORDER BY tags.sort_order, packages.name, versions.version_rank DESC, specs.hash
LIMIT 1000
