/** What the lost-record tests read of an endpoint's replica rows: state, where each runs, whether it has its engine token. */
import type { Sql } from '../../src/storage/database.js';

export interface PlacementRow {
  id: string;
  state: string;
  locator: string | null;
  has_token: boolean;
  last_error: string | null;
}

/** The endpoint's replica rows, oldest first. */
export const placementRows = (sql: Sql, endpointId: string) =>
  sql<PlacementRow[]>`
    SELECT id, state, locator, engine_token IS NOT NULL AS has_token, last_error FROM replicas
    WHERE endpoint_id = ${endpointId} ORDER BY created_at, id`;
