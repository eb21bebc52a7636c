-- The gateway processes whose controllers share the endpoints: each renews its row with its leases, and takes no more
-- endpoints than its share (the live members' count divides them). `pool`: where its runtime places replicas (the
-- local runtime: its machine; Kubernetes: the cluster): a gateway hands endpoints over to the others only when every
-- live member places replicas in the same pool (they can adopt the endpoint's replicas where they run).
CREATE TABLE controller_members (
  owner       text PRIMARY KEY,
  pool        text NOT NULL,
  expires_at  timestamptz NOT NULL
);
