-- title: Binaries in a stack but not in root
-- description: >-
--   Binaries listed in a stack's mirror but not in the tag's root mirror, which should hold every
--   binary of the tag. Empty fields do not filter (all tags). At most 1,000 rows.
-- params: [tag, package]
-- button: Find them
-- rows: [binary, binaries]
WITH args AS (
    SELECT trim(coalesce(:tag, '')) AS tag, lower(trim(coalesce(:package, ''))) AS package
),
row_limit AS (SELECT 1000 AS rows),
-- Sets of stacks without root: few, usually none, and then nothing else is read.
without_root AS (
    SELECT stack_sets.id, stack_sets.stacks
    FROM stack_sets
    WHERE NOT EXISTS (
        SELECT 1 FROM stack_set_members JOIN stacks ON stacks.id = stack_set_members.stack_id
        WHERE stack_set_members.stack_set_id = stack_sets.id AND stacks.name = 'root'
    )
),
-- Their listings, found by reading the listings' small index once per set (no index leads with
-- stack_set_id; the + keeps SQLite from building one for the occasion, which costs more).
listings_without_root AS MATERIALIZED (
    SELECT listings.id, listings.configuration_id, without_root.stacks
    FROM without_root
    CROSS JOIN listings ON +listings.stack_set_id = without_root.id
),
-- With a tag or a package, its pages are read and their binaries checked against those listings;
-- with neither, the binaries are found from the listings.
chosen_pages AS (
    SELECT pages.id
    FROM args
    CROSS JOIN tags ON tags.name = args.tag
    CROSS JOIN pages ON pages.tag_id = tags.id
    WHERE args.package = ''
    UNION ALL
    SELECT pages.id
    FROM args
    CROSS JOIN packages ON packages.name = args.package
    CROSS JOIN pages ON pages.package_id = packages.id
    WHERE args.tag = '' OR pages.tag_id = (SELECT id FROM tags WHERE tags.name = args.tag)
),
missing AS (
    SELECT page_specs.page_id, page_specs.spec_id, page_specs.listing_id
    FROM chosen_pages
    CROSS JOIN page_specs ON page_specs.page_id = chosen_pages.id
    CROSS JOIN listings_without_root ON listings_without_root.id = page_specs.listing_id
    UNION ALL
    SELECT page_specs.page_id, page_specs.spec_id, page_specs.listing_id
    FROM args
    CROSS JOIN listings_without_root
    CROSS JOIN page_specs ON page_specs.listing_id = listings_without_root.id
    WHERE args.tag = '' AND args.package = ''
)
SELECT
    tags.name AS tag,
    packages.name AS package,
    configuration_specs.version,
    specs.hash,
    listings_without_root.stacks,
    configuration_specs.spec,
    pages.path
FROM args
CROSS JOIN (SELECT 1 FROM without_root LIMIT 1) AS any_without_root
CROSS JOIN missing
CROSS JOIN pages ON pages.id = missing.page_id
CROSS JOIN tags ON tags.id = pages.tag_id
CROSS JOIN packages ON packages.id = pages.package_id
CROSS JOIN listings_without_root ON listings_without_root.id = missing.listing_id
CROSS JOIN specs ON specs.id = missing.spec_id
CROSS JOIN configuration_specs ON configuration_specs.configuration_id = listings_without_root.configuration_id
WHERE (args.tag = '' OR tags.name = args.tag)
  AND (args.package = '' OR packages.name = args.package)
ORDER BY tags.sort_order, packages.name, configuration_specs.version_rank DESC, specs.hash
LIMIT (SELECT rows FROM row_limit)
