-- title: Binaries that run on my CPU
-- description: >-
--   Binaries in one tag that a host of the given microarchitecture (skylake_avx512, zen3,
--   neoverse_v2, m1, ...) can run: those built for the host itself or for any of its ancestors in
--   archspec's microarchitecture graph (the runs_on table). Binaries tuned most closely to the host
--   come first. Run `spack arch -t` on the host to learn its name; the microarchitectures table lists
--   every known name; give the platform (linux, darwin) and the operating system of the host too.
--   Empty fields do not filter; tag defaults to develop (or the newest tag). At most 1,000 rows for a
--   package, 100 without.
-- params: [host, package, platform, os, tag]
-- button: Find binaries for this CPU
-- rows: [binary, binaries]
WITH args AS (
    SELECT
        lower(trim(coalesce(:host, ''))) AS host,
        lower(trim(coalesce(:package, ''))) AS package,
        lower(trim(coalesce(:platform, ''))) AS platform,
        trim(coalesce(:os, '')) AS os,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (
            SELECT name FROM tags WHERE EXISTS (SELECT 1 FROM pages WHERE pages.tag_id = tags.id)
            ORDER BY sort_order LIMIT 1
        )) AS tag
),
runnable AS (
    -- A target with more ancestors is more specific: binaries built for it are tuned closer to the host.
    SELECT targets.id, (SELECT count(*) FROM runs_on AS depth WHERE depth.host = runs_on.target) AS specificity
    FROM args
    JOIN runs_on ON runs_on.host = args.host
    JOIN targets ON targets.name = runs_on.target
)
SELECT
    packages.name AS package,
    versions.version,
    targets.name AS target,
    oss.name AS os,
    compilers.label AS compiler,
    (SELECT spec FROM configuration_specs WHERE configuration_specs.configuration_id = configurations.id) AS spec,
    specs.hash,
    stack_sets.stacks,
    'spack mirror add ' || tags.name || ' ' || tags.mirror_url || char(10)
        || 'spack buildcache keys --install --trust' || char(10)
        || 'spack install --use-buildcache only /' || specs.hash AS install,
    tags.name AS tag
FROM args
JOIN tags ON tags.name = args.tag
JOIN pages ON pages.tag_id = tags.id
JOIN packages ON packages.id = pages.package_id
JOIN page_specs ON page_specs.page_id = pages.id
JOIN specs ON specs.id = page_specs.spec_id
JOIN configurations ON configurations.id = specs.configuration_id
JOIN versions ON versions.id = configurations.version_id
JOIN compilers ON compilers.id = configurations.compiler_id
JOIN oss ON oss.id = configurations.os_id
JOIN platforms ON platforms.id = configurations.platform_id
JOIN targets ON targets.id = configurations.target_id
JOIN listings ON listings.id = page_specs.listing_id
JOIN stack_sets ON stack_sets.id = listings.stack_set_id
LEFT JOIN runnable ON runnable.id = configurations.target_id
WHERE (args.host = '' OR runnable.id IS NOT NULL)
  AND (args.package = '' OR packages.name = args.package)
  AND (args.platform = '' OR platforms.name = args.platform)
  AND (args.os = '' OR oss.name = args.os)
ORDER BY packages.name, versions.version_rank DESC, runnable.specificity DESC, targets.name, oss.name,
    compilers.label, specs.hash
LIMIT (SELECT CASE WHEN package = '' THEN 100 ELSE 1000 END FROM args)
