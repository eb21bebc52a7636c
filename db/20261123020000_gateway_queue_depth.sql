-- Requests waiting in each gateway process's admission queue, per endpoint:
-- each process upserts its own rows when the count changes (at most every
-- 250 ms) and again every second while it is not zero. The controller holding
-- an endpoint's lease adds the fresh rows' total to the engines' load as
-- demand; rows of a process that died stop being refreshed and are ignored by
-- their age (then deleted by the next process that publishes).
CREATE TABLE gateway_queue_depth (
  process_id   text NOT NULL,
  endpoint_id  text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  queued       integer NOT NULL CHECK (queued >= 0),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (endpoint_id, process_id)
);
