/**
 * The console's shell: sign-in when signed out; otherwise the header (team
 * switcher, navigation, sign-out) and the page the URL's hash names.
 * Routes (hash-based, so the gateway serves one page at `/`):
 *   #/                      endpoints of the team's projects
 *   #/endpoints/new         create form
 *   #/endpoints/:id         endpoint page (spec, versions, lifecycle, events, metrics)
 *   #/endpoints/:id/edit    update form
 *   #/playground/:id?       chat playground
 *   #/settings              API keys
 */
import { Link, Route, Router, Switch } from 'wouter';
import { useHashLocation } from 'wouter/use-hash-location';
import { Loading } from './components/ui.js';
import { SessionProvider, useSession, useSessionState } from './session.js';
import { SignInPage } from './pages/sign-in.js';
import { EndpointsPage } from './pages/endpoints/list.js';
import { CreateEndpointPage, EditEndpointPage } from './pages/endpoints/form-page.js';
import { EndpointPage } from './pages/endpoint/endpoint-page.js';
import { PlaygroundPage } from './pages/playground/playground-page.js';
import { SettingsPage } from './pages/settings/settings-page.js';

function TeamSwitcher() {
  const { teams, team, selectTeam } = useSession();
  if (teams.length === 0) return null;
  return (
    <label className="team-switcher">
      <span>Team</span>
      <select value={team?.id ?? ''} onChange={(e) => selectTeam(e.target.value)} aria-label="Team">
        {teams.map((t) => (
          <option key={t.id} value={t.id}>
            {t.name}
          </option>
        ))}
      </select>
    </label>
  );
}

function SignedIn() {
  const { me, signOut } = useSession();
  return (
    <>
      <a className="skip-link" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header className="top">
        <Link href="/" className="brand">
          Dedicated endpoints
        </Link>
        <nav aria-label="Main">
          <Link href="/">Endpoints</Link>
          <Link href="/playground">Playground</Link>
          <Link href="/settings">API keys</Link>
        </nav>
        <TeamSwitcher />
        <span className="who" title={me.user.email}>
          {me.user.name || me.user.email}
        </span>
        <button type="button" className="secondary" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        <Switch>
          <Route path="/" component={EndpointsPage} />
          <Route path="/endpoints/new" component={CreateEndpointPage} />
          <Route path="/endpoints/:id/edit">{(params) => <EditEndpointPage id={params.id} />}</Route>
          <Route path="/endpoints/:id">{(params) => <EndpointPage id={params.id} />}</Route>
          <Route path="/playground/:id?">{(params) => <PlaygroundPage id={params.id} />}</Route>
          <Route path="/settings" component={SettingsPage} />
          <Route>
            <h1>Not found</h1>
            <p>
              Nothing here. <Link href="/">Back to the endpoints</Link>.
            </p>
          </Route>
        </Switch>
      </main>
    </>
  );
}

function Shell() {
  const { session, restoring } = useSessionState();
  if (restoring) return <Loading what="your session" />;
  return session ? <SignedIn /> : <SignInPage />;
}

export function App() {
  return (
    <SessionProvider>
      <Router hook={useHashLocation}>
        <Shell />
      </Router>
    </SessionProvider>
  );
}
