-- title: Packages in a stack
-- description: >-
--   The packages a stack has in a tag, with their versions (newest first) and binary counts. With no
--   stack: every stack of the tag, one row per stack and package. Tag defaults to develop (or the
--   newest tag). At most 500 rows for a stack, 100 without, the first in the order shown; the next are
--   those after the last one shown (after_stack and after: its stack and package, which the link under
--   the answer gives).
-- params: [stack, tag, after_stack, after]
-- button: Show the packages
-- rows: [package, packages]
-- next_page: {after_stack: stack, after: package}
WITH args AS (
    SELECT
        trim(coalesce(:stack, '')) AS stack,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (SELECT name FROM default_tag)) AS tag,
        -- Where the answer starts in its order (stack, package): after this row ('' before every name). With
        -- a stack, a package alone names the row.
        coalesce(nullif(trim(coalesce(:after_stack, '')), ''), trim(coalesce(:stack, ''))) AS after_stack,
        trim(coalesce(:after, '')) AS after_package
),
row_limit AS (SELECT CASE WHEN stack = '' THEN 100 ELSE 500 END AS rows FROM args),
chosen AS (SELECT tags.* FROM tags, args WHERE tags.name = args.tag),
in_stack AS MATERIALIZED (SELECT stack_memberships.stack_set_id FROM args JOIN stack_memberships USING (stack)),
-- The rows the pages' counts per stack give (a stack and a package with binaries in it), and how many
-- binaries the page has in the stack.
page_rows AS (
    SELECT stacks.name AS stack, packages.name AS package, pages.id AS page_id, pages.tag_id, pages.package_id,
        pages.num_specs, page_stacks.binaries AS specs
    FROM chosen
    CROSS JOIN args
    CROSS JOIN pages ON pages.tag_id = chosen.id
    CROSS JOIN page_stacks ON page_stacks.page_id = pages.id
    CROSS JOIN stacks ON stacks.id = page_stacks.stack_id
    CROSS JOIN packages ON packages.id = pages.package_id
    WHERE (args.stack = '' OR stacks.name = args.stack)
        AND (stacks.name, packages.name) > (args.after_stack, args.after_package)
),
-- The first of them: a row after these cannot be among the rows listed.
first_rows AS (
    SELECT * FROM page_rows ORDER BY stack, package LIMIT (SELECT rows FROM row_limit)
),
-- With a stack, a page that has all its binaries in it needs no binary read: its versions are the package's
-- in the tag (tag_version_counts).
whole AS (
    SELECT first_rows.* FROM first_rows, args
    WHERE args.stack <> '' AND first_rows.specs = first_rows.num_specs
),
whole_versions AS (
    SELECT whole.stack, whole.package, versions.version, versions.version_rank, whole.specs
    FROM whole
    CROSS JOIN versions ON versions.package_id = whole.package_id
    CROSS JOIN tag_version_counts ON tag_version_counts.version_id = versions.id
        AND tag_version_counts.tag_id = whole.tag_id
),
-- The pages whose binaries are read: the other first rows'. The rest of the tag is never read.
counted_pages AS (
    SELECT DISTINCT page_id AS id FROM first_rows WHERE page_id NOT IN (SELECT page_id FROM whole)
),
-- Without a stack: count per listing first, from page_specs alone (a listing is one package's configuration
-- in one set of stacks); then read each listing once rather than once per binary.
per_listing AS (
    SELECT page_specs.listing_id, pages.package_id, count(*) AS specs
    FROM args
    CROSS JOIN counted_pages
    CROSS JOIN pages ON pages.id = counted_pages.id
    CROSS JOIN page_specs ON page_specs.page_id = pages.id
    WHERE args.stack = ''
    GROUP BY page_specs.listing_id
),
-- With a stack, each binary's listing is read and kept when its set of stacks holds the stack: no set's
-- other stacks are read, and nothing is counted per listing first (in a tag whose binaries spread over many
-- sets of stacks, a listing has about one binary). Counted per version id; names are read per version.
in_stack_per_version AS (
    SELECT configurations.version_id, count(*) AS specs
    FROM args
    CROSS JOIN counted_pages
    CROSS JOIN page_specs ON page_specs.page_id = counted_pages.id
    CROSS JOIN listings ON listings.id = page_specs.listing_id
    CROSS JOIN in_stack ON in_stack.stack_set_id = listings.stack_set_id
    CROSS JOIN configurations ON configurations.id = listings.configuration_id
    WHERE args.stack <> ''
    GROUP BY configurations.version_id
),
-- Per stack, package and version.
per_version AS (
    SELECT args.stack, packages.name AS package, versions.version, versions.version_rank, in_stack_per_version.specs
    FROM args
    CROSS JOIN in_stack_per_version
    CROSS JOIN versions ON versions.id = in_stack_per_version.version_id
    CROSS JOIN packages ON packages.id = versions.package_id
    UNION ALL
    SELECT stacks.name, packages.name, versions.version, versions.version_rank, sum(per_listing.specs)
    FROM per_listing
    CROSS JOIN listings ON listings.id = per_listing.listing_id
    CROSS JOIN stack_set_members ON stack_set_members.stack_set_id = listings.stack_set_id
    CROSS JOIN stacks ON stacks.id = stack_set_members.stack_id
    CROSS JOIN configurations ON configurations.id = listings.configuration_id
    JOIN versions ON versions.id = configurations.version_id
    JOIN packages ON packages.id = per_listing.package_id
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
),
whole_packages AS (
    SELECT
        stack,
        package,
        json_group_array(version) OVER newest_first AS versions,
        specs,
        row_number() OVER newest_first AS n
    FROM whole_versions
    WINDOW newest_first AS (
        PARTITION BY stack, package ORDER BY version_rank DESC ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
    )
)
SELECT stack, package, versions, specs, (SELECT name FROM chosen) AS tag
FROM per_package
WHERE n = 1 AND (stack, package) > (SELECT after_stack, after_package FROM args)
UNION ALL
SELECT stack, package, versions, specs, (SELECT name FROM chosen) AS tag
FROM whole_packages
WHERE n = 1
ORDER BY stack, package
LIMIT (SELECT rows FROM row_limit)
