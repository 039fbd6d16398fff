-- title: Pages with problems
-- description: >-
--   What the build noticed about the pages (the problems table): pages whose meta disagrees with
--   their spec_details (warnings) and pages that could not be read and were left out (errors),
--   errors first. Empty fields do not filter. At most 1,000 rows.
-- params: [tag, package, severity]
-- button: Show the problems
-- rows: [problem, problems]
WITH args AS (
    SELECT
        trim(coalesce(:tag, '')) AS tag,
        lower(trim(coalesce(:package, ''))) AS package,
        lower(trim(coalesce(:severity, ''))) AS severity
),
row_limit AS (SELECT 1000 AS rows)
SELECT
    problems.severity,
    problems.tag,
    problems.package,
    problems.field,
    problems.message,
    problems.path
FROM args, problems
LEFT JOIN tags ON tags.name = problems.tag
WHERE (args.tag = '' OR problems.tag = args.tag)
  AND (args.package = '' OR problems.package = args.package)
  AND (args.severity = '' OR problems.severity = args.severity)
ORDER BY problems.severity = 'error' DESC, tags.sort_order, problems.package, problems.path, problems.field
LIMIT (SELECT rows FROM row_limit)
