-- The agent's own result of the query (the input contract's optional `result`: the database's
-- error, or the row count, column names and a sample of at most 100 rows), as the JSON object
-- the event carried after decoding's caps, or '' when it carried none. The review page shows it
-- beside the question and the SQL. Portable DDL (18.16 and current releases); on a cluster the
-- Distributed table is recreated with the column by `migrate --cluster`.
ALTER TABLE event_inputs ADD COLUMN result String DEFAULT '';
