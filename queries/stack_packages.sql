-- title: Packages in a stack
-- description: >-
--   The packages a stack has in a tag, with their versions (newest first) and binary counts. With no
--   stack: every stack of the tag, one row per stack and package. Tag defaults to develop (or the
--   newest tag). At most 1,000 rows.
-- params: [stack, tag]
WITH args AS (
    SELECT
        trim(coalesce(:stack, '')) AS stack,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (
            SELECT name FROM tags WHERE EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id)
            ORDER BY sort_order LIMIT 1
        )) AS tag
),
chosen AS (SELECT tags.* FROM tags, args WHERE tags.name = args.tag),
per_stack_set AS (
    SELECT listings.stack_set_id, pages.package_id, configurations.version_id, count(*) AS specs
    FROM chosen
    CROSS JOIN pages ON pages.tag_id = chosen.id
    JOIN page_specs ON page_specs.page_id = pages.id
    JOIN listings ON listings.id = page_specs.listing_id
    JOIN configurations ON configurations.id = listings.configuration_id
    GROUP BY listings.stack_set_id, pages.package_id, configurations.version_id
),
per_version AS (
    SELECT stacks.name AS stack, packages.name AS package, versions.version, versions.version_rank,
        sum(per_stack_set.specs) AS specs
    FROM args, per_stack_set
    JOIN stack_set_members ON stack_set_members.stack_set_id = per_stack_set.stack_set_id
    JOIN stacks ON stacks.id = stack_set_members.stack_id
    JOIN packages ON packages.id = per_stack_set.package_id
    JOIN versions ON versions.id = per_stack_set.version_id
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
LIMIT 1000
