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
-- The tag's pages, each with its binaries per stack where its meta can be trusted (page_stack_counts).
checked_pages AS (
    SELECT page_stack_counts.id, page_stack_counts.package_id, page_stack_counts.by_stack
    FROM chosen
    CROSS JOIN args
    CROSS JOIN page_stack_counts ON page_stack_counts.tag_id = chosen.id
    WHERE args.package = ''
       OR page_stack_counts.package_id = (SELECT id FROM packages WHERE packages.name = args.package)
),
-- Binaries per stack and package: read from the meta where it can be trusted (a few rows per page
-- instead of one per binary), counted binary by binary elsewhere.
per_package AS (
    SELECT stacks.id AS stack_id, checked_pages.package_id, CAST(by_stack.value AS INTEGER) AS specs,
        max(by_stack.id) AS last
    FROM checked_pages
    CROSS JOIN json_each(coalesce(checked_pages.by_stack, '{}')) AS by_stack
    CROSS JOIN stacks ON stacks.name = by_stack.key
    WHERE checked_pages.by_stack IS NOT NULL
    GROUP BY checked_pages.id, stacks.id
    UNION ALL
    SELECT stack_set_members.stack_id, checked_pages.package_id, count(*) AS specs, NULL
    FROM checked_pages
    CROSS JOIN page_specs ON page_specs.page_id = checked_pages.id
    JOIN listings ON listings.id = page_specs.listing_id
    JOIN stack_set_members ON stack_set_members.stack_set_id = listings.stack_set_id
    WHERE checked_pages.by_stack IS NULL
    GROUP BY checked_pages.id, stack_set_members.stack_id
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
