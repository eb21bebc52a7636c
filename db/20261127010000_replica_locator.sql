-- A replica's place as its runtime names it (a process id, a pod's name): opaque to everyone but that runtime.
-- It replaces pid, which only the local runtime had; older rows keep theirs as their locator.
ALTER TABLE replicas ADD COLUMN locator text;
UPDATE replicas SET locator = pid::text WHERE pid IS NOT NULL AND locator IS NULL;
