-- The gateway processes whose controllers share the endpoints: each renews its row with its leases, and takes no more
-- endpoints than its share (the live members' count divides them). A member counts for the others once it has run for
-- a lease's TTL since `joined_at` (a gateway that crashes as it starts makes nobody hand endpoints over). `pool`: where
-- its runtime's replicas can be adopted by another gateway (Kubernetes: the cluster and namespace; the local runtime:
-- the process alone): a gateway hands endpoints over to the others only when every live member is in its pool.
CREATE TABLE controller_members (
  owner       text PRIMARY KEY,
  pool        text NOT NULL,
  joined_at   timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL
);
