-- One row per chat completion the gateway served (or refused), for metrics:
-- time to first token, tokens in and out, and duration.
CREATE TABLE request_log (
  id                 bigserial PRIMARY KEY,
  endpoint_id        text NOT NULL,
  replica_id         text,
  team_id            text NOT NULL,
  user_id            text NOT NULL,
  stream             boolean NOT NULL,
  http_status        integer NOT NULL,
  prompt_tokens      integer,
  completion_tokens  integer,
  -- null when no token came (an error, or a client that left first)
  ttft_ms            double precision,
  duration_ms        double precision NOT NULL,
  queued_ms          double precision NOT NULL DEFAULT 0,
  finish_reason      text,
  cancelled          boolean NOT NULL DEFAULT false,
  started_at         timestamptz NOT NULL
);
CREATE INDEX request_log_endpoint_idx ON request_log (endpoint_id, started_at);
