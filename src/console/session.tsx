/**
 * The signed-in session: the API key (kept in session storage, so it ends
 * with the tab), the caller, their teams and the team picked in the switcher.
 * Every page reads the API client and the team from here.
 */
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';
import { ApiError, createApi, verifyKey, type Api } from './api/graphql.js';
import { ConsoleMeDocument, ConsoleTeamsDocument, type ConsoleMeQuery, type ConsoleTeamsQuery } from './api/generated.js';

const KEY_STORAGE = 'dedicated.apiKey';
const TEAM_STORAGE = 'dedicated.teamId';

export type Team = ConsoleTeamsQuery['teams'][number];
export type Me = ConsoleMeQuery['me'];

export interface Session {
  api: Api;
  me: Me;
  teams: Team[];
  team: Team | undefined;
  selectTeam(id: string): void;
  /** Re-reads the teams (after a project is created, say). */
  refreshTeams(): Promise<void>;
  signOut(): void;
  /** Whether an API key's prefix is the signed-in key's (to warn before revoking it); the key itself is never handed out. */
  isSessionKey(prefix: string): boolean;
}

interface SessionState {
  session: Session | undefined;
  /** True while a stored key is being checked at load. */
  restoring: boolean;
  signIn(apiKey: string): Promise<void>;
  /** Why the last session ended (a revoked key), shown on the sign-in page. */
  notice: string | undefined;
}

const SessionContext = createContext<SessionState | undefined>(undefined);

export function useSessionState(): SessionState {
  const state = useContext(SessionContext);
  if (!state) throw new Error('useSessionState outside SessionProvider');
  return state;
}

/** The signed-in session; pages under the signed-in layout only. */
export function useSession(): Session {
  const { session } = useSessionState();
  if (!session) throw new Error('useSession while signed out');
  return session;
}

function readStorage(key: string): string | undefined {
  try {
    return window.sessionStorage.getItem(key) ?? undefined;
  } catch {
    return undefined;
  }
}

function writeStorage(key: string, value: string | undefined): void {
  try {
    if (value === undefined) window.sessionStorage.removeItem(key);
    else window.sessionStorage.setItem(key, value);
  } catch {
    // Storage refused (private mode): the session lasts until reload.
  }
}

export function SessionProvider({ children }: { children: ReactNode }) {
  const [apiKey, setApiKey] = useState<string | undefined>(() => readStorage(KEY_STORAGE));
  const [me, setMe] = useState<Me | undefined>();
  const [teams, setTeams] = useState<Team[]>([]);
  const [teamId, setTeamId] = useState<string | undefined>(() => readStorage(TEAM_STORAGE));
  const [restoring, setRestoring] = useState(apiKey !== undefined);
  const [notice, setNotice] = useState<string | undefined>();

  const signOut = useCallback((reason?: string) => {
    writeStorage(KEY_STORAGE, undefined);
    setApiKey(undefined);
    setMe(undefined);
    setTeams([]);
    setNotice(reason);
  }, []);

  const api = useMemo(
    () => (apiKey ? createApi(apiKey, () => signOut('The API key no longer works: sign in again.')) : undefined),
    [apiKey, signOut],
  );
  useEffect(() => () => api?.close(), [api]);

  const loadTeams = useCallback(async (client: Api) => {
    const result = await client.request(ConsoleTeamsDocument, {});
    setTeams(result.teams);
  }, []);

  // Whenever the key changes (sign-in, or a key kept from earlier in this tab): who the caller is, and their teams.
  useEffect(() => {
    if (!api) return;
    let cancelled = false;
    Promise.all([api.request(ConsoleMeDocument, {}), api.request(ConsoleTeamsDocument, {})])
      .then(([meResult, teamsResult]) => {
        if (cancelled) return;
        setMe(meResult.me);
        setTeams(teamsResult.teams);
      })
      .catch((error: unknown) => {
        if (!cancelled) signOut(error instanceof ApiError ? error.message : 'Could not restore the session.');
      })
      .finally(() => {
        if (!cancelled) setRestoring(false);
      });
    return () => {
      cancelled = true;
    };
  }, [api, signOut]);

  const signIn = useCallback(async (key: string) => {
    // A wrong key is refused here, on the sign-in page, and never stored.
    await verifyKey(key, ConsoleMeDocument);
    writeStorage(KEY_STORAGE, key);
    setNotice(undefined);
    setRestoring(true);
    setApiKey(key);
  }, []);

  const team = teams.find((t) => t.id === teamId) ?? teams.find((t) => t.id === me?.defaultTeam?.id) ?? teams[0];
  const selectTeam = useCallback((id: string) => {
    writeStorage(TEAM_STORAGE, id);
    setTeamId(id);
  }, []);

  const session: Session | undefined =
    api && me
      ? {
          api,
          me,
          teams,
          team,
          selectTeam,
          refreshTeams: () => loadTeams(api),
          signOut: () => signOut(),
          isSessionKey: (prefix: string) => prefix.length > 0 && apiKey !== undefined && apiKey.startsWith(prefix),
        }
      : undefined;

  return <SessionContext.Provider value={{ session, restoring, signIn, notice }}>{children}</SessionContext.Provider>;
}
