-- title: Look up a hash
-- description: >-
--   Which binary a hash (or the first 4 or more characters of one, as in `spack install /abcd`)
--   belongs to: its package and spec, the tags that have it (newest first), its stacks in the newest
--   of those tags and the commands that install it from there. Fewer than 4 characters find
--   nothing. At most 100 hashes. Its dependencies come from build-cache indexes (pages do not have them).
-- params: [hash]
-- button: Look it up
-- rows: [binary, binaries]
WITH args AS (
    SELECT lower(ltrim(trim(coalesce(:hash, '')), '/')) AS prefix
),
row_limit AS (SELECT 100 AS rows),
found AS (
    SELECT specs.id, specs.hash, specs.configuration_id
    FROM args
    CROSS JOIN specs
    WHERE length(args.prefix) >= 4 AND specs.hash >= args.prefix AND specs.hash < args.prefix || '~'
    ORDER BY specs.hash
    LIMIT (SELECT rows FROM row_limit)
),
appearances AS (
    SELECT found.id AS spec_id, binaries.tag, binaries.tag_order, binaries.stacks, binaries.install
    FROM found
    JOIN binaries ON binaries.hash = found.hash
),
per_spec AS (
    SELECT
        spec_id,
        json_group_array(tag) OVER tag_order AS tags,
        first_value(stacks) OVER tag_order AS stacks,
        first_value(install) OVER tag_order AS install,
        row_number() OVER tag_order AS n
    FROM appearances
    WINDOW tag_order AS (
        PARTITION BY spec_id ORDER BY tag_order ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
    )
)
SELECT
    found.hash,
    configuration_specs.package,
    configuration_specs.version,
    configuration_specs.spec,
    per_spec.tags,
    per_spec.stacks,
    per_spec.install,
    -- Its direct dependencies (from build-cache indexes), and the whole tree one click away.
    (
        SELECT group_concat(dependency || '@' || dependency_version || ' ('
            || replace(replace(replace(deptypes, '["', ''), '"]', ''), '", "', ', ')
            || CASE WHEN external THEN ', external)' ELSE ')' END, '; ')
        FROM (SELECT * FROM dependencies WHERE dependencies.spec_id = found.id ORDER BY dependency)
    ) AS dependencies,
    CASE WHEN EXISTS (SELECT 1 FROM spec_dependencies WHERE spec_id = found.id)
        THEN '[dependency tree](dependency_tree?hash=' || found.hash || ')' END AS links
FROM found
JOIN per_spec ON per_spec.spec_id = found.id AND per_spec.n = 1
JOIN configuration_specs ON configuration_specs.configuration_id = found.configuration_id
ORDER BY found.hash
