/**
 * A throw-away gateway for working on the web console (scripts/sandbox.ts).
 * Prints the console's URL and an API key.
 *
 *   npx tsx scripts/console-sandbox.ts            # then open the URL
 *   PORT=8080 npx tsx scripts/console-sandbox.ts  # a fixed port (for `npm run console:dev`)
 */
import { ownShutdownSignals } from '../src/storage/embedded-postgres.js';
import { startSandbox, THINKING_REPO, TINY_REPO } from './sandbox.js';

const sandbox = await startSandbox({ ...(process.env.PORT ? { port: process.env.PORT } : {}) });
console.log(
  `console   ${sandbox.url}/\nAPI key   ${sandbox.key}\nproject   ${sandbox.projectId}\nhub repos ${TINY_REPO}, ${THINKING_REPO}, test-org/short-context-GGUF (256-token context)\nCtrl-C stops everything.`,
);
let stopping = false;
const stop = async () => {
  // One stop, however many signals come (a terminal and a wrapper such as `timeout` may each send one).
  if (stopping) return;
  stopping = true;
  await sandbox.stop();
  process.exit(0);
};
// The sandbox stops its engines and its database itself (embedded-postgres's own handlers would stop the database first).
ownShutdownSignals(() => void stop());
