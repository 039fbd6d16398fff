-- title: Stacks of a tag
-- description: >-
--   Every stack (CI pipeline) of a tag with how many packages and binaries it has, and its mirror.
--   Stacks that _data/tags.yaml declares for the tag but that have no binaries show 0. root is the
--   tag's top-level mirror, the union of all stacks. With a package: the stacks that built it, and
--   how many of its binaries each has. Tag defaults to develop (or the newest tag).
-- params: [tag, package]
-- button: Show the stacks
-- rows: [stack, stacks]
-- chart: tag-overview
WITH args AS (
    SELECT coalesce(nullif(trim(coalesce(:tag, '')), ''), (SELECT name FROM default_tag)) AS tag,
    lower(trim(coalesce(:package, ''))) AS package
),
chosen AS (SELECT tags.* FROM tags, args WHERE tags.name = args.tag),
-- Binaries per stack and package: a few rows per page (page_stacks), not one per binary.
per_package AS (
    SELECT page_stacks.stack_id, pages.package_id, page_stacks.binaries AS specs
    FROM chosen
    CROSS JOIN args
    CROSS JOIN pages ON pages.tag_id = chosen.id
    CROSS JOIN page_stacks ON page_stacks.page_id = pages.id
    WHERE args.package = '' OR pages.package_id = (SELECT id FROM packages WHERE packages.name = args.package)
),
per_stack AS (
    SELECT stack_id, count(*) AS packages, sum(specs) AS specs
    FROM per_package
    GROUP BY stack_id
),
stacks_of_tag AS (
    SELECT stack_id FROM per_stack
    UNION
    SELECT tag_stacks.stack_id FROM chosen JOIN tag_stacks ON tag_stacks.tag_id = chosen.id
    WHERE (SELECT package FROM args) = ''
)
SELECT
    stacks.name AS stack,
    coalesce(per_stack.packages, 0) AS packages,
    coalesce(per_stack.specs, 0) AS specs,
    chosen.mirror_url || CASE WHEN stacks.name = 'root' THEN '' ELSE '/' || stacks.name END AS mirror_url,
    chosen.name AS tag,
    -- A link relative to this page's address; of the characters a tag's or a stack's name may hold, only
    -- + means something else in a URL.
    '[packages](stack_packages?tag=' || replace(chosen.name, '+', '%2B') || '&stack='
        || replace(stacks.name, '+', '%2B') || ')' AS links
FROM chosen, stacks_of_tag
JOIN stacks ON stacks.id = stacks_of_tag.stack_id
LEFT JOIN per_stack ON per_stack.stack_id = stacks_of_tag.stack_id
ORDER BY stacks.name = 'root' DESC, specs DESC, stacks.name
