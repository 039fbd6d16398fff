-- title: Operating systems × targets × compilers of a tag
-- description: >-
--   What a tag (or one of its stacks) covers: binaries and packages for every combination of
--   operating system, target microarchitecture and compiler it has. Tag defaults to develop (or the
--   newest tag); an empty stack means all of them.
-- params: [tag, stack]
-- chart: tag-overview
WITH args AS (
    SELECT
        trim(coalesce(:stack, '')) AS stack,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (
            SELECT name FROM tags WHERE EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id)
            ORDER BY sort_order LIMIT 1
        )) AS tag
),
chosen AS (SELECT tags.* FROM tags, args WHERE tags.name = args.tag),
in_stack AS (
    SELECT stack_set_members.stack_set_id
    FROM args
    JOIN stacks ON stacks.name = args.stack
    JOIN stack_set_members ON stack_set_members.stack_id = stacks.id
),
-- The pages read: with a stack, only those whose meta says they have binaries in it, and those whose
-- meta is not trusted. The build compares every page's meta with its spec_details and records any
-- disagreement in problems, so a page with no problem has a meta.num_specs_by_stack that names
-- exactly the stacks it has binaries in.
counted_pages AS (
    SELECT pages.id, pages.package_id
    FROM chosen
    CROSS JOIN args
    CROSS JOIN pages ON pages.tag_id = chosen.id
    WHERE args.stack = ''
       OR CASE WHEN NOT EXISTS (SELECT 1 FROM problems WHERE problems.path = pages.path) AND json_valid(pages.meta)
          THEN EXISTS (SELECT 1 FROM json_each(pages.meta, '$.num_specs_by_stack') AS by_stack
                       WHERE by_stack.key = args.stack)
          ELSE 1 END
),
-- Count per listing first, from page_specs alone (a listing is one package's configuration in one
-- set of stacks, so it has one page in the tag); then read each listing once rather than once per
-- binary.
per_listing AS (
    SELECT page_specs.listing_id, counted_pages.package_id, count(*) AS specs
    FROM counted_pages
    CROSS JOIN page_specs ON page_specs.page_id = counted_pages.id
    GROUP BY page_specs.listing_id
),
per_cell AS (
    SELECT configurations.os_id, configurations.target_id, configurations.compiler_id,
        sum(per_listing.specs) AS specs, count(DISTINCT per_listing.package_id) AS packages
    FROM args, per_listing
    JOIN listings ON listings.id = per_listing.listing_id
    JOIN configurations ON configurations.id = listings.configuration_id
    WHERE args.stack = '' OR listings.stack_set_id IN (SELECT stack_set_id FROM in_stack)
    GROUP BY configurations.os_id, configurations.target_id, configurations.compiler_id
)
SELECT
    oss.name AS os,
    targets.name AS target,
    compilers.label AS compiler,
    per_cell.specs,
    per_cell.packages,
    (SELECT name FROM chosen) AS tag
FROM per_cell
JOIN oss ON oss.id = per_cell.os_id
JOIN targets ON targets.id = per_cell.target_id
JOIN compilers ON compilers.id = per_cell.compiler_id
ORDER BY oss.name, targets.name, compilers.label
LIMIT 1000
