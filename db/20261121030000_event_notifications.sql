-- Live status: every endpoint event is announced on commit. The payload
-- carries ids only ("<event id>:<endpoint id>:<project id>"); subscribers read
-- the row. Download progress, which writes no event, is announced on its own
-- channel with the endpoint id.
CREATE FUNCTION notify_endpoint_event() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('endpoint_events', NEW.id || ':' || NEW.endpoint_id || ':' || NEW.project_id);
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER endpoint_events_notify AFTER INSERT ON endpoint_events
  FOR EACH ROW EXECUTE FUNCTION notify_endpoint_event();

CREATE INDEX endpoint_events_type_idx ON endpoint_events (endpoint_id, type);
