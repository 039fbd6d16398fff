-- title: Binaries that link against a library
-- description: >-
--   Which binaries of a tag link against a package (any of its builds the tag has), or against one binary
--   given by its hash (or its first 4 or more characters), directly or through other binaries of the tag.
--   "directly" says whether the binary names it among its own link dependencies. The tag defaults to
--   develop (or the newest tag). At most 250 rows, the first in the order shown; the next 250 are those
--   after the last one shown (after: its hash, which the link under the answer gives). Dependencies come
--   from build-cache indexes (pages do not have them).
-- params: [package, hash, tag, after]
-- button: Find the binaries that link against it
-- rows: [binary, binaries]
-- next_page: {after: hash}
WITH RECURSIVE args AS (
    SELECT
        lower(trim(coalesce(:package, ''))) AS package,
        lower(ltrim(trim(coalesce(:hash, '')), '/')) AS prefix,
        coalesce(nullif(trim(coalesce(:tag, '')), ''), (SELECT name FROM default_tag)) AS tag
),
chosen_tag AS (SELECT tags.id, tags.name, tags.mirror_url FROM args CROSS JOIN tags ON tags.name = args.tag),
-- The most binaries the answer lists (the first in its order).
row_limit AS (SELECT 250 AS rows),
-- Where the answer starts in its order (package, version_rank descending, hash): after the binary whose hash
-- is :after; at the start ('' comes before every name) without one; nowhere (NULL) for a hash there is not.
after_binary AS MATERIALIZED (
    SELECT
        CASE WHEN given.hash = '' THEN '' ELSE packages.name END AS package,
        versions.version_rank,
        specs.hash
    FROM (SELECT lower(ltrim(trim(coalesce(:after, '')), '/')) AS hash) AS given
    LEFT JOIN specs ON specs.hash = given.hash
    LEFT JOIN configurations ON configurations.id = specs.configuration_id
    LEFT JOIN versions ON versions.id = configurations.version_id
    LEFT JOIN packages ON packages.id = versions.package_id
),
link_kinds AS (SELECT id FROM dependency_kinds WHERE is_link),
-- Without edges (a database built from pages) nothing depends on anything: nothing is looked for.
has_edges AS MATERIALIZED (SELECT EXISTS (SELECT 1 FROM spec_dependencies) AS yes),
-- What is asked about: the specs the hash prefix names, and the package's specs that the tag has: its
-- binaries there (read from its page in the tag, not from every spec of the package) and the specs the tag's
-- indexes give as dependencies only, such as externals (dependency_only_specs, by configuration and tag; the
-- tag read from tags by name: one more use of chosen_tag would copy it into every use of targets), but not
-- those another tag lists as binaries: their edges hold that tag's dependents too, which would be read and
-- passed over (py-wysy in the history: 97 ms instead of 21). A binary of this tag that links against such a
-- spec and no other target is not found, as before this table. The table is looked up by key from a list (IN):
-- joined to it, SQLite may first build a Bloom filter by reading all of it (15 ms in the history).
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
    SELECT dependency_only_specs.spec_id FROM dependency_only_specs
    WHERE (dependency_only_specs.configuration_id, dependency_only_specs.tag_id) IN (
        SELECT configurations.id, tags.id FROM has_edges
        CROSS JOIN args
        CROSS JOIN tags ON tags.name = args.tag
        CROSS JOIN packages ON packages.name = args.package
        CROSS JOIN versions ON versions.package_id = packages.id
        CROSS JOIN configurations ON configurations.version_id = versions.id
        WHERE has_edges.yes
    )
      AND NOT EXISTS (SELECT 1 FROM page_specs WHERE page_specs.spec_id = dependency_only_specs.spec_id)
),
-- Their link edges are searched kind by kind: a compiler has millions of build edges, and none links. Only
-- those of a target that is a dependency at all: most binaries of a package are none (muka's in develop of the
-- history from indexes: 333 of 2,502, whose 42,534 lookups took 62 ms; now 2,502 and 5,661).
target_kinds AS MATERIALIZED (
    SELECT targets.id, link_kinds.id FROM targets CROSS JOIN link_kinds
    WHERE EXISTS (SELECT 1 FROM spec_dependencies AS edges WHERE edges.dependency_id = targets.id)
),
-- The tag's binaries in the order the answer lists them (from after_binary on), read one package at a time
-- through the packages' name index, so that a LIMIT stops the reading.
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
    WHERE (packages.name, -versions.version_rank, specs.hash) > (SELECT package, -version_rank, hash FROM after_binary)
    ORDER BY packages.name, versions.version_rank DESC, specs.hash
),
-- The dependents are walked up from the targets, each once (UNION), through the tag's binaries: a step starts
-- from a spec of the tag (checked there: a condition on the edges alone would have SQLite read every edge
-- first, to filter them). First at most row_limit of them, nearest first: all there are, for most packages.
direct AS NOT MATERIALIZED (
    SELECT edges.spec_id FROM spec_dependencies AS edges
    WHERE (edges.dependency_id, edges.kind_id) IN target_kinds
      AND EXISTS (
          SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = edges.spec_id AND spec_tags.tag_id = (SELECT id FROM chosen_tag)
      )
),
nearest(spec_id) AS (
    SELECT spec_id FROM (SELECT spec_id FROM direct LIMIT (SELECT rows FROM row_limit))
    UNION
    SELECT edges.spec_id FROM nearest
    CROSS JOIN link_edges AS edges ON edges.dependency_id = nearest.spec_id
    WHERE EXISTS (SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = nearest.spec_id AND spec_tags.tag_id = (SELECT id FROM chosen_tag))
    LIMIT (SELECT rows FROM row_limit)
),
all_nearest AS MATERIALIZED (SELECT count(*) < (SELECT rows FROM row_limit) AS yes FROM nearest),
-- More: a sample of the tag's first 200 binaries in the answer's order is followed down their link edges
-- through the tag's binaries, each spec once. One that links against a target itself is a dependent whatever
-- lies below it, and is not followed.
sample AS MATERIALIZED (
    SELECT spec_id, EXISTS (
        SELECT 1 FROM spec_dependencies AS edges
        WHERE edges.spec_id = binaries_in_order.spec_id AND +edges.kind_id IN link_kinds AND +edges.dependency_id IN targets
    ) AS directly
    FROM binaries_in_order LIMIT (SELECT CASE WHEN yes THEN 0 ELSE 200 END FROM all_nearest)
),
sample_below(id) AS (
    SELECT spec_id FROM sample WHERE NOT directly
    UNION
    SELECT edges.dependency_id FROM sample_below
    CROSS JOIN link_edges AS edges ON edges.spec_id = sample_below.id
    WHERE EXISTS (SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = sample_below.id AND spec_tags.tag_id = (SELECT id FROM chosen_tag))
),
sample_edges AS MATERIALIZED (
    SELECT edges.spec_id, edges.dependency_id FROM sample_below
    CROSS JOIN link_edges AS edges ON edges.spec_id = sample_below.id
    WHERE EXISTS (SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = sample_below.id AND spec_tags.tag_id = (SELECT id FROM chosen_tag))
),
-- What reaches a target, walking back up those edges (a target itself only if another one is below it).
sample_reaching(spec_id, is_target) AS MATERIALIZED (
    SELECT id, 1 FROM targets
    UNION
    SELECT spec_id, 0 FROM sample WHERE directly
    UNION
    SELECT sample_edges.spec_id, 0 FROM sample_reaching
    CROSS JOIN sample_edges ON sample_edges.dependency_id = sample_reaching.spec_id
),
-- If dependents spread evenly through the answer's order, the sample tells how many of the first binaries
-- hold row_limit of them: that many and a quarter more (the batch: 1.25 row_limit times the sample's binaries
-- per dependent in it) are followed down in the same way, unless that would be more than 6,000 (or the sample holds none).
-- A sample of fewer than 200 is the whole tag, and so is its batch.
batch_size AS MATERIALIZED (
    SELECT
        CASE
            WHEN count(*) < 200 THEN count(*)
            WHEN sum(reached) * 6000 < count(*) * row_limit.rows * 5 / 4 THEN 0
            ELSE count(*) * row_limit.rows * 5 / 4 / sum(reached)
        END AS binaries
    FROM (
        SELECT spec_id IN (SELECT spec_id FROM sample_reaching WHERE NOT is_target) AS reached FROM sample
    )
    CROSS JOIN row_limit
),
batch AS MATERIALIZED (
    SELECT *, EXISTS (
        SELECT 1 FROM spec_dependencies AS edges
        WHERE edges.spec_id = binaries_in_order.spec_id AND +edges.kind_id IN link_kinds AND +edges.dependency_id IN targets
    ) AS directly
    FROM binaries_in_order
    LIMIT (SELECT binaries FROM batch_size)
),
batch_below(id) AS (
    SELECT spec_id FROM batch WHERE NOT directly
    UNION
    SELECT edges.dependency_id FROM batch_below
    CROSS JOIN link_edges AS edges ON edges.spec_id = batch_below.id
    WHERE EXISTS (SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = batch_below.id AND spec_tags.tag_id = (SELECT id FROM chosen_tag))
),
batch_edges AS MATERIALIZED (
    SELECT edges.spec_id, edges.dependency_id FROM batch_below
    CROSS JOIN link_edges AS edges ON edges.spec_id = batch_below.id
    WHERE EXISTS (SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = batch_below.id AND spec_tags.tag_id = (SELECT id FROM chosen_tag))
),
batch_reaching(spec_id, is_target) AS MATERIALIZED (
    SELECT id, 1 FROM targets
    UNION
    SELECT spec_id, 0 FROM batch WHERE directly
    UNION
    SELECT batch_edges.spec_id, 0 FROM batch_reaching
    CROSS JOIN batch_edges ON batch_edges.dependency_id = batch_reaching.spec_id
),
-- When row_limit of the batch are dependents (or it is all the tag has), the first of those are the answer.
batch_found AS MATERIALIZED (
    SELECT *, count(*) OVER () < (SELECT binaries FROM batch_size) OR sum(reached) OVER () >= (SELECT rows FROM row_limit) AS enough
    FROM (
        SELECT batch.*, spec_id IN (SELECT spec_id FROM batch_reaching WHERE NOT is_target) AS reached FROM batch
    )
),
-- Otherwise (no batch, or dependents that did not spread evenly) all dependents are walked up. (A condition on
-- a one-row table first in a join is checked once, before the rest is read.)
walked(spec_id) AS (
    SELECT direct.spec_id FROM all_nearest
    CROSS JOIN (SELECT coalesce(max(enough), 0) AS yes FROM batch_found) AS batch
    CROSS JOIN direct
    WHERE NOT all_nearest.yes AND NOT batch.yes
    UNION
    SELECT edges.spec_id FROM walked
    CROSS JOIN link_edges AS edges ON edges.dependency_id = walked.spec_id
    WHERE EXISTS (SELECT 1 FROM spec_tags WHERE spec_tags.spec_id = walked.spec_id AND spec_tags.tag_id = (SELECT id FROM chosen_tag))
),
-- The first row_limit walked (or the nearest, if they are all) in order: picked out of the tag's binaries read in
-- order when they are many (the reading soon stops), else each is looked up and they are sorted.
walked_found AS MATERIALIZED (
    SELECT spec_id, count(*) OVER () > 10000 AS many FROM (
        SELECT nearest.spec_id FROM all_nearest CROSS JOIN nearest WHERE all_nearest.yes
        UNION ALL
        SELECT spec_id FROM walked
    )
),
shown AS (
    SELECT * FROM (
        SELECT spec_id, listing_id, package, version, version_rank, hash, configuration_id
        FROM batch_found WHERE enough AND reached
        ORDER BY package, version_rank DESC, hash
        LIMIT (SELECT rows FROM row_limit)
    )
    UNION ALL
    SELECT * FROM (
        SELECT * FROM binaries_in_order WHERE +spec_id IN (SELECT spec_id FROM walked_found)
        LIMIT (SELECT CASE WHEN max(many) THEN row_limit.rows ELSE 0 END FROM walked_found CROSS JOIN row_limit)
    )
    UNION ALL
    SELECT * FROM (
        SELECT
            page_specs.spec_id,
            page_specs.listing_id,
            packages.name AS package,
            versions.version,
            versions.version_rank,
            specs.hash,
            specs.configuration_id
        FROM chosen_tag
        CROSS JOIN walked_found
        CROSS JOIN page_specs ON page_specs.spec_id = walked_found.spec_id
        CROSS JOIN pages ON pages.id = page_specs.page_id AND pages.tag_id = chosen_tag.id
        CROSS JOIN packages ON packages.id = pages.package_id
        CROSS JOIN specs ON specs.id = page_specs.spec_id
        CROSS JOIN configurations ON configurations.id = specs.configuration_id
        CROSS JOIN versions ON versions.id = configurations.version_id
        WHERE NOT walked_found.many
          AND (packages.name, -versions.version_rank, specs.hash) > (SELECT package, -version_rank, hash FROM after_binary)
        ORDER BY packages.name, versions.version_rank DESC, specs.hash
        LIMIT (SELECT rows FROM row_limit)
    )
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
    FROM shown
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
    SELECT NULL, NULL, NULL, NULL, NULL, no_dependencies, NULL, NULL, NULL, 0
    FROM sentences WHERE NOT (SELECT yes FROM has_edges)
)
ORDER BY found_rows DESC, package, version_rank DESC, hash
