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
found AS (
    SELECT specs.id, specs.hash, specs.configuration_id
    FROM args
    CROSS JOIN specs
    WHERE length(args.prefix) >= 4 AND specs.hash >= args.prefix AND specs.hash < args.prefix || '~'
    ORDER BY specs.hash
    LIMIT 100
),
appearances AS (
    SELECT found.id AS spec_id, tags.name AS tag, tags.mirror_url, tags.sort_order, stack_sets.stacks
    FROM found
    JOIN page_specs ON page_specs.spec_id = found.id
    JOIN pages ON pages.id = page_specs.page_id
    JOIN tags ON tags.id = pages.tag_id
    JOIN listings ON listings.id = page_specs.listing_id
    JOIN stack_sets ON stack_sets.id = listings.stack_set_id
),
-- Window functions, unlike GROUP BY, promise the order the tags are listed in (newest first).
per_spec AS (
    SELECT
        spec_id,
        json_group_array(tag) OVER tag_order AS tags,
        first_value(stacks) OVER tag_order AS stacks,
        first_value(tag) OVER tag_order AS newest_tag,
        first_value(mirror_url) OVER tag_order AS newest_mirror_url,
        row_number() OVER tag_order AS n
    FROM appearances
    WINDOW tag_order AS (
        PARTITION BY spec_id ORDER BY sort_order ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
    )
)
SELECT
    found.hash,
    packages.name AS package,
    versions.version,
    (SELECT spec FROM configuration_specs WHERE configuration_specs.configuration_id = configurations.id) AS spec,
    per_spec.tags,
    per_spec.stacks,
    'spack mirror add ' || per_spec.newest_tag || ' ' || per_spec.newest_mirror_url || char(10)
        || 'spack buildcache keys --install --trust' || char(10)
        || 'spack install --use-buildcache only /' || found.hash AS install,
    -- Its direct dependencies (from build-cache indexes), and the whole tree one click away.
    (
        SELECT group_concat(dependency || '@' || dependency_version || ' (' || kinds, '; ')
        FROM (
            SELECT dependency_packages.name AS dependency, dependency_versions.version AS dependency_version,
                replace(replace(replace(dependency_kinds.deptypes, '["', ''), '"]', ''), '", "', ', ')
                    || CASE WHEN dependency_specs.external THEN ', external)' ELSE ')' END AS kinds
            FROM spec_dependencies
            JOIN dependency_kinds ON dependency_kinds.id = spec_dependencies.kind_id
            JOIN specs AS dependency_specs ON dependency_specs.id = spec_dependencies.dependency_id
            JOIN configurations AS dependency_configurations
                ON dependency_configurations.id = dependency_specs.configuration_id
            JOIN versions AS dependency_versions ON dependency_versions.id = dependency_configurations.version_id
            JOIN packages AS dependency_packages ON dependency_packages.id = dependency_versions.package_id
            WHERE spec_dependencies.spec_id = found.id
            ORDER BY dependency_packages.name
        )
    ) AS dependencies,
    CASE WHEN EXISTS (SELECT 1 FROM spec_dependencies WHERE spec_id = found.id)
        THEN '[dependency tree](/cache/dependency_tree?hash=' || found.hash || ')' END AS links
FROM found
JOIN per_spec ON per_spec.spec_id = found.id AND per_spec.n = 1
JOIN configurations ON configurations.id = found.configuration_id
JOIN versions ON versions.id = configurations.version_id
JOIN packages ON packages.id = versions.package_id
ORDER BY found.hash
