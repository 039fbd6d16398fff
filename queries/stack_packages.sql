-- title: Packages in a stack
-- description: >-
--   The packages a stack has in a tag, with their versions (newest first) and binary counts. With no
--   stack: every stack of the tag, one row per stack and package. Tag defaults to develop (or the
--   newest tag). At most 1,000 rows for a stack, 100 without.
-- params: [stack, tag]
WITH args AS (
    SELECT
        trim(coalesce(:stack, '')) AS stack,
        CASE WHEN trim(coalesce(:stack, '')) = '' THEN 100 ELSE 1000 END AS row_limit,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (
            SELECT name FROM tags WHERE EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id)
            ORDER BY sort_order LIMIT 1
        )) AS tag
),
chosen AS (SELECT tags.* FROM tags, args WHERE tags.name = args.tag),
-- The tag's pages, and whether each one's meta can be trusted: the build compares every page's meta
-- with its spec_details and records any disagreement in problems, so a page with no problem has a
-- meta.num_specs_by_stack that names exactly the stacks it has binaries in.
checked_pages AS (
    SELECT pages.id, pages.package_id,
        NOT EXISTS (SELECT 1 FROM problems WHERE problems.path = pages.path) AND json_valid(pages.meta) AS trusted
    FROM chosen
    CROSS JOIN pages ON pages.tag_id = chosen.id
),
-- The rows the meta of trusted pages vouches for (a stack and a package that has binaries in it).
vouched AS (
    SELECT stacks.name AS stack, packages.name AS package, checked_pages.id AS page_id
    FROM checked_pages
    CROSS JOIN pages ON pages.id = checked_pages.id
    CROSS JOIN json_each(CASE WHEN checked_pages.trusted THEN pages.meta ELSE '{}' END,
        '$.num_specs_by_stack') AS by_stack
    CROSS JOIN stacks ON stacks.name = by_stack.key
    CROSS JOIN packages ON packages.id = checked_pages.package_id
    CROSS JOIN args
    WHERE checked_pages.trusted AND (args.stack = '' OR stacks.name = args.stack)
),
-- The pages whose binaries are read: those of the first rows the meta vouches for (a row after
-- them cannot be among the rows listed) and every page whose meta is not trusted. The rest of the
-- tag is never read.
counted_pages AS (
    SELECT page_id AS id FROM (
        SELECT stack, package, page_id FROM vouched
        GROUP BY stack, package ORDER BY stack, package LIMIT (SELECT row_limit FROM args)
    )
    UNION
    SELECT id FROM checked_pages WHERE NOT trusted
),
-- Count per listing first, from page_specs alone (a listing is one package's configuration in one
-- set of stacks); then read each listing once rather than once per binary.
per_listing AS (
    SELECT page_specs.listing_id, pages.package_id, count(*) AS specs
    FROM counted_pages
    CROSS JOIN pages ON pages.id = counted_pages.id
    CROSS JOIN page_specs ON page_specs.page_id = pages.id
    GROUP BY page_specs.listing_id
),
-- Then per stack (only the one asked for), package and version: configurations are read only for
-- the listings in that stack.
per_version AS (
    SELECT stacks.name AS stack, packages.name AS package, versions.version, versions.version_rank,
        sum(per_listing.specs) AS specs
    FROM per_listing
    CROSS JOIN args
    CROSS JOIN listings ON listings.id = per_listing.listing_id
    CROSS JOIN stack_set_members ON stack_set_members.stack_set_id = listings.stack_set_id
    CROSS JOIN stacks ON stacks.id = stack_set_members.stack_id
    CROSS JOIN configurations ON configurations.id = listings.configuration_id
    JOIN versions ON versions.id = configurations.version_id
    JOIN packages ON packages.id = per_listing.package_id
    WHERE args.stack = '' OR stacks.name = args.stack
    GROUP BY stacks.id, packages.id, versions.id
),
-- Window functions, unlike GROUP BY, promise the order the versions are listed in (newest first).
per_package AS (
    SELECT
        stack,
        package,
        json_group_array(version) OVER newest_first AS versions,
        sum(specs) OVER newest_first AS specs,
        row_number() OVER newest_first AS n
    FROM per_version
    WINDOW newest_first AS (
        PARTITION BY stack, package ORDER BY version_rank DESC ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
    )
)
SELECT stack, package, versions, specs, (SELECT name FROM chosen) AS tag
FROM per_package
WHERE n = 1
ORDER BY stack, package
LIMIT (SELECT row_limit FROM args)
