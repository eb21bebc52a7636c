/**
 * The stand-in's child process (process.ts starts it with `node --import tsx`): the first message carries the options,
 * the stand-in starts and its address goes back; then each message calls one of its methods and gets the answer back.
 * It closes the stand-in and exits on `close`, or when its parent is gone.
 */
import type { FromChild, KubeStandInChildOptions, ToChild } from './process.js';
import { REMOTE_METHODS } from './process.js';
import { createKubeStandIn, type KubeStandIn } from './stand-in.js';

const send = (message: FromChild): void => {
  process.send!(message);
};
let standIn: KubeStandIn | undefined;

async function shutDown(): Promise<void> {
  await standIn?.close();
  process.disconnect?.();
  process.exit(0);
}

async function start(options: KubeStandInChildOptions): Promise<void> {
  try {
    standIn = await createKubeStandIn(options);
    send({ ready: { url: standIn.url, token: standIn.token } });
  } catch (error) {
    send({ failed: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exit(1);
  }
}

async function answer(id: number, method: string, args: unknown[]): Promise<void> {
  try {
    if (method === 'close') {
      await standIn?.close();
      // Exits once the answer is written.
      process.send!({ id } satisfies FromChild, () => void shutDown());
      return;
    }
    if (method === 'cpuUsage') return send({ id, result: process.cpuUsage() });
    if (!standIn || !(REMOTE_METHODS as readonly string[]).includes(method)) throw new Error(`no method ${method}`);
    const result = await (standIn[method as (typeof REMOTE_METHODS)[number]] as (...a: unknown[]) => unknown)(...args);
    send({ id, result });
  } catch (error) {
    send({ id, error: error instanceof Error ? error.message : String(error) });
  }
}

process.on('message', (message: ToChild) => {
  if ('options' in message) void start(message.options);
  else void answer(message.id, message.method, message.args);
});
process.once('disconnect', () => void shutDown());
