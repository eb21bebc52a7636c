/**
 * `npm run stop-engines [-- --force]`: stops the engines this machine runs for
 * the configured database (DATABASE_URL, or the embedded one under DATA_DIR,
 * as `npm start` and `npm run admin` choose it), gracefully (SIGTERM, then
 * SIGKILL after 10 s), and marks their replicas STOPPED so that the next start
 * starts fresh ones instead of adopting dead ones. It refuses while a gateway
 * holds endpoint leases on the database (that gateway would start the engines
 * again at once) unless --force.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.js';
import { engineLines, ENGINE_STOP_GRACE_MS, markGoneReplicasStopped, stopLocalEngines } from '../runtime/local-engines.js';
import { LocalRuntime } from '../runtime/local-runtime.js';
import { activeLeaseHolders, liveReplicasElsewhere, liveReplicasOnNode } from '../storage/node-replicas-repository.js';
import { exitOnFailure, openCliDatabase, UsageError } from './cli-database.js';

async function main(): Promise<number> {
  const { values } = parseArgs({ args: process.argv.slice(2), options: { force: { type: 'boolean' } }, strict: true });
  const config = loadConfig();
  const database = await openCliDatabase(config);
  try {
    const holders = await activeLeaseHolders(database.sql);
    if (holders.length > 0 && !values.force) {
      throw new UsageError(
        `a gateway is running on this database (it holds endpoint leases: ${holders.join(', ')}), and would start the engines again at once. ` +
          'Stop it first: Ctrl-C twice stops it and its engines. (A gateway that was killed holds its leases for LEASE_TTL_MS more.) ' +
          '--force stops the engines anyway.',
      );
    }
    // The runtime finds engines by the database's replica rows and its own state files under DATA_DIR/replicas.
    const runtime = new LocalRuntime({ dir: path.join(config.dataDir, 'replicas'), inventory: {}, cpuOnly: true });
    const stopped = await stopLocalEngines(runtime, { sql: database.sql, graceMs: ENGINE_STOP_GRACE_MS });
    if (stopped.length === 0) console.log('No engines were running on this machine.');
    else {
      console.log(`Stopped ${stopped.length} engine(s); their replicas are marked STOPPED:`);
      for (const line of engineLines(stopped)) console.log(line);
    }
    // Replicas whose engine had already exited (its idle exit, a crash while no gateway watched) would count as crashes.
    const live = await liveReplicasOnNode(database.sql, runtime.node);
    const gone = await markGoneReplicasStopped(
      database.sql,
      runtime,
      live.map((r) => r.id),
    );
    if (gone.length > 0) console.log(`Marked ${gone.length} replica(s) whose engine had already exited as STOPPED: ${gone.join(', ')}`);
    const elsewhere = await liveReplicasElsewhere(database.sql, runtime.node);
    if (elsewhere > 0) console.log(`${elsewhere} replica(s) on other machines were left alone: run this there.`);
    console.log('The next `npm start` starts fresh engines for the endpoints that still want replicas.');
    return 0;
  } finally {
    await database.close();
  }
}

main().then((code) => process.exit(code), exitOnFailure('stop-engines'));
