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
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (SELECT name FROM default_tag)) AS tag
),
row_limit AS (SELECT CASE WHEN package = '' THEN 100 ELSE 1000 END AS rows FROM args),
runnable AS (
    -- A target with more ancestors is more specific: binaries built for it are tuned closer to the host.
    SELECT runs_on.target, (SELECT count(*) FROM runs_on AS depth WHERE depth.host = runs_on.target) AS specificity
    FROM args
    JOIN runs_on ON runs_on.host = args.host
)
SELECT
    binaries.package,
    binaries.version,
    binaries.target,
    binaries.os,
    binaries.compiler,
    binaries.spec,
    binaries.hash,
    binaries.stacks,
    binaries.install,
    binaries.tag
FROM args
JOIN binaries ON binaries.tag = args.tag
LEFT JOIN runnable ON runnable.target = binaries.target
WHERE (args.host = '' OR runnable.target IS NOT NULL)
  AND (args.package = '' OR binaries.package = args.package)
  AND (args.platform = '' OR binaries.platform = args.platform)
  AND (args.os = '' OR binaries.os = args.os)
ORDER BY binaries.package, binaries.version_rank DESC, runnable.specificity DESC, binaries.target, binaries.os,
    binaries.compiler, binaries.hash
LIMIT (SELECT rows FROM row_limit)
