-- title: Binaries that link against a library
-- description: >-
--   Which binaries of a tag link against a package (any of its builds the tag has), or against one binary
--   given by its hash (or its first 4 or more characters), directly or through other binaries of the tag.
--   "directly" says whether the binary names it among its own link dependencies. The tag defaults to
--   develop (or the newest tag). At most 1,000 rows, the first in the order shown. Dependencies come
--   from build-cache indexes (pages do not have them).
-- params: [package, hash, tag]
-- button: Find the binaries that link against it
-- rows: [binary, binaries]
WITH RECURSIVE args AS (
    SELECT
        lower(trim(coalesce(:package, ''))) AS package,
        lower(ltrim(trim(coalesce(:hash, '')), '/')) AS prefix,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (SELECT name FROM default_tag)) AS tag
),
chosen_tag AS (SELECT tags.id, tags.name, tags.mirror_url FROM args CROSS JOIN tags ON tags.name = args.tag),
link_kinds AS (SELECT id FROM dependency_kinds WHERE is_link),
-- Without edges (a database built from pages) nothing depends on anything: nothing is looked for.
has_edges AS MATERIALIZED (SELECT EXISTS (SELECT 1 FROM spec_dependencies) AS yes),
-- What is asked about: the specs the hash prefix names, and the package's specs that the tag has: its
-- binaries there (read from its page in the tag, not from every spec of the package) and specs no page
-- lists, such as externals (one index lookup per spec of the package).
targets AS (
    SELECT specs.id FROM has_edges CROSS JOIN args CROSS JOIN specs
    WHERE has_edges.yes AND length(args.prefix) >= 4 AND specs.hash >= args.prefix AND specs.hash < args.prefix || '~'
    UNION
    SELECT page_specs.spec_id FROM has_edges
    CROSS JOIN args
    CROSS JOIN chosen_tag
    CROSS JOIN packages ON packages.name = args.package
    CROSS JOIN pages ON pages.tag_id = chosen_tag.id AND pages.package_id = packages.id
    CROSS JOIN page_specs ON page_specs.page_id = pages.id
    WHERE has_edges.yes
    UNION
    SELECT specs.id FROM has_edges CROSS JOIN specs
    WHERE has_edges.yes AND specs.configuration_id IN (
        SELECT configurations.id FROM args
        CROSS JOIN packages ON packages.name = args.package
        CROSS JOIN versions ON versions.package_id = packages.id
        CROSS JOIN configurations ON configurations.version_id = versions.id
    )
    AND NOT EXISTS (SELECT 1 FROM page_specs WHERE page_specs.spec_id = specs.id)
),
-- Their link edges are searched kind by kind: a compiler has millions of build edges, and none links.
target_kinds AS MATERIALIZED (SELECT targets.id, link_kinds.id FROM targets CROSS JOIN link_kinds),
-- The tag's binaries in the order the answer lists them, read one package at a time through the packages'
-- name index, so that a LIMIT stops the reading.
binaries_in_order AS NOT MATERIALIZED (
    SELECT
        page_specs.spec_id,
        page_specs.listing_id,
        packages.name AS package,
        versions.version,
        versions.version_rank,
        specs.hash,
        specs.configuration_id
    FROM packages
    CROSS JOIN pages ON pages.tag_id = (SELECT id FROM chosen_tag) AND pages.package_id = packages.id
    CROSS JOIN page_specs ON page_specs.page_id = pages.id
    CROSS JOIN specs ON specs.id = page_specs.spec_id
    CROSS JOIN configurations ON configurations.id = specs.configuration_id
    CROSS JOIN versions ON versions.id = configurations.version_id
    WHERE packages.name >= ''
    ORDER BY packages.name, versions.version_rank DESC, specs.hash
),
-- The dependents are walked up from the targets, each once (UNION), through the tag's binaries: a step
-- starts from a spec of the tag (checked there: a condition on the edges alone would have SQLite read every
-- edge first, to filter them). First at most 3,000 of them, nearest first: all there are, for most packages.
direct AS NOT MATERIALIZED (
    SELECT edges.spec_id FROM spec_dependencies AS edges
    WHERE (edges.dependency_id, edges.kind_id) IN target_kinds
      AND EXISTS (
          SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = edges.spec_id AND spec_tags.tag_id = (SELECT id FROM chosen_tag)
      )
),
nearest(spec_id) AS (
    SELECT spec_id FROM (SELECT spec_id FROM direct LIMIT 3000)
    UNION
    SELECT edges.spec_id FROM nearest
    CROSS JOIN link_edges AS edges ON edges.dependency_id = nearest.spec_id
    WHERE EXISTS (SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = nearest.spec_id AND spec_tags.tag_id = (SELECT id FROM chosen_tag))
    LIMIT 3000
),
all_nearest AS MATERIALIZED (SELECT count(*) < 3000 AS yes FROM nearest),
-- More: most of the tag's first binaries may be among them. The first 3,000 are followed down their link
-- edges, each spec once, through the tag's binaries; those that reach a target are dependents, and when
-- 1,000 of them are (or these are all the tag has), they are the answer's rows.
first_binaries AS (
    SELECT spec_id FROM binaries_in_order LIMIT (SELECT CASE WHEN yes THEN 0 ELSE 3000 END FROM all_nearest)
),
-- Those that link against a target themselves are dependents whatever lies below them: they are not followed
-- down. Looking at a binary's edges for a target costs about what following it down one step does, so they
-- are looked for when at least a third of the first 100 are such (as of the most depended-on libraries).
first_linking AS NOT MATERIALIZED (
    SELECT spec_id, EXISTS (
        SELECT 1 FROM spec_dependencies AS edges
        WHERE edges.spec_id = first_binaries.spec_id AND +edges.kind_id IN link_kinds AND +edges.dependency_id IN targets
    ) AS directly
    FROM first_binaries
),
linking_often AS MATERIALIZED (
    SELECT sum(directly) * 3 >= count(*) AS yes FROM (SELECT directly FROM first_linking LIMIT 100)
),
first_direct AS MATERIALIZED (
    SELECT spec_id FROM linking_often CROSS JOIN first_linking WHERE linking_often.yes AND first_linking.directly
),
below(id) AS (
    SELECT spec_id FROM first_binaries WHERE spec_id NOT IN first_direct
    UNION
    SELECT edges.dependency_id FROM below
    CROSS JOIN link_edges AS edges ON edges.spec_id = below.id
    WHERE EXISTS (SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = below.id AND spec_tags.tag_id = (SELECT id FROM chosen_tag))
),
below_edges AS (
    SELECT edges.spec_id, edges.dependency_id FROM below
    CROSS JOIN link_edges AS edges ON edges.spec_id = below.id
    WHERE EXISTS (SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = below.id AND spec_tags.tag_id = (SELECT id FROM chosen_tag))
),
reaching(spec_id) AS (
    SELECT spec_id FROM first_direct
    UNION
    SELECT spec_id FROM below_edges WHERE dependency_id IN targets
    UNION
    SELECT below_edges.spec_id FROM reaching CROSS JOIN below_edges ON below_edges.dependency_id = reaching.spec_id
),
enough_below AS MATERIALIZED (
    SELECT count(*) > 0 AND (count(*) < 3000 OR sum(spec_id IN reaching) >= 1000) AS yes FROM first_binaries
),
-- Otherwise all of them. (A condition on a one-row table first in a join, like a LIMIT of 0, is checked
-- once, before the rest is read.)
walked(spec_id) AS (
    SELECT direct.spec_id FROM all_nearest CROSS JOIN enough_below CROSS JOIN direct
    WHERE NOT all_nearest.yes AND NOT enough_below.yes
    UNION
    SELECT edges.spec_id FROM walked
    CROSS JOIN link_edges AS edges ON edges.dependency_id = walked.spec_id
    WHERE EXISTS (SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = walked.spec_id AND spec_tags.tag_id = (SELECT id FROM chosen_tag))
),
dependents AS MATERIALIZED (
    SELECT nearest.spec_id FROM all_nearest CROSS JOIN nearest WHERE all_nearest.yes
    UNION ALL
    SELECT reaching.spec_id FROM enough_below CROSS JOIN reaching WHERE enough_below.yes
    UNION ALL
    SELECT spec_id FROM walked
),
-- The first 1,000 in order: picked out of the tag's binaries read in order when dependents are many of
-- them (the reading soon stops), else each dependent the tag lists is looked up and they are sorted.
picking AS MATERIALIZED (
    SELECT enough_below.yes OR (SELECT count(*) FROM dependents) > 10000 AS in_order FROM enough_below
),
shown AS (
    SELECT * FROM binaries_in_order WHERE +spec_id IN dependents
    LIMIT (SELECT CASE WHEN in_order THEN 1000 ELSE 0 END FROM picking)
),
few_shown AS (
    SELECT
        page_specs.spec_id,
        page_specs.listing_id,
        packages.name AS package,
        versions.version,
        versions.version_rank,
        specs.hash,
        specs.configuration_id
    FROM chosen_tag
    CROSS JOIN dependents
    CROSS JOIN page_specs ON page_specs.spec_id = dependents.spec_id
    CROSS JOIN pages ON pages.id = page_specs.page_id AND pages.tag_id = chosen_tag.id
    CROSS JOIN packages ON packages.id = pages.package_id
    CROSS JOIN specs ON specs.id = page_specs.spec_id
    CROSS JOIN configurations ON configurations.id = specs.configuration_id
    CROSS JOIN versions ON versions.id = configurations.version_id
    ORDER BY packages.name, versions.version_rank DESC, specs.hash
    LIMIT (SELECT CASE WHEN in_order THEN 0 ELSE 1000 END FROM picking)
),
found AS (
    SELECT
        shown.package,
        shown.version,
        shown.version_rank,
        shown.hash,
        CASE WHEN EXISTS (
            SELECT 1 FROM spec_dependencies AS edges
            WHERE edges.spec_id = shown.spec_id AND +edges.kind_id IN link_kinds AND +edges.dependency_id IN targets
        ) THEN 'yes' ELSE 'no' END AS directly,
        (SELECT spec FROM configuration_specs WHERE configuration_specs.configuration_id = shown.configuration_id) AS spec,
        (SELECT stacks FROM listings JOIN stack_sets ON stack_sets.id = listings.stack_set_id WHERE listings.id = shown.listing_id)
            AS stacks,
        chosen_tag.name AS tag,
        chosen_tag.mirror_url
    FROM (SELECT * FROM shown UNION ALL SELECT * FROM few_shown) AS shown
    CROSS JOIN chosen_tag
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
    WHERE NOT (SELECT yes FROM has_edges)
)
ORDER BY found_rows DESC, package, version_rank DESC, hash
