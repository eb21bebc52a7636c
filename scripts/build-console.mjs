// `npm start` runs this first (prestart): builds the web console when
// dist/console holds no build yet (npm ci builds it through `prepare`).
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

if (!existsSync(new URL('../dist/console/index.html', import.meta.url))) {
  console.log('Building the web console (npm run build)…');
  const result = spawnSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
  if (result.status !== 0) {
    // The API does not need the console: the gateway starts anyway and `/` says how to build it.
    console.error('The web console did not build; the gateway starts without it. Run `npm run build` to see why.');
  }
}
