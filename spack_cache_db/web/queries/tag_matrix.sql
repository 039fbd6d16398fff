-- title: Operating systems × targets × compilers of a tag
-- description: >-
--   What a tag (or one of its stacks) covers: binaries and packages for every combination of
--   operating system, target microarchitecture and compiler it has. Tag defaults to develop (or the
--   newest tag); an empty stack means all of them. At most 1,000 rows.
-- params: [tag, stack]
-- button: Show what it covers
-- rows: [combination, combinations]
-- chart: tag-overview
WITH args AS (
    SELECT
        trim(coalesce(:stack, '')) AS stack,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (SELECT name FROM default_tag)) AS tag
),
row_limit AS (SELECT 1000 AS rows),
chosen AS (SELECT tags.* FROM tags, args WHERE tags.name = args.tag),
in_stack AS MATERIALIZED (SELECT stack_memberships.stack_set_id FROM args JOIN stack_memberships USING (stack)),
-- With a stack, the tag's pages and how many of their binaries are in it: what the page's trusted meta
-- says (page_stack_counts), and unknown (NULL) where it cannot be trusted.
checked_pages AS (
    SELECT page_stack_counts.id, page_stack_counts.package_id, page_stack_counts.num_specs,
        CASE WHEN page_stack_counts.trusted THEN coalesce((
            SELECT CAST(by_stack.value AS INTEGER) FROM json_each(page_stack_counts.by_stack) AS by_stack
            WHERE by_stack.key = args.stack ORDER BY by_stack.id DESC LIMIT 1
        ), 0) END AS in_stack
    FROM chosen
    CROSS JOIN args
    CROSS JOIN page_stack_counts ON page_stack_counts.tag_id = chosen.id
    WHERE args.stack != ''
),
-- Binaries per configuration and package. A page with all its binaries in the stack is read through
-- its specs, which a page has mostly numbered together and so are read close to in order. A page with only
-- some of them in the stack, or unknown, is read binary by binary: each binary's listing (its
-- configuration in a set of stacks) is kept when that set holds the stack (joined to the stack's sets, so
-- that SQLite builds no Bloom filter over every listing). A page with none is not read.
per_configuration AS (
    SELECT listings.configuration_id, checked_pages.package_id, count(*) AS specs
    FROM checked_pages
    CROSS JOIN page_specs ON page_specs.page_id = checked_pages.id
    CROSS JOIN listings ON listings.id = page_specs.listing_id
    CROSS JOIN in_stack ON in_stack.stack_set_id = listings.stack_set_id
    WHERE checked_pages.in_stack IS NULL OR checked_pages.in_stack BETWEEN 1 AND checked_pages.num_specs - 1
    GROUP BY listings.configuration_id
    UNION ALL
    SELECT specs.configuration_id, checked_pages.package_id, count(*) AS specs
    FROM checked_pages
    CROSS JOIN page_specs ON page_specs.page_id = checked_pages.id
    JOIN specs ON specs.id = page_specs.spec_id
    WHERE checked_pages.in_stack = checked_pages.num_specs AND checked_pages.num_specs > 0
    GROUP BY specs.configuration_id
),
per_cell AS (
    SELECT configurations.os_id, configurations.target_id, configurations.compiler_id,
        sum(per_configuration.specs) AS specs, count(DISTINCT per_configuration.package_id) AS packages
    FROM per_configuration
    JOIN configurations ON configurations.id = per_configuration.configuration_id
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
UNION ALL
-- A whole tag: the build counted its cells (tag_cells), from the same binaries.
SELECT tag_cells.os, tag_cells.target, tag_cells.compiler, tag_cells.binaries, tag_cells.packages, tag_cells.tag
FROM args
JOIN tag_cells ON tag_cells.tag = args.tag
WHERE args.stack = ''
ORDER BY 1, 2, 3
LIMIT (SELECT rows FROM row_limit)
