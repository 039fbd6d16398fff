-- title: Dependencies of a binary
-- description: >-
--   What `spack install /<hash>` downloads: the binary and everything it needs to link and run,
--   transitively, each marked as in the tag's build cache or not (an external is installed outside
--   Spack, so never). Give a hash or its first 4 or more characters; the tag defaults to the newest tag
--   that has the binary. Dependencies come from build-cache indexes (pages do not have them).
-- params: [hash, tag]
-- button: Show what it needs
-- rows: [spec, specs]
WITH RECURSIVE args AS (
    SELECT lower(ltrim(trim(coalesce(:hash, '')), '/')) AS prefix, trim(coalesce(:tag, '')) AS tag
),
root AS (
    SELECT specs.id FROM args CROSS JOIN specs
    WHERE length(args.prefix) >= 4 AND specs.hash >= args.prefix AND specs.hash < args.prefix || '~'
    ORDER BY specs.hash
    LIMIT 1
),
chosen_tag AS (
    SELECT chosen.name, (SELECT id FROM tags WHERE tags.name = chosen.name) AS id
    FROM (
        SELECT coalesce(nullif((SELECT tag FROM args), ''), (
            SELECT tags.name FROM root
            CROSS JOIN spec_tags ON spec_tags.spec_id = root.id
            CROSS JOIN tags ON tags.id = spec_tags.tag_id
            ORDER BY tags.sort_order LIMIT 1
        )) AS name
    ) AS chosen
),
needed_kinds AS MATERIALIZED (SELECT id FROM dependency_kinds WHERE is_link OR is_run),
-- Each spec once (UNION), however many paths lead to it. Kinds are joined: a condition on the edges alone
-- could have SQLite read every edge first, to filter them.
needed(spec_id) AS (
    SELECT id FROM root
    UNION
    SELECT spec_dependencies.dependency_id
    FROM needed
    CROSS JOIN spec_dependencies ON spec_dependencies.spec_id = needed.spec_id
    CROSS JOIN needed_kinds ON needed_kinds.id = spec_dependencies.kind_id
),
-- The edges between them (build-only ones too), read from the specs that depend: a spec that thousands of
-- others depend on is not read through all of them.
needed_edges AS MATERIALIZED (
    SELECT spec_dependencies.spec_id, spec_dependencies.dependency_id, spec_dependencies.kind_id
    FROM needed AS dependent
    CROSS JOIN spec_dependencies ON spec_dependencies.spec_id = dependent.spec_id
    CROSS JOIN needed AS dependency ON dependency.spec_id = spec_dependencies.dependency_id
),
rows AS (
    SELECT
        packages.name AS package,
        versions.version,
        specs.hash,
        CASE
            WHEN specs.id = (SELECT id FROM root) THEN 'the binary asked for'
            ELSE (
                SELECT group_concat(DISTINCT dependent_packages.name || ' ('
                    || replace(replace(replace(kinds.deptypes, '["', ''), '"]', ''), '", "', ', ') || ')')
                FROM needed_edges AS edge
                CROSS JOIN dependency_kinds AS kinds ON kinds.id = edge.kind_id
                CROSS JOIN specs AS dependent ON dependent.id = edge.spec_id
                CROSS JOIN configurations AS dependent_configurations ON dependent_configurations.id = dependent.configuration_id
                CROSS JOIN versions AS dependent_versions ON dependent_versions.id = dependent_configurations.version_id
                CROSS JOIN packages AS dependent_packages ON dependent_packages.id = dependent_versions.package_id
                WHERE edge.dependency_id = specs.id
            )
        END AS required_by,
        CASE
            WHEN specs.external THEN 'no: an external, installed outside Spack'
            WHEN EXISTS (
                SELECT 1 FROM spec_tags
                WHERE spec_tags.spec_id = specs.id AND spec_tags.tag_id = (SELECT id FROM chosen_tag)
            ) THEN 'yes'
            ELSE 'no'
        END AS in_cache,
        (SELECT name FROM chosen_tag) AS tag,
        (SELECT spec FROM configuration_specs WHERE configuration_specs.configuration_id = specs.configuration_id) AS spec,
        specs.id = (SELECT id FROM root) AS is_root
    FROM needed
    CROSS JOIN specs ON specs.id = needed.spec_id
    CROSS JOIN configurations ON configurations.id = specs.configuration_id
    CROSS JOIN versions ON versions.id = configurations.version_id
    CROSS JOIN packages ON packages.id = versions.package_id
)
SELECT package, version, hash, required_by, in_cache, tag, spec
FROM (
    SELECT *, 1 AS found FROM rows
    UNION ALL
    SELECT NULL, NULL, NULL, no_dependencies, NULL, NULL, NULL, 0, 0
    FROM sentences WHERE NOT EXISTS (SELECT 1 FROM spec_dependencies)
)
ORDER BY found, is_root DESC, package, version, hash
