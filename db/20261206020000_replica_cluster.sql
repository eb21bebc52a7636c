-- The cluster a Kubernetes runtime placed the replica in (src/runtime/kubernetes/cluster-identity.ts: its certificate
-- authority's fingerprint), beside its pool (`node`, kubernetes/<namespace>), which two clusters' installations on one
-- database may share. Null: placed by a runtime that names no cluster (the local runtime, a cluster reached without a
-- certificate authority, an earlier version): the pool alone tells.
ALTER TABLE replicas ADD COLUMN cluster text;
