-- Each engine answers only its gateway: the token the runtime passed it at spawn
-- (ENGINE_TOKEN), which every process that calls the replica sends as a bearer token.
ALTER TABLE replicas ADD COLUMN engine_token text;
