/**
 * `npm start`: opens the database (embedded unless DATABASE_URL is set),
 * creates the admin and their first API key on an empty database, and serves
 * the gateway until SIGINT or SIGTERM.
 */
import { ConfigError, loadConfig } from './config.js';
import { startApp } from './app.js';
import { createLogger, type Logger } from './log.js';
import { createServices } from './services/index.js';
import { openDatabase } from './storage/open-database.js';

/** Set once the configuration is read: start-up failures after that are logged through it. */
let logger: Logger | undefined;

async function main(): Promise<void> {
  const config = loadConfig();
  logger = createLogger(config.log);
  const log = logger;
  const database = await openDatabase(config);
  const bootstrap = await createServices(database.sql).identity.bootstrap(config.adminApiKey);
  if (bootstrap) {
    const shown = config.adminApiKey ? '(the value of ADMIN_API_KEY)' : bootstrap.key.secret;
    console.log(
      [
        'First start: created the admin user, a default team and project, and an API key.',
        `  user     ${bootstrap.user.email} (${bootstrap.user.id})`,
        `  team     ${bootstrap.team.name} (${bootstrap.team.id})`,
        `  project  ${bootstrap.project.name} (${bootstrap.project.id})`,
        `  API key  ${shown}`,
        'The key is shown only this once: store it now. `npm run admin -- create-key` makes more.',
      ].join('\n'),
    );
  }

  const app = await startApp(config, database.sql, { logger: log });
  const { inventory } = app;
  const slots = Object.entries(inventory.inventory)
    .map(([kind, n]) => `${kind}=${n}`)
    .join(', ');
  log.info(
    `Replicas run here with ${config.engineCommand ? `ENGINE_COMMAND (${config.engineCommand})` : 'the built-in llama.cpp engine'}; ` +
      `${inventory.source === 'cpu' ? 'no GPU found, CPU-backed slots' : inventory.source === 'nvidia' ? 'GPUs' : 'GPU_INVENTORY'}: ${slots}; ` +
      `${config.engineCommand ? '' : `${config.engineThreads} engine thread(s) per replica; `}model cache ${config.modelCacheDir}`,
  );
  if (config.cpuWarning) log.warn(`Warning: ${config.cpuWarning}`);
  log.info(`Serving on ${app.gateway.url} (GraphQL at /graphql, REST under /dedicated); database: ${database.description}`);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: shutting down`);
    await app.close();
    await database.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    console.error(`Configuration error: ${error.message}`);
  } else if (logger) {
    logger.fatal({ err: error }, 'start-up failed');
  } else {
    console.error('Start-up failed:', error);
  }
  process.exit(1);
});
