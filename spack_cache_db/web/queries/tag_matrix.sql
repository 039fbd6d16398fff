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
row_limit AS (SELECT 1000 AS rows)
-- The build counted the cells of each tag (tag_cells) and of each stack in it (tag_stack_cells).
SELECT cells.os, cells.target, cells.compiler, cells.binaries AS specs, cells.packages, cells.tag
FROM args
JOIN tag_cells AS cells ON cells.tag = args.tag
WHERE args.stack = ''
UNION ALL
SELECT cells.os, cells.target, cells.compiler, cells.binaries, cells.packages, cells.tag
FROM args
JOIN tag_stack_cells AS cells ON cells.tag = args.tag AND cells.stack = args.stack
WHERE args.stack != ''
ORDER BY 1, 2, 3
LIMIT (SELECT rows FROM row_limit)
