/**
 * A throw-away gateway that needs no network (scripts/sandbox.ts), for trying
 * the service and for working on the web console: `npm run sandbox`. Prints
 * the console's URL, an API key, a project, the hub's models, where it keeps
 * its data (removed when it stops), and a line that sets the variables the
 * CLI and the docs' examples read.
 *
 *   npm run sandbox            # then open the URL
 *   PORT=8080 npm run sandbox  # a fixed port (for `npm run console:dev`)
 */
import { ownShutdownSignals } from '../src/storage/embedded-postgres.js';
import { removeLeftovers, startSandbox, THINKING_REPO, TINY_REPO } from './sandbox.js';

const leftovers = await removeLeftovers();
if (leftovers.length > 0) {
  console.log(`Removed ${leftovers.length} directory(ies) left by sandboxes that were killed: ${leftovers.join(', ')}`);
}
const sandbox = await startSandbox({ ...(process.env.PORT ? { port: process.env.PORT } : {}) });
let stopping = false;
const stop = async () => {
  // One stop, however many signals come (a terminal and a wrapper such as `npm` or `timeout` may each send one).
  if (stopping) return;
  stopping = true;
  console.log(`Stopping the sandbox and removing ${sandbox.dataDir} …`);
  try {
    await sandbox.stop();
    console.log('Stopped; its data is removed.');
    process.exit(0);
  } catch (error) {
    console.error(`The sandbox did not stop cleanly: ${(error as Error).message}`);
    process.exit(1);
  }
};
// The sandbox stops its engines and its database itself (embedded-postgres's own handlers would stop the database first).
ownShutdownSignals(() => void stop());
console.log(
  [
    'Sandbox: a throw-away gateway with its own PostgreSQL, a stand-in hub and real engines; no network needed.',
    `  console    ${sandbox.url}/`,
    `  API key    ${sandbox.key}`,
    `  project    ${sandbox.projectId}`,
    `  models     ${TINY_REPO}, ${THINKING_REPO}, test-org/short-context-GGUF (256-token context):`,
    '             tiny test models with random weights, which answer gibberish',
    `  data       ${sandbox.dataDir} (removed when the sandbox stops)`,
    'For the CLI and the docs’ examples, in another terminal:',
    `  export DEDICATED_BASE_URL=${sandbox.url} DEDICATED_API_KEY=${sandbox.key} BASE=${sandbox.url} KEY=${sandbox.key} PROJECT=${sandbox.projectId}`,
    'Ctrl-C stops everything and removes the data.',
  ].join('\n'),
);
