-- title: A package
-- description: >-
--   Everything the build cache has of one package: its versions in every tag (newest first, in
--   Spack's version order), its binaries with their install commands, and its history. As data:
--   one row per version and tag that has it, with its number of binaries.
-- params: [package]
-- button: Show the package
-- rows: [version in a tag, versions in tags]
SELECT version, tag, kind, snapshot_date, binaries
FROM version_tags
WHERE package = lower(trim(coalesce(:package, '')))
ORDER BY version_rank DESC, tag_order
