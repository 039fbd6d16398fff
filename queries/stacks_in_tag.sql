-- title: Stacks of a tag
-- description: >-
--   Every stack (CI pipeline) of a tag with how many packages and binaries it has, and its mirror.
--   Stacks that _data/tags.yaml declares for the tag but that have no binaries show 0. root is the
--   tag's top-level mirror, the union of all stacks. Tag defaults to develop (or the newest tag).
-- params: [tag]
-- chart: tag-overview
WITH args AS (
    SELECT coalesce(nullif(trim(coalesce(:tag, '')), ''), (
        SELECT name FROM tags WHERE EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id)
        ORDER BY sort_order LIMIT 1
    )) AS tag
),
chosen AS (SELECT tags.* FROM tags, args WHERE tags.name = args.tag),
-- Count per stack set first: a tag has few distinct stack sets, but many binaries.
per_stack_set AS (
    SELECT listings.stack_set_id, pages.package_id, count(*) AS specs
    FROM chosen
    CROSS JOIN pages ON pages.tag_id = chosen.id
    JOIN page_specs ON page_specs.page_id = pages.id
    JOIN listings ON listings.id = page_specs.listing_id
    GROUP BY listings.stack_set_id, pages.package_id
),
per_stack AS (
    SELECT stack_set_members.stack_id, count(DISTINCT per_stack_set.package_id) AS packages,
        sum(per_stack_set.specs) AS specs
    FROM per_stack_set
    JOIN stack_set_members ON stack_set_members.stack_set_id = per_stack_set.stack_set_id
    GROUP BY stack_set_members.stack_id
),
stacks_of_tag AS (
    SELECT stack_id FROM per_stack
    UNION
    SELECT tag_stacks.stack_id FROM chosen JOIN tag_stacks ON tag_stacks.tag_id = chosen.id
)
SELECT
    stacks.name AS stack,
    coalesce(per_stack.packages, 0) AS packages,
    coalesce(per_stack.specs, 0) AS specs,
    chosen.mirror_url || CASE WHEN stacks.name = 'root' THEN '' ELSE '/' || stacks.name END AS mirror_url,
    chosen.name AS tag,
    '[packages](/cache/stack_packages?tag=' || chosen.name || '&stack=' || stacks.name || ')' AS links
FROM chosen, stacks_of_tag
JOIN stacks ON stacks.id = stacks_of_tag.stack_id
LEFT JOIN per_stack ON per_stack.stack_id = stacks_of_tag.stack_id
ORDER BY stacks.name = 'root' DESC, specs DESC, stacks.name
