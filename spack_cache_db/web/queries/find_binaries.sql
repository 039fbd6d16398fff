-- title: Find binaries
-- description: >-
--   Binaries of the build cache, with their spec string, hash, stacks and the three commands that install
--   one. Spec takes a spec as `spack buildcache list` does: hdf5@1.14: +mpi target=x86_64_v3:
--   %gcc@13 ^mpich@4 (@1.14 holds 1.14.6, @=1.14.6 is that version exactly; ^dep asks for a dependency
--   anywhere in the binary's DAG; /abcd for a hash). The other fields narrow it down: leave a field empty
--   to not filter on it. Version takes an exact version or a prefix (1.14 finds 1.14.6); compiler takes
--   gcc, gcc@13 or gcc@13.2.0 (Spack 0.x's name or 1.x's: oneapi or intel-oneapi-compilers); variant takes
--   one or more of +mpi, ~cuda, cuda_arch=80, separated by spaces; host takes your CPU (zen3, neoverse_v2, m1: what `spack arch -t` says) and keeps the
--   binaries it can run. Tag defaults to develop (or the newest tag with pages); shell patterns separated
--   by spaces take several ('v2025.*', * for every tag). At most 1,000 rows for a package, 100 without.
--   `python build_db.py find SPEC` asks the same from a terminal.
-- params: [spec, package, version, variant, compiler, os, platform, target, host, stack, tag]
-- button: Find binaries
-- rows: [binary, binaries]
-- hidden_columns: [compiler, os, platform, target, variants]
-- tag_patterns: true
WITH given AS (
    SELECT
        lower(trim(coalesce(:package, ''))) AS field_package,
        ltrim(trim(coalesce(:version, '')), '@') AS version,
        trim(coalesce(:os, '')) AS os,
        lower(trim(coalesce(:platform, ''))) AS platform,
        trim(coalesce(:target, '')) AS target,
        lower(trim(coalesce(:host, ''))) AS host,
        trim(coalesce(:stack, '')) AS stack,
        replace(ltrim(trim(coalesce(:compiler, '')), '%'), '@=', '@') AS compiler,
        substr(trim(coalesce(:variant, '')), 1, 500) AS variant,
        coalesce(nullif(substr(trim(coalesce(:tag, '')), 1, 1000), ''), (SELECT name FROM default_tag)) AS tag,
        -- The spec field, parsed by query/spec.py (magic parameters in Datasette, given by `find`): an error
        -- flag, and its nodes as JSON. Unset in sqlite3, they are a root node that asks nothing; a spec
        -- given without them finds nothing rather than everything.
        coalesce(:_spec_error, '') <> '' OR trim(coalesce(:spec, '')) <> '' AND coalesce(:_spec_nodes, '') = ''
            AS spec_error,
        coalesce(nullif(:_spec_nodes, ''), '[{}]') AS spec_nodes
),
-- The nodes of the spec: the binary itself (n = 0) and each ^dependency. A node filters by the
-- configuration (versions, compilers, targets, variants, os, platform) when it names any of them.
spec_nodes AS (
    SELECT
        node.key AS n,
        node.value AS node,
        coalesce(json_extract(node.value, '$.name'), '') AS name,
        coalesce(json_extract(node.value, '$.hash'), '') AS hash,
        coalesce(json_extract(node.value, '$.os'), '') AS os,
        coalesce(json_extract(node.value, '$.platform'), '') AS platform,
        coalesce(json_extract(node.value, '$.bare'), 0) AS bare,
        json_type(node.value, '$.versions') IS NOT NULL AS by_version,
        json_type(node.value, '$.compilers') IS NOT NULL AS by_compiler,
        json_type(node.value, '$.targets') IS NOT NULL AS by_target,
        json_type(node.value, '$.variants') IS NOT NULL AS by_variants,
        json_type(node.value, '$.versions') IS NOT NULL OR json_type(node.value, '$.compilers') IS NOT NULL
            OR json_type(node.value, '$.targets') IS NOT NULL OR json_type(node.value, '$.variants') IS NOT NULL
            OR coalesce(json_extract(node.value, '$.os'), '') <> ''
            OR coalesce(json_extract(node.value, '$.platform'), '') <> '' AS by_configuration
    FROM given, json_each(given.spec_nodes) AS node
),
-- What each node of the spec accepts. Versions lie in one of its ranges [lo, hi) of Spack's order
-- (version_key; '' is no bound), and so do compilers' versions. A node's number and an id are looked
-- up as one number, n << 32 | id: SQLite reads a list of row values (n, id) through, not by an index.
node_versions AS (
    SELECT DISTINCT spec_nodes.n, versions.id
    FROM spec_nodes
    CROSS JOIN json_each(spec_nodes.node, '$.versions') AS wanted
    JOIN versions ON versions.version_key >= json_extract(wanted.value, '$[0]')
        AND (json_extract(wanted.value, '$[1]') = '' OR versions.version_key < json_extract(wanted.value, '$[1]'))
),
node_compilers AS (
    SELECT DISTINCT spec_nodes.n, compilers.id
    FROM spec_nodes
    CROSS JOIN json_each(spec_nodes.node, '$.compilers') AS named
    JOIN compilers ON compilers.name = named.value
    WHERE json_type(spec_nodes.node, '$.compiler_versions') IS NULL OR EXISTS (
        SELECT 1 FROM json_each(spec_nodes.node, '$.compiler_versions') AS wanted
        WHERE compilers.version IS NOT NULL AND compilers.version_key >= json_extract(wanted.value, '$[0]')
          AND (json_extract(wanted.value, '$[1]') = '' OR compilers.version_key < json_extract(wanted.value, '$[1]'))
    )
),
-- target=zen3 is zen3; a range from x86_64_v3 is it or a descendant (archspec's, as runs_on holds them),
-- and a range up to zen3 is it or an ancestor (what runs on a zen3).
node_targets AS (
    SELECT DISTINCT spec_nodes.n, targets.id
    FROM spec_nodes
    CROSS JOIN json_each(spec_nodes.node, '$.targets') AS wanted
    JOIN targets ON CASE
        WHEN json_type(wanted.value, '$.is') IS NOT NULL THEN targets.name = json_extract(wanted.value, '$.is')
        ELSE (json_extract(wanted.value, '$.from') = '' OR EXISTS (
                SELECT 1 FROM runs_on
                WHERE runs_on.host = targets.name AND runs_on.target = json_extract(wanted.value, '$.from')))
            AND (json_extract(wanted.value, '$.to') = '' OR EXISTS (
                SELECT 1 FROM runs_on
                WHERE runs_on.host = json_extract(wanted.value, '$.to') AND runs_on.target = targets.name))
    END
),
-- A variant term is [name, operator, values]: +name and ~name, name=v1,v2 (has these values among its
-- own) and name:=v1,v2 (has exactly these).
node_variant_terms AS (
    SELECT spec_nodes.n, term.key AS term, json_extract(term.value, '$[0]') AS name,
        json_extract(term.value, '$[1]') AS operator, json_extract(term.value, '$[2]') AS wanted
    FROM spec_nodes
    CROSS JOIN json_each(spec_nodes.node, '$.variants') AS term
),
node_variant_sets AS (
    SELECT node_variant_terms.n, variant_set_members.variant_set_id
    FROM node_variant_terms
    JOIN variants ON variants.name = node_variant_terms.name AND CASE node_variant_terms.operator
        WHEN '+' THEN variants.operator = '+'
        WHEN '~' THEN variants.operator = '~'
        ELSE variants.operator IN ('=', ':=') AND NOT EXISTS (
                SELECT 1 FROM json_each(node_variant_terms.wanted) AS value
                WHERE value.value NOT IN (
                    SELECT variant_values.value FROM variant_values WHERE variant_values.variant_id = variants.id))
            AND (node_variant_terms.operator = '=' OR json_array_length(node_variant_terms.wanted) = (
                SELECT count(DISTINCT variant_values.value) FROM variant_values
                WHERE variant_values.variant_id = variants.id))
    END
    JOIN variant_set_members ON variant_set_members.variant_id = variants.id
    GROUP BY node_variant_terms.n, variant_set_members.variant_set_id
    HAVING count(DISTINCT node_variant_terms.term) = (
        SELECT json_array_length(spec_nodes.node, '$.variants')
        FROM spec_nodes WHERE spec_nodes.n = node_variant_terms.n
    )
),
-- The configurations each node accepts: those of its package (every package's for a binary without a
-- name) that pass each of its filters; for the binary itself, only when it has filters.
node_candidates AS (
    SELECT spec_nodes.n, versions.id AS version_id, versions.package_id
    FROM spec_nodes
    JOIN packages ON packages.name = spec_nodes.name
    JOIN versions ON versions.package_id = packages.id
    WHERE spec_nodes.n > 0 OR spec_nodes.by_configuration  -- the scan below takes the binary's name itself
    UNION ALL
    SELECT spec_nodes.n, versions.id, versions.package_id
    FROM spec_nodes CROSS JOIN versions
    WHERE spec_nodes.name = '' AND spec_nodes.by_configuration
),
node_configurations AS (
    SELECT spec_nodes.n, configurations.id AS configuration_id, node_candidates.package_id
    FROM node_candidates
    CROSS JOIN spec_nodes ON spec_nodes.n = node_candidates.n
    CROSS JOIN configurations ON configurations.version_id = node_candidates.version_id
    CROSS JOIN oss ON oss.id = configurations.os_id
    CROSS JOIN platforms ON platforms.id = configurations.platform_id
    WHERE (spec_nodes.os = '' OR oss.name = spec_nodes.os)
      AND (spec_nodes.platform = '' OR platforms.name = spec_nodes.platform)
      AND (NOT spec_nodes.by_version
           OR (spec_nodes.n << 32 | configurations.version_id) IN (SELECT n << 32 | id FROM node_versions))
      AND (NOT spec_nodes.by_compiler
           OR (spec_nodes.n << 32 | configurations.compiler_id) IN (SELECT n << 32 | id FROM node_compilers))
      AND (NOT spec_nodes.by_target
           OR (spec_nodes.n << 32 | configurations.target_id) IN (SELECT n << 32 | id FROM node_targets))
      AND (NOT spec_nodes.by_variants
           OR (spec_nodes.n << 32 | configurations.variant_set_id)
               IN (SELECT n << 32 | variant_set_id FROM node_variant_sets))
),
args AS (
    SELECT
        given.*,
        coalesce(nullif(root.name, ''), given.field_package) AS package,
        root.name <> '' AND given.field_package <> '' AND root.name <> given.field_package AS conflicting,
        root.hash AS spec_hash,
        root.by_configuration AS spec_by_configuration,
        (SELECT count(*) FROM spec_nodes WHERE n > 0) AS dependencies
    FROM given
    JOIN spec_nodes AS root ON root.n = 0
),
-- The variant and tag fields split at spaces, read from given: each reference to args copies the spec's nodes.
words(field, word, rest) AS (
    SELECT 'variant', '', variant || ' ' FROM given
    UNION ALL
    SELECT 'tag', '', tag || ' ' FROM given
    UNION ALL
    SELECT field, substr(rest, 1, instr(rest, ' ') - 1), ltrim(substr(rest, instr(rest, ' ') + 1))
    FROM words WHERE rest <> ''
),
wanted AS (SELECT DISTINCT word AS term FROM words WHERE field = 'variant' AND word <> ''),
wanted_tags AS MATERIALIZED (
    SELECT DISTINCT tags.id, tags.name, tags.sort_order, tags.mirror_url
    FROM (SELECT DISTINCT word FROM words WHERE field = 'tag' AND word <> '') AS patterns
    CROSS JOIN tags ON tags.name GLOB patterns.word
),
-- A binary matches a ^dependency when its DAG (its edges, of every deptype) holds a spec that matches it.
-- The binaries that do are found one of two ways, with the same answer: up the edges from the specs of the
-- tags asked for that match, when they and their dependents there are few; else down the DAG of each binary
-- the scan reads, where many binaries have the dependency and the LIMIT soon stops the scan. A bare ^name
-- also matches the providers of a virtual of that name (^mpi), on the edges: looked for down. A package with
-- few binaries in the tags asked for is read down at once. (A CTE is read when first used: what a way does
-- not use is not read.)
root_binaries AS MATERIALIZED (
    SELECT args.package <> '' AND coalesce((
        SELECT sum(pages.num_specs) FROM packages JOIN pages ON pages.package_id = packages.id
        WHERE packages.name = args.package AND pages.tag_id IN (SELECT id FROM wanted_tags)
    ), 0) <= 2000 AS few
    FROM args
),
virtual_kinds AS (
    SELECT DISTINCT spec_nodes.n, dependency_kinds.id
    FROM spec_nodes
    CROSS JOIN dependency_kinds
    WHERE spec_nodes.n > 0 AND spec_nodes.bare
      AND EXISTS (SELECT 1 FROM json_each(dependency_kinds.virtuals) WHERE json_each.value = spec_nodes.name)
),
-- The specs a hash names, wherever they are.
hash_specs AS (
    SELECT spec_nodes.n, specs.id AS spec_id
    FROM spec_nodes
    CROSS JOIN specs ON specs.hash >= spec_nodes.hash AND specs.hash < spec_nodes.hash || '~'
    WHERE spec_nodes.n > 0 AND spec_nodes.name = '' AND NOT spec_nodes.by_configuration AND spec_nodes.hash <> ''
),
-- Down, the specs that match a node are looked up in a list when there are not too many in the whole history:
-- binaries through their listings, the hash's, and those indexes give as dependencies only.
dependency_specs AS MATERIALIZED (
    SELECT node_configurations.n, page_specs.spec_id
    FROM node_configurations
    CROSS JOIN listings ON listings.configuration_id = node_configurations.configuration_id
    CROSS JOIN page_specs ON page_specs.listing_id = listings.id
    WHERE node_configurations.n > 0
    UNION ALL
    SELECT n, spec_id FROM hash_specs
    UNION ALL
    SELECT node_configurations.n, dependency_only_specs.spec_id
    FROM node_configurations
    CROSS JOIN dependency_only_specs ON dependency_only_specs.configuration_id = node_configurations.configuration_id
    WHERE node_configurations.n > 0
    LIMIT 10001  -- the arms are read in turn: past this many, the specs are not read
),
-- Up, from the specs that match a node in the tags asked for: its package's binaries there (from its pages
-- in those tags) and the specs their indexes give as dependencies only (dependency_only_specs, by
-- configuration and tag), and the hash's.
tag_dependency_specs(n, spec_id) AS MATERIALIZED (
    SELECT found.n, found.spec_id
    FROM (
        SELECT node_packages.n, page_specs.spec_id
        FROM (SELECT DISTINCT n, package_id FROM node_configurations WHERE n > 0) AS node_packages
        CROSS JOIN wanted_tags
        CROSS JOIN pages ON pages.tag_id = wanted_tags.id AND pages.package_id = node_packages.package_id
        CROSS JOIN page_specs ON page_specs.page_id = pages.id
        CROSS JOIN listings ON listings.id = page_specs.listing_id
        WHERE (node_packages.n << 32 | listings.configuration_id)
            IN (SELECT n << 32 | configuration_id FROM node_configurations)
        UNION ALL
        SELECT node_configurations.n, dependency_only_specs.spec_id
        FROM node_configurations
        CROSS JOIN wanted_tags
        CROSS JOIN dependency_only_specs
            ON dependency_only_specs.configuration_id = node_configurations.configuration_id
            AND dependency_only_specs.tag_id = wanted_tags.id
        WHERE node_configurations.n > 0
        UNION ALL
        SELECT n, spec_id FROM hash_specs
    ) AS found
    CROSS JOIN specs ON specs.id = found.spec_id
    CROSS JOIN spec_nodes ON spec_nodes.n = found.n
    WHERE spec_nodes.hash = '' OR (specs.hash >= spec_nodes.hash AND specs.hash < spec_nodes.hash || '~')
),
-- The edges into the specs of the tags asked for: a spec outside them has no dependent in them, as an index
-- holds every dependency of what it holds.
tag_edges AS NOT MATERIALIZED (
    SELECT spec_dependencies.spec_id, spec_dependencies.dependency_id FROM spec_dependencies
    WHERE EXISTS (
        SELECT 1 FROM spec_tags
        WHERE spec_tags.spec_id = spec_dependencies.spec_id AND spec_tags.tag_id IN (SELECT id FROM wanted_tags)
    ) OR EXISTS (
        SELECT 1 FROM dependency_only_specs
        WHERE dependency_only_specs.spec_id = spec_dependencies.spec_id
          AND dependency_only_specs.tag_id IN (SELECT id FROM wanted_tags)
    )
),
-- Up those edges, each dependent once, stopping past 10,000: the first step too.
dependents(n, spec_id) AS (
    SELECT * FROM (
        SELECT DISTINCT tag_dependency_specs.n, tag_edges.spec_id
        FROM tag_dependency_specs
        CROSS JOIN tag_edges ON tag_edges.dependency_id = tag_dependency_specs.spec_id
        LIMIT 10001
    )
    UNION
    SELECT dependents.n, tag_edges.spec_id
    FROM dependents
    CROSS JOIN tag_edges ON tag_edges.dependency_id = dependents.spec_id
    LIMIT 10001
),
-- The binaries found up the edges, how many of the spec's dependencies each has, and their packages.
dependents_found AS MATERIALIZED (
    SELECT dependents.spec_id, versions.package_id, count(DISTINCT dependents.n) AS dependencies
    FROM dependents
    CROSS JOIN specs ON specs.id = dependents.spec_id
    CROSS JOIN configurations ON configurations.id = specs.configuration_id
    CROSS JOIN versions ON versions.id = configurations.version_id
    GROUP BY dependents.spec_id
),
-- Up only when the direct edges into those specs, of every tag and read without a check, are at most 10,000
-- (a spec many tags share has the dependents of them all: perl, 1,000,000 in the history), and so are the
-- dependents in the tags asked for. Past either, the scan down finds enough soon where the dependents are
-- many; it reads long where a spec many tags share has few of them in the tags asked for.
-- (CASE, unlike AND, leaves a subquery unread when the answer is known without it. walk reads up twice: kept
-- apart, it is counted once.)
walk_up AS MATERIALIZED (
    SELECT few, CASE
        WHEN few OR EXISTS (SELECT 1 FROM virtual_kinds) THEN 0
        WHEN (SELECT count(*) FROM (
            SELECT 1 FROM spec_dependencies
            WHERE spec_dependencies.dependency_id IN (SELECT spec_id FROM tag_dependency_specs)
            LIMIT 10001
        )) > 10000 THEN 0
        ELSE (SELECT count(*) FROM dependents) <= 10000
    END AS up
    FROM root_binaries
),
-- down: the binaries' DAGs are walked down (there are dependencies, and they are not found up).
walk AS MATERIALIZED (
    SELECT up, CASE WHEN few OR up THEN 0 ELSE (SELECT count(*) FROM dependency_specs) <= 10000 END AS known,
        NOT up AND (SELECT dependencies FROM args) > 0 AS down
    FROM walk_up
),
-- +mpi and ~mpi match exactly; name=value also matches name:=value and one value of a
-- multi-valued variant (cuda_arch=80 matches cuda_arch=70,80); a bare word means +word.
matching_variants AS (
    SELECT wanted.term, variants.id AS variant_id
    FROM wanted CROSS JOIN variants ON CASE
        WHEN substr(wanted.term, 1, 1) IN ('+', '~') THEN variants.raw = wanted.term
        WHEN instr(wanted.term, '=') > 0 THEN
            variants.name = rtrim(substr(wanted.term, 1, instr(wanted.term, '=') - 1), ':')
            AND (variants.value = substr(wanted.term, instr(wanted.term, '=') + 1)
                OR EXISTS (SELECT 1 FROM variant_values
                           WHERE variant_values.variant_id = variants.id
                             AND variant_values.value = substr(wanted.term, instr(wanted.term, '=') + 1)))
        ELSE variants.raw = '+' || wanted.term
    END
),
matching_variant_sets AS (
    SELECT variant_set_members.variant_set_id
    FROM matching_variants
    CROSS JOIN variant_set_members ON variant_set_members.variant_id = matching_variants.variant_id
    GROUP BY variant_set_members.variant_set_id
    HAVING count(DISTINCT matching_variants.term) = (SELECT count(*) FROM wanted)
),
matching_versions AS (
    SELECT versions.id, versions.package_id FROM versions, args
    WHERE versions.version = args.version
       OR substr(versions.version, 1, length(args.version) + 1) = args.version || '.'
),
stack_sets_of_the_stack AS (SELECT stack_memberships.stack_set_id FROM given JOIN stack_memberships USING (stack)),
-- The os, target (or host) and compiler fields as the ids they leave (every id of a field left empty): what
-- the build counted binaries by in each tag, with the stack (tag_cells, tag_stack_cells).
field_oss AS (SELECT oss.id, oss.name FROM given CROSS JOIN oss WHERE given.os = '' OR oss.name = given.os),
field_targets AS (
    SELECT targets.id, targets.name FROM given CROSS JOIN targets
    WHERE (given.target = '' OR targets.name = given.target)
      AND (given.host = '' OR targets.name IN (SELECT target FROM runs_on WHERE runs_on.host = given.host))
),
-- The compiler field as written, and with the compiler's name in the other of Spack 0.x and 1.x.
field_compiler_names(compiler) AS (
    SELECT compiler FROM given
    UNION
    SELECT compiler_aliases.other || substr(given.compiler, length(compiler_aliases.name) + 1)
    FROM given CROSS JOIN compiler_aliases
    WHERE given.compiler = compiler_aliases.name
       OR substr(given.compiler, 1, length(compiler_aliases.name) + 1) = compiler_aliases.name || '@'
),
field_compilers AS (
    SELECT compilers.id, compilers.label FROM given CROSS JOIN compilers
    WHERE given.compiler = '' OR EXISTS (
        SELECT 1 FROM field_compiler_names AS named
        WHERE compilers.label = named.compiler OR compilers.name = named.compiler
           OR substr(compilers.label, 1, length(named.compiler) + 1) = named.compiler || '.'
    )
),
-- The configurations of those fields (read only for few pages, below).
field_configurations AS MATERIALIZED (
    SELECT configurations.id FROM configurations
    WHERE configurations.os_id IN (SELECT id FROM field_oss) AND configurations.target_id IN (SELECT id FROM field_targets)
      AND configurations.compiler_id IN (SELECT id FROM field_compilers)
),
cells_asked AS (
    SELECT stack <> '' AS by_stack, os <> '' OR target <> '' OR host <> '' OR compiler <> '' AS by_configuration
    FROM given
),
-- The scan below reads only the tags asked for that have binaries of those fields, as the build counted them:
-- a combination that few tags have, or none, is not looked for in every tag's binaries.
scanned_tags AS MATERIALIZED (
    SELECT wanted_tags.*
    FROM wanted_tags CROSS JOIN given CROSS JOIN cells_asked
    WHERE CASE
        WHEN cells_asked.by_stack THEN EXISTS (
            SELECT 1 FROM tag_stack_cells AS cell
            WHERE cell.tag_id = wanted_tags.id AND cell.stack = given.stack
              AND cell.os_id IN (SELECT id FROM field_oss) AND cell.target_id IN (SELECT id FROM field_targets)
              AND cell.compiler_id IN (SELECT id FROM field_compilers))
        WHEN cells_asked.by_configuration THEN EXISTS (
            SELECT 1 FROM tag_cells AS cell
            WHERE cell.tag = wanted_tags.name
              AND cell.os IN (SELECT name FROM field_oss) AND cell.target IN (SELECT name FROM field_targets)
              AND cell.compiler IN (SELECT label FROM field_compilers))
        ELSE 1
    END
),
-- Where the stack, or the os, target and compiler together, have few binaries in the whole history
-- (binaries_facet_counts), the scan reads only the pages that list binaries of those fields, found through
-- their listings: from the stack's sets, or from the configurations of the os, target and compiler, whichever
-- has fewer binaries. (The configurations are read whole, which no index spares: 277,137 in the spread
-- history, 11 ms.)
field_binaries AS (
    SELECT (SELECT binaries FROM binaries_facet_counts WHERE facet = 'stacks' AND value = given.stack) AS stack,
        min(
            coalesce((SELECT binaries FROM binaries_facet_counts WHERE facet = 'os' AND value = given.os), 1e18),
            coalesce((SELECT sum(binaries) FROM binaries_facet_counts
                      WHERE facet = 'target' AND value IN (SELECT name FROM field_targets)
                        AND (given.target <> '' OR given.host <> '')), 1e18),
            coalesce((SELECT sum(binaries) FROM binaries_facet_counts
                      WHERE facet = 'compiler' AND value IN (SELECT label FROM field_compilers)
                        AND given.compiler <> ''), 1e18)
        ) AS configuration
    FROM given
),
few_cells AS MATERIALIZED (
    SELECT min(coalesce(stack, 1e18), configuration) <= 20000 AS few,
        coalesce(stack, 1e18) <= configuration AS from_stack
    FROM field_binaries
),
few_listings AS MATERIALIZED (
    SELECT listings.id
    FROM few_cells
    CROSS JOIN stack_sets_of_the_stack
    CROSS JOIN listings ON listings.stack_set_id = stack_sets_of_the_stack.stack_set_id
    WHERE few_cells.few AND few_cells.from_stack
      AND listings.configuration_id IN (SELECT id FROM field_configurations)
    UNION ALL
    SELECT listings.id
    FROM listings
    WHERE listings.configuration_id IN (
        SELECT field_configurations.id FROM few_cells CROSS JOIN field_configurations
        WHERE few_cells.few AND NOT few_cells.from_stack)
      AND (NOT (SELECT by_stack FROM cells_asked)
           OR listings.stack_set_id IN (SELECT stack_set_id FROM stack_sets_of_the_stack))
),
few_pages AS MATERIALIZED (
    SELECT DISTINCT pages.tag_id, pages.package_id
    FROM few_listings
    CROSS JOIN page_specs ON page_specs.listing_id = few_listings.id
    CROSS JOIN pages ON pages.id = page_specs.page_id
),
-- Packages that can match, so that the scan below skips the others: those of the spec's hash (/abcd), of
-- the configurations its filters leave, and of the binaries found up the edges.
hash_packages AS (
    SELECT versions.package_id
    FROM args
    CROSS JOIN specs ON specs.hash >= args.spec_hash AND specs.hash < args.spec_hash || '~'
    CROSS JOIN configurations ON configurations.id = specs.configuration_id
    CROSS JOIN versions ON versions.id = configurations.version_id
    WHERE args.spec_hash <> ''
),
row_limit AS (SELECT CASE WHEN package = '' THEN 100 ELSE 1000 END AS rows FROM args),
-- A package asked for alone (no other field, no spec): the rows come newest version first, then by tag, so
-- only the tags of the first versions and tags whose binaries, as the build counted them, fill the answer are
-- read and sorted (any other row comes after them): the usual history's package with the most binaries has
-- 170,680 in every tag (244 ms to answer, then 10).
first_tags AS MATERIALIZED (
    SELECT DISTINCT tag_id
    FROM (
        SELECT counted.tag_id, sum(counted.binaries) OVER (
            ORDER BY counted.version_rank DESC, counted.tag_order ROWS UNBOUNDED PRECEDING
        ) - counted.binaries AS before
        FROM given
        CROSS JOIN version_tags AS counted ON counted.package = given.field_package
        CROSS JOIN wanted_tags ON wanted_tags.id = counted.tag_id
    )
    WHERE before < (SELECT rows FROM row_limit)
),
package_alone AS (
    SELECT field_package <> '' AND version = '' AND os = '' AND platform = '' AND target = '' AND host = ''
        AND stack = '' AND compiler = '' AND variant = '' AND trim(coalesce(:spec, '')) = '' AS alone
    FROM given
),
-- The rows in order. Packages come first and are read in name order through their name index, so SQLite
-- sorts one package at a time and, read by found, stops at its LIMIT: without a package it reads the first
-- few packages of the tag, not all of it. CROSS JOIN keeps that order, then the tags, then what a page
-- lists. Versions, a hash and the spec's filters leave out whole packages first. Configurations come
-- through the listing (the spec's own). Its LIMIT keeps SQLite from merging found's WHERE into it: found
-- reads these rows as they are sorted. Without dependencies it is found's (sorting keeps only that many);
-- with them there is none: found walks down, or keeps the binaries the walk up found (10,000 specs at most).
-- It reads args, not walk: each reference to walk is a copy of all it reads (30 ms more to prepare it).
-- The rows carry the sort's keys and ids: the spec string and the rest are made for the rows shown only (cit
-- in every tag of the index history sorts 146,146 rows: 476 ms with them, 247 ms without).
in_order AS (
    SELECT
        packages.name AS package,
        configuration_specs.version_rank,
        configuration_specs.compiler,
        configuration_specs.os,
        configuration_specs.target,
        specs.hash,
        configurations.id AS configuration_id,
        listings.stack_set_id,
        wanted_tags.name AS tag,
        wanted_tags.sort_order AS tag_order,
        wanted_tags.id AS tag_id,
        specs.id AS spec_id,
        args.dependencies,
        walk.down,
        walk.known
    FROM packages
    CROSS JOIN args
    CROSS JOIN walk
    CROSS JOIN wanted_tags
    CROSS JOIN pages ON pages.tag_id = wanted_tags.id AND pages.package_id = packages.id
    CROSS JOIN page_specs ON page_specs.page_id = pages.id
    CROSS JOIN listings ON listings.id = page_specs.listing_id
    CROSS JOIN configurations ON configurations.id = listings.configuration_id
    CROSS JOIN configuration_specs ON configuration_specs.configuration_id = configurations.id
    CROSS JOIN specs ON specs.id = page_specs.spec_id
    CROSS JOIN stack_sets ON stack_sets.id = listings.stack_set_id
    WHERE packages.name >= (SELECT package FROM args) AND (args.package = '' OR packages.name = args.package)
      AND NOT args.spec_error AND NOT args.conflicting
      AND (args.spec_hash = '' OR packages.id IN (SELECT package_id FROM hash_packages))
      AND (NOT args.spec_by_configuration OR packages.id IN (SELECT package_id FROM node_configurations WHERE n = 0))
      AND (args.dependencies = 0 OR NOT walk.up OR packages.id IN (
          SELECT package_id FROM dependents_found WHERE dependents_found.dependencies = args.dependencies))
      AND (args.version = '' OR packages.id IN (SELECT package_id FROM matching_versions))
      AND wanted_tags.id IN (SELECT id FROM scanned_tags)
      AND (NOT (SELECT alone FROM package_alone) OR wanted_tags.id IN (SELECT tag_id FROM first_tags))
      AND (NOT (SELECT few FROM few_cells) OR packages.id IN (SELECT package_id FROM few_pages))
      -- field_configurations' condition, asked of each package: it stops at the package's first configuration
      -- that meets it (field_configurations read whole took 40 ms more on the spread history's common questions).
      AND (NOT (SELECT by_configuration FROM cells_asked) OR EXISTS (
          SELECT 1 FROM versions AS package_versions
          CROSS JOIN configurations AS package_configurations
              ON package_configurations.version_id = package_versions.id
          WHERE package_versions.package_id = packages.id
            AND package_configurations.os_id IN (SELECT id FROM field_oss)
            AND package_configurations.target_id IN (SELECT id FROM field_targets)
            AND package_configurations.compiler_id IN (SELECT id FROM field_compilers)
      ))
      AND (NOT (SELECT few FROM few_cells)
           OR (wanted_tags.id << 32 | packages.id) IN (SELECT tag_id << 32 | package_id FROM few_pages))
      AND (args.version = '' OR configurations.version_id IN (SELECT id FROM matching_versions))
      AND (args.os = '' OR configurations.os_id IN (SELECT id FROM field_oss))
      AND (args.platform = '' OR configuration_specs.platform = args.platform)
      AND (args.target = '' AND args.host = '' OR configurations.target_id IN (SELECT id FROM field_targets))
      AND (args.compiler = '' OR configurations.compiler_id IN (SELECT id FROM field_compilers))
      AND (args.variant = '' OR configurations.variant_set_id IN (SELECT variant_set_id FROM matching_variant_sets))
      AND (args.stack = '' OR listings.stack_set_id IN (SELECT stack_set_id FROM stack_sets_of_the_stack))
      AND (args.spec_hash = '' OR (specs.hash >= args.spec_hash AND specs.hash < args.spec_hash || '~'))
      AND (NOT args.spec_by_configuration
           OR configurations.id IN (SELECT configuration_id FROM node_configurations WHERE n = 0))
      AND (args.dependencies = 0 OR NOT walk.up OR args.dependencies = (
          SELECT dependencies FROM dependents_found WHERE dependents_found.spec_id = specs.id
      ))
    ORDER BY packages.name, configuration_specs.version_rank DESC, wanted_tags.sort_order,
        configuration_specs.compiler, configuration_specs.os, configuration_specs.target, specs.hash
    LIMIT (SELECT CASE WHEN args.dependencies > 0 THEN -1 ELSE row_limit.rows END FROM args CROSS JOIN row_limit)
),
-- The first rows in order whose DAG holds the spec's dependencies. Walking down a binary's DAG costs the
-- most, so it is done here, on the sorted rows: it stops with the LIMIT, not after every binary of the
-- package (cit ^zufi in every tag of the history: 146,146 binaries; 15 s when walked before the sort).
-- MATERIALIZED: merged into the window below, the LIMIT would count the rows after it sorts them all.
found AS MATERIALIZED (
    SELECT * FROM in_order
    WHERE NOT in_order.down OR in_order.dependencies = (
        -- Down the DAG: the walk keeps which edges provide a virtual asked for (few do), so that it visits
        -- each spec about once.
        WITH RECURSIVE below(spec_id, provides) AS (
            SELECT dependency_id, CASE WHEN kind_id IN (SELECT id FROM virtual_kinds) THEN kind_id ELSE 0 END
            FROM spec_dependencies WHERE spec_dependencies.spec_id = in_order.spec_id
            UNION
            SELECT spec_dependencies.dependency_id,
                CASE WHEN spec_dependencies.kind_id IN (SELECT id FROM virtual_kinds)
                    THEN spec_dependencies.kind_id ELSE 0 END
            FROM below CROSS JOIN spec_dependencies ON spec_dependencies.spec_id = below.spec_id
        )
        -- The walk stops once each of the spec's dependencies is matched: it is read as it goes.
        SELECT count(*) FROM (
            SELECT DISTINCT dependency.n
            FROM below
            CROSS JOIN specs AS node ON node.id = below.spec_id
            CROSS JOIN spec_nodes AS dependency ON dependency.n > 0
            WHERE (dependency.n << 32 | below.provides) IN (SELECT n << 32 | id FROM virtual_kinds)
               OR (dependency.hash = '' OR (node.hash >= dependency.hash AND node.hash < dependency.hash || '~'))
                  AND CASE WHEN in_order.known  -- the specs that match are known
                      THEN (dependency.n << 32 | node.id) IN (SELECT n << 32 | spec_id FROM dependency_specs)
                      ELSE dependency.name = '' AND NOT dependency.by_configuration
                          OR (dependency.n << 32 | node.configuration_id)
                              IN (SELECT n << 32 | configuration_id FROM node_configurations)
                  END
            LIMIT (SELECT dependencies FROM args)
        )
    )
    LIMIT (SELECT rows FROM row_limit)
)
SELECT
    found.package,
    shown.version,
    shown.spec,
    found.hash,
    stack_sets.stacks,
    (SELECT install FROM tag_installs WHERE tag_installs.tag_id = found.tag_id) || found.hash AS install,
    found.tag,
    found.compiler,
    found.os,
    shown.platform,
    found.target,
    shown.variants,
    -- Links to the package's other pages, on its first row only: rendering them costs time. The addresses
    -- are relative to this page's (so they work whatever the database is called); of the characters a
    -- package's name may hold, only + means something else in a URL.
    CASE WHEN row_number() OVER (
        PARTITION BY found.package
        ORDER BY found.version_rank DESC, found.tag_order, found.compiler, found.os, found.target, found.hash
    ) = 1 THEN (
        SELECT '[versions](package_versions?package=' || name || ') · [timeline](version_timeline?package='
            || name || ') · [chart](../-/dashboards/package-history?package=' || name || ')'
        FROM (SELECT replace(found.package, '+', '%2B') AS name)
    ) END AS links
FROM found
CROSS JOIN configuration_specs AS shown ON shown.configuration_id = found.configuration_id
CROSS JOIN stack_sets ON stack_sets.id = found.stack_set_id
ORDER BY found.package, found.version_rank DESC, found.tag_order, found.compiler, found.os, found.target, found.hash
