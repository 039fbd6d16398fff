-- title: Search binaries
-- description: >-
--   Full-text search over the binaries of a tag: package, version, compiler, os, platform, target,
--   variants and stacks (for example: hdf5 mpi, cuda_arch=80, neoverse_v2 gcc, e4s-oneapi). Every
--   word has to match; any text is safe to type. Words, not a spec: +mpi and ~mpi both match mpi
--   (Find binaries reads a spec). An empty search lists the whole tag. Tag defaults to develop (or
--   the newest tag). At most 1,000 rows, 100 for an empty search.
-- params: [q, tag]
-- button: Search
-- rows: [binary, binaries]
WITH args AS (
    SELECT
        substr(trim(coalesce(:q, '')), 1, 500) AS q,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (SELECT name FROM default_tag)) AS tag
),
row_limit AS (SELECT CASE WHEN q = '' THEN 100 ELSE 1000 END AS rows FROM args),
hits AS NOT MATERIALIZED (
    SELECT listings_fts.rowid AS listing_id
    FROM args, listings_fts
    WHERE args.q <> '' AND listings_fts MATCH coalesce(nullif(escape_fts(args.q), ''), '""')
),
-- A few hits are read one by one; many (or an empty search) are read with the tag's binaries, package by
-- package in name order, so that the limit stops the reading early.
narrow(yes) AS (
    SELECT args.q <> '' AND (SELECT count(*) FROM (SELECT 1 FROM hits LIMIT 2001)) <= 2000 FROM args
),
found AS (
    SELECT binaries.*
    FROM narrow
    CROSS JOIN args
    CROSS JOIN hits
    CROSS JOIN binaries ON binaries.listing_id = hits.listing_id
    WHERE narrow.yes AND binaries.tag = args.tag
    UNION ALL
    SELECT * FROM (
        SELECT binaries.*
        FROM packages
        CROSS JOIN args
        CROSS JOIN binaries ON binaries.package = packages.name
        WHERE NOT (SELECT yes FROM narrow) AND packages.name >= '' AND binaries.tag = args.tag
          AND (args.q = '' OR binaries.listing_id IN (SELECT listing_id FROM hits))
        ORDER BY packages.name, binaries.version_rank DESC, binaries.spec, binaries.hash
        LIMIT (SELECT rows FROM row_limit)
    )
)
SELECT package, version, spec, hash, stacks, install, tag
FROM found
ORDER BY package, version_rank DESC, spec, hash
LIMIT (SELECT rows FROM row_limit)
