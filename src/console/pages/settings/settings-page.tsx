/** API keys. (Being written.) */
export function SettingsPage() {
  return <h1>API keys</h1>;
}
