-- title: Binaries that link against a library
-- description: >-
--   Which binaries of a tag link against a package (any of its binaries), or against one binary given
--   by its hash (or its first 4 or more characters), directly or through other libraries. "directly"
--   says whether the binary names it among its own link dependencies. The tag defaults to develop (or
--   the newest tag). At most 1,000 rows. Dependencies come from build-cache indexes (pages do not
--   have them).
-- params: [package, hash, tag]
-- button: Find the binaries that link against it
-- rows: [binary, binaries]
WITH RECURSIVE args AS (
    SELECT
        lower(trim(coalesce(:package, ''))) AS package,
        lower(ltrim(trim(coalesce(:hash, '')), '/')) AS prefix,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (SELECT name FROM default_tag)) AS tag
),
targets AS (
    SELECT specs.id FROM args CROSS JOIN specs
    WHERE length(args.prefix) >= 4 AND specs.hash >= args.prefix AND specs.hash < args.prefix || '~'
    UNION
    SELECT specs.id FROM args
    JOIN packages ON packages.name = args.package
    JOIN versions ON versions.package_id = packages.id
    JOIN configurations ON configurations.version_id = versions.id
    JOIN specs ON specs.configuration_id = configurations.id
),
link_edges AS (
    SELECT spec_dependencies.spec_id, spec_dependencies.dependency_id
    FROM spec_dependencies
    JOIN dependency_kinds ON dependency_kinds.id = spec_dependencies.kind_id
    WHERE EXISTS (SELECT 1 FROM json_each(dependency_kinds.deptypes) WHERE value = 'link')
),
-- Each dependent once (UNION), however many paths lead to it.
dependents(spec_id) AS (
    SELECT link_edges.spec_id FROM link_edges WHERE link_edges.dependency_id IN (SELECT id FROM targets)
    UNION
    SELECT link_edges.spec_id FROM dependents JOIN link_edges ON link_edges.dependency_id = dependents.spec_id
),
found AS (
    SELECT
        packages.name AS package,
        versions.version,
        versions.version_rank,
        specs.hash,
        CASE WHEN EXISTS (
            SELECT 1 FROM link_edges
            WHERE link_edges.spec_id = specs.id AND link_edges.dependency_id IN (SELECT id FROM targets)
        ) THEN 'yes' ELSE 'no' END AS directly,
        (SELECT spec FROM configuration_specs WHERE configuration_specs.configuration_id = specs.configuration_id) AS spec,
        stack_sets.stacks,
        tags.name AS tag,
        tags.mirror_url
    FROM dependents
    CROSS JOIN args
    CROSS JOIN tags ON tags.name = args.tag
    CROSS JOIN page_specs ON page_specs.spec_id = dependents.spec_id
    CROSS JOIN pages ON pages.id = page_specs.page_id AND pages.tag_id = tags.id
    JOIN specs ON specs.id = page_specs.spec_id
    JOIN packages ON packages.id = pages.package_id
    JOIN configurations ON configurations.id = specs.configuration_id
    JOIN versions ON versions.id = configurations.version_id
    JOIN listings ON listings.id = page_specs.listing_id
    JOIN stack_sets ON stack_sets.id = listings.stack_set_id
    ORDER BY packages.name, versions.version_rank DESC, specs.hash
    LIMIT 1000
)
SELECT package, version, hash, directly, spec, stacks,
    'spack mirror add ' || tag || ' ' || mirror_url || char(10)
        || 'spack buildcache keys --install --trust' || char(10)
        || 'spack install --use-buildcache only /' || hash AS install,
    tag
FROM (
    SELECT *, 1 AS found_rows FROM found
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL,
        'This database has no dependencies: they come from build-cache indexes (build from a'
        || ' cache_spack_io_index.json or a mirror); cache.spack.io pages do not list them.',
        NULL, NULL, NULL, 0
    WHERE NOT EXISTS (SELECT 1 FROM spec_dependencies)
)
ORDER BY found_rows DESC, package, version_rank DESC, hash
