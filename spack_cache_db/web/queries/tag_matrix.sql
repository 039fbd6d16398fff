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
-- The build counted the cells of each tag (tag_cells) and of each stack in it (tag_stack_cells, by ids).
SELECT cells.os, cells.target, cells.compiler, cells.binaries AS specs, cells.packages, cells.tag
FROM args
JOIN tag_cells AS cells ON cells.tag = args.tag
WHERE args.stack = ''
UNION ALL
SELECT oss.name, targets.name, compilers.label, cells.binaries, cells.packages, tags.name
-- CROSS JOIN: the stack's cells first, then their names (where the tables of names are small, SQLite would
-- otherwise start from them and look up every combination of theirs).
FROM args
CROSS JOIN tags ON tags.name = args.tag
CROSS JOIN tag_stack_cells AS cells ON cells.tag_id = tags.id AND cells.stack = args.stack
JOIN oss ON oss.id = cells.os_id
JOIN targets ON targets.id = cells.target_id
JOIN compilers ON compilers.id = cells.compiler_id
WHERE args.stack != ''
ORDER BY 1, 2, 3
LIMIT (SELECT rows FROM row_limit)
