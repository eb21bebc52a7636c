/** Endpoints of the team's projects. (Being written.) */
export function EndpointsPage() {
  return <h1>Endpoints</h1>;
}
