-- The codes of a row's findings (the checks of the deterministic STEF path that fired, e.g.
-- `unknown_table`, `ratio_integer_division`; README "Findings") as a column, so dashboards can
-- count them per agent version without parsing `details`. Filled by the server from
-- `details.findings[].code` at insert (the DEFAULT below; rows written before this migration
-- compute it when read), so writers need not send it. Other metrics' rows have no findings and
-- get []. A `"code"` inside a finding's evidence text is escaped in the JSON and cannot match.
-- Portable DDL (18.16 and current releases); on a cluster the Distributed tables are recreated
-- with the column by `migrate --cluster`.
ALTER TABLE evaluations ADD COLUMN finding_codes Array(String) DEFAULT extractAll(details, '"code":"([a-z_0-9]+)","severity"');
