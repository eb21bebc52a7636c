-- What a replica's start resolved its version's model to (the commit, the file), written with its placement: a
-- gateway that adopts the replica mid-start records that model with the version, as the gateway that placed it would.
ALTER TABLE replicas ADD COLUMN model jsonb;
