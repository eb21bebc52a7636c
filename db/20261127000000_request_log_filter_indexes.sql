-- The activity filters (src/storage/request-log-repository.ts listActivity) read one page of an endpoint's newest
-- requests: by user, errors only, or by status. Without an index that matches, a rare filter value made PostgreSQL
-- read every row of a busy endpoint's 30-day log for each page (600,000 rows: 110-250 ms a query, any team member
-- could repeat it). Each index here yields the page in id order, from its own rows.
CREATE INDEX request_log_endpoint_user_idx ON request_log (endpoint_id, user_id, id DESC);
CREATE INDEX request_log_endpoint_errors_idx ON request_log (endpoint_id, id DESC) WHERE http_status >= 400 OR error_code IS NOT NULL;
CREATE INDEX request_log_endpoint_status_idx ON request_log (endpoint_id, http_status, id DESC);
