/**
 * `npm start`: opens the database (embedded unless DATABASE_URL is set),
 * creates the admin and their first API key on an empty database, and serves
 * the gateway until SIGINT or SIGTERM. Engines keep running for the next
 * start to adopt; the shutdown says which, and a second Ctrl-C (or
 * STOP_ENGINES_ON_EXIT) stops them too.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError, loadConfig, type Config } from './config.js';
import { startApp } from './app.js';
import { listenForProbes, startingProbes } from './http/health-listener.js';
import { createLogger, type Logger } from './log.js';
import {
  ENGINE_STOP_GRACE_MS,
  engineLines,
  enginesLeftMessage,
  markGoneReplicasStopped,
  runningLocalEngines,
  stopLocalEngines,
  type LocalEngine,
} from './runtime/local-engines.js';
import type { LocalRuntime } from './runtime/local-runtime.js';
import { createServices } from './services/index.js';
import { ownShutdownSignals } from './storage/embedded-postgres.js';
import { openDatabase, type OpenDatabase } from './storage/open-database.js';
import { keepRunningOnOrphanedDatabaseFailures } from './storage/orphaned-rejections.js';

/** Set once the configuration is read: start-up failures after that are logged through it. */
let logger: Logger | undefined;

async function main(): Promise<void> {
  const config = loadConfig();
  logger = createLogger(config.log);
  const log = logger;
  keepRunningOnOrphanedDatabaseFailures((message, error) =>
    log.warn({ error: error instanceof Error ? error.message : String(error) }, message),
  );
  // HEALTH_PORT: the probes' listener opens now, before the database, whose migrations may take minutes: a liveness
  // probe that found nothing listening meanwhile would have the kubelet restart the gateway mid-migration, over and
  // over. Until the gateway serves, /healthz answers 200 and /readyz 503 `starting` with the step below; the gateway
  // then takes the listener over on the same port. A start that fails exits as ever, the listener with it.
  let step = config.databaseUrl ? 'migrating the database' : 'starting the database, then migrating it';
  const probesListener =
    config.healthPort === undefined
      ? undefined
      : await listenForProbes(
          startingProbes(() => step),
          { port: config.healthPort, host: config.host },
        );
  if (probesListener) {
    log.info(
      `Health checks (/healthz, /readyz) on ${probesListener.url} (HEALTH_PORT), outside HTTP_MAX_CONNECTIONS; ` +
        '/readyz answers 503 "starting" until the gateway serves',
    );
  }
  // A migration that gives up on a table's lock is tried again a few times; each retry says why.
  const database = await openDatabase(config, { migrations: { onRetry: (message) => log.warn(message) } });
  step = 'starting the gateway';
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

  const app = await startApp(config, database.sql, { logger: log, ...(probesListener ? { probesListener } : {}) });
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

  const shutdown = new Shutdown(config, log, {
    close: async () => {
      // Requests in flight get the drain (DRAIN_TIMEOUT_MS); what comes after it (passes in flight, a last flush) gets
      // CLOSE_TIMEOUT_MS. A database that stopped with the gateway (a terminal's Ctrl-C reaches the embedded one too) must
      // not hold the exit.
      const bound = config.drainTimeoutMs + CLOSE_TIMEOUT_MS;
      if (!(await settledWithin(app.close(config.drainTimeoutMs), bound))) {
        log.warn(`the gateway did not close within ${bound / 1000} s; going on without it`);
      }
      return app.local ? runningLocalEngines(app.local) : [];
    },
    stopEngines: () => (app.local ? stopEnginesAndMark(config, database, app.local, log) : Promise.resolve({ engines: [], marked: true })),
    exit: async () => {
      if (!(await settledWithin(database.close(), DATABASE_CLOSE_TIMEOUT_MS))) {
        log.warn(`the database did not close within ${DATABASE_CLOSE_TIMEOUT_MS / 1000} s; exiting without it`);
      }
      process.exit(0);
    },
  });
  ownShutdownSignals((signal) => shutdown.signal(signal));
}

/**
 * Stops this machine's engines and marks their replicas STOPPED. A
 * terminal's Ctrl-C also reaches the embedded PostgreSQL (it runs in the
 * same process group) and stops it: the engines are stopped without it, and
 * the database is opened again to mark them.
 */
async function stopEnginesAndMark(config: Config, database: OpenDatabase, runtime: LocalRuntime, log: Logger): Promise<EnginesStopped> {
  const reachable = await database.sql`SELECT 1`.then(
    () => true,
    () => false,
  );
  if (reachable) return { engines: await stopLocalEngines(runtime, { sql: database.sql }), marked: true };
  const stopped = await stopLocalEngines(runtime);
  if (stopped.length === 0) return { engines: stopped, marked: true };
  try {
    if (config.databaseUrl) throw new Error('the database is unreachable');
    const reopened = await reopenEmbedded(config);
    try {
      await markGoneReplicasStopped(
        reopened.sql,
        runtime,
        stopped.map((e) => e.replicaId),
      );
    } finally {
      await reopened.close();
    }
    return { engines: stopped, marked: true };
  } catch (error) {
    log.warn(
      { error: error instanceof Error ? error.message : String(error) },
      'could not mark the stopped replicas STOPPED: the next start finds their engines gone and replaces them',
    );
    return { engines: stopped, marked: false };
  }
}

interface EnginesStopped {
  engines: LocalEngine[];
  /** Whether their replicas were marked STOPPED (the database could be reached). */
  marked: boolean;
}

/** Opens the embedded database again once the stopping server is gone (until then, it answers "shutting down"). */
async function reopenEmbedded(config: Config): Promise<OpenDatabase> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      return await openDatabase(config);
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(250);
    }
  }
}

/**
 * A signal this soon after the one before it is the same keypress delivered twice, not a second
 * Ctrl-C: the terminal signals the whole process group, and npm relays it to its child as well,
 * tens of milliseconds apart.
 */
const DUPLICATE_SIGNAL_MS = 150;
/** How long the gateway's close may take after its drain (passes in flight, a last flush) before the process goes on without it. */
const CLOSE_TIMEOUT_MS = 20_000;
/** How long the database's close may take on the way out. */
const DATABASE_CLOSE_TIMEOUT_MS = 5000;

/** Whether `work` settled within `ms` (its failure counts as settled: the caller goes on either way). */
async function settledWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const done = work.then(
    () => true,
    () => true,
  );
  try {
    return await Promise.race([done, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Ctrl-C (SIGINT) or SIGTERM: the gateway drains (it refuses new connections,
 * /readyz answers 503, subscriptions other than chat completions end at once,
 * requests in flight get up to DRAIN_TIMEOUT_MS, those still queued then are
 * answered 503: src/http/drain.ts), then closes (controller passes in
 * flight finish) and says which engines it leaves running for the
 * next start to adopt. A second Ctrl-C (until SECOND_SIGNAL_WINDOW_MS, 5 s, after
 * that list; one within DUPLICATE_SIGNAL_MS of the last is the same keypress relayed) or STOP_ENGINES_ON_EXIT stops them too; a third Ctrl-C exits at
 * once. After SIGTERM (a service manager) no second signal is awaited, and
 * another SIGTERM exits at once.
 */
class Shutdown {
  private signals = 0;
  private lastSignalAt = -Infinity;
  private stopEngines: boolean;
  private secondSignal: (() => void) | undefined;

  constructor(
    private readonly config: Config,
    private readonly log: Logger,
    private readonly steps: {
      /** Closes the gateway and the controller; answers the engines still running. */
      close: () => Promise<LocalEngine[]>;
      stopEngines: () => Promise<EnginesStopped>;
      exit: () => Promise<void>;
    },
  ) {
    this.stopEngines = config.stopEnginesOnExit;
  }

  /** Said through the logger and, plainly, on the terminal (stderr: stdout carries the JSON log lines). */
  private say(message: string, fields: Record<string, unknown> = {}): void {
    this.log.info(fields, message);
    process.stderr.write(`${message}\n`);
  }

  signal(signal: 'SIGINT' | 'SIGTERM'): void {
    const now = performance.now();
    if (now - this.lastSignalAt < DUPLICATE_SIGNAL_MS) return;
    this.lastSignalAt = now;
    this.signals++;
    if (this.signals === 1) {
      void this.run(signal).catch((error: unknown) => {
        this.log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      });
    } else if (this.signals === 2 && signal === 'SIGINT' && !this.stopEngines) {
      this.stopEngines = true;
      this.say(`${signal} again: stopping the engines too (a third signal exits at once)`);
      this.secondSignal?.();
    } else {
      this.say(`${signal} again: exiting now; engines are left as they are`);
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
  }

  private async run(signal: 'SIGINT' | 'SIGTERM'): Promise<void> {
    const interactive = signal === 'SIGINT' && !this.stopEngines;
    this.say(
      `${signal}: shutting down; ` +
        (this.stopEngines
          ? 'the engines are stopped too (STOP_ENGINES_ON_EXIT)'
          : `engines keep running for the next start${interactive ? ' (press Ctrl-C again to stop them too)' : ''}`),
    );
    this.say(
      `Draining: new connections are refused and /readyz answers 503; requests in flight get up to ${this.config.drainTimeoutMs / 1000} s ` +
        '(DRAIN_TIMEOUT_MS) to finish, chat completions streamed over GraphQL included; requests still queued then are answered 503; ' +
        'other subscriptions end now.',
    );
    const engines = await this.steps.close();
    if (engines.length === 0) {
      this.say('No engines left running.', { enginesLeftRunning: [] });
    } else if (!this.stopEngines) {
      const message = enginesLeftMessage(engines, {
        idleExitMs: this.config.engineIdleExitMs,
        engineCommand: this.config.engineCommand !== undefined,
        stopHint: interactive
          ? `Press Ctrl-C again within ${this.config.secondSignalWindowMs / 1000} s to stop them as well.`
          : 'STOP_ENGINES_ON_EXIT=1 makes a stopping gateway stop them too.',
      });
      this.say(message, { enginesLeftRunning: engines });
      if (interactive) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.config.secondSignalWindowMs);
          this.secondSignal = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    }
    if (this.stopEngines && engines.length > 0) {
      this.say(`Stopping ${engines.length} engine(s): SIGTERM (requests in flight finish), SIGKILL after ${ENGINE_STOP_GRACE_MS / 1000} s`);
      const { engines: stopped, marked } = await this.steps.stopEngines();
      this.say(
        [
          `Stopped ${stopped.length} engine(s); ` +
            (marked
              ? 'their replicas are marked STOPPED, and the next start starts fresh ones.'
              : 'their replicas could not be marked STOPPED (no database): the next start finds them gone and replaces them.'),
          ...engineLines(stopped),
        ].join('\n'),
        { enginesStopped: stopped, replicasMarkedStopped: marked },
      );
    }
    await this.steps.exit();
  }
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
