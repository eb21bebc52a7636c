/** SQL for projects. */
import type { ProjectRecord } from '../domain/identity.js';
import type { Queryable } from './database.js';

interface ProjectRow {
  id: string;
  team_id: string;
  name: string;
  created_at: Date;
}

const toProject = (r: ProjectRow): ProjectRecord => ({ id: r.id, teamId: r.team_id, name: r.name, createdAt: r.created_at });

export async function insertProject(db: Queryable, p: { id: string; teamId: string; name: string }): Promise<ProjectRecord> {
  const [row] = await db<ProjectRow[]>`
    INSERT INTO projects (id, team_id, name) VALUES (${p.id}, ${p.teamId}, ${p.name})
    RETURNING id, team_id, name, created_at`;
  return toProject(row!);
}

export async function findProjects(db: Queryable, ids: readonly string[]): Promise<ProjectRecord[]> {
  const rows = await db<ProjectRow[]>`
    SELECT id, team_id, name, created_at FROM projects WHERE id = ANY(${ids as string[]})`;
  return rows.map(toProject);
}

export async function listProjectsOfTeams(db: Queryable, teamIds: readonly string[]): Promise<ProjectRecord[]> {
  const rows = await db<ProjectRow[]>`
    SELECT id, team_id, name, created_at FROM projects
    WHERE team_id = ANY(${teamIds as string[]}) ORDER BY created_at, id`;
  return rows.map(toProject);
}
