-- Access changes: every change that can narrow what an API key may do (a key
-- revoked or deleted, a user deleted or changed, a membership added, changed
-- or removed) is announced on commit with the user's id, whoever wrote it (a
-- gateway, the admin CLI, plain SQL). Each gateway process drops that user's
-- cached principals and re-checks their open subscriptions. A key's
-- `last_used_at` touch announces nothing.
CREATE FUNCTION notify_identity_change() RETURNS trigger AS $$
BEGIN
  IF TG_TABLE_NAME = 'users' THEN
    IF TG_OP <> 'INSERT' THEN PERFORM pg_notify('identity_changes', OLD.id); END IF;
  ELSE
    IF TG_OP <> 'INSERT' THEN PERFORM pg_notify('identity_changes', OLD.user_id); END IF;
    IF TG_OP <> 'DELETE' THEN PERFORM pg_notify('identity_changes', NEW.user_id); END IF;
  END IF;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER api_keys_identity_update AFTER UPDATE OF revoked_at, key_hash, user_id ON api_keys
  FOR EACH ROW
  WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.key_hash IS DISTINCT FROM NEW.key_hash OR OLD.user_id IS DISTINCT FROM NEW.user_id)
  EXECUTE FUNCTION notify_identity_change();
CREATE TRIGGER api_keys_identity_delete AFTER DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION notify_identity_change();

CREATE TRIGGER users_identity_update AFTER UPDATE OF is_admin, default_team_id ON users
  FOR EACH ROW
  WHEN (OLD.is_admin IS DISTINCT FROM NEW.is_admin OR OLD.default_team_id IS DISTINCT FROM NEW.default_team_id)
  EXECUTE FUNCTION notify_identity_change();
CREATE TRIGGER users_identity_delete AFTER DELETE ON users
  FOR EACH ROW EXECUTE FUNCTION notify_identity_change();

CREATE TRIGGER team_members_identity AFTER INSERT OR UPDATE OR DELETE ON team_members
  FOR EACH ROW EXECUTE FUNCTION notify_identity_change();
