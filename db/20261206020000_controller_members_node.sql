-- The pool of replicas each member's runtime follows (its `node`: kubernetes/<namespace>, a machine's host name). A
-- gateway that divides shards takes no endpoint whose live replicas all run in a pool that a live member of another
-- pool follows, and hands back those it holds: only that member's pool can watch them (see reconcile-loop.ts). Null:
-- a member of an earlier version, which says nothing of it.
ALTER TABLE controller_members ADD COLUMN node text;
