/**
 * Live-status subscribers (a child process of the fan-out benchmark): opens
 * `count` `endpointStatus` subscriptions over graphql-ws (the
 * `graphql-transport-ws` protocol, spoken directly on `ws`) or over SSE
 * (POST /graphql, Accept: text/event-stream), each counted once its first
 * update (the current status) arrived. Then, per IPC request, it reports when
 * each subscriber received the update carrying a given `versionIndex`.
 *
 *   parent → { type: 'collect', versionIndex, t0, timeoutMs }
 *   child  → { type: 'collected', versionIndex, latencies (Float64Array, ms after t0), missing }
 *   parent → { type: 'close' }  (the child reports its result and exits)
 */
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { childMain, nowMs } from '../lib/env.js';

export interface SubscribersConfig {
  mode: 'ws' | 'sse';
  baseUrl: string;
  key: string;
  endpointId: string;
  count: number;
  connectConcurrency: number;
  /** Stop opening new subscriptions after this long; what is open by then is used. */
  connectBudgetMs: number;
}

export interface SubscribersResult {
  connected: number;
  /** Subscriptions that ended or failed after they were established. */
  lost: number;
  lostSamples: string[];
}

const QUERY =
  'subscription($id: ID!) { endpointStatus(endpointId: $id) { event { id type versionIndex } status { status phase currReplicaCnt } } }';
const VERSION = /"versionIndex":(\d+)/;

childMain<SubscribersConfig, SubscribersResult>(async (config, send, receive) => {
  const received = new Map<number, number[]>();
  const closers: (() => void)[] = [];
  let connected = 0;
  let failed = 0;
  let lost = 0;
  let closing = false;
  const failSamples: string[] = [];
  const lostSamples: string[] = [];
  /** A subscriber that could not open counts as failed; one that dropped after opening (not at close-down), as lost. */
  const failure = (why: string, ready: boolean, resolve: (opened: boolean) => void) => {
    if (!ready) {
      failed++;
      if (failSamples.length < 5) failSamples.push(why);
      resolve(false);
    } else if (!closing) {
      lost++;
      if (lostSamples.length < 5) lostSamples.push(why);
    }
  };

  const onPayload = (text: string) => {
    const match = VERSION.exec(text);
    if (!match) return;
    const v = Number(match[1]);
    const at = nowMs();
    let list = received.get(v);
    if (!list) received.set(v, (list = []));
    list.push(at);
  };

  /** Resolves true once the first update arrived; false on failure. */
  const openWs = () =>
    new Promise<boolean>((resolve) => {
      const url = `${config.baseUrl.replace(/^http/, 'ws')}/graphql`;
      const socket = new WebSocket(url, 'graphql-transport-ws', { perMessageDeflate: false });
      let ready = false;
      const fail = (why: string) => failure(why, ready, resolve);
      socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${config.key}` } })));
      socket.on('message', (data: Buffer) => {
        const text = data.toString('utf8');
        if (ready) {
          const head = text.slice(0, 40);
          if (head.includes('"type":"next"')) onPayload(text);
          else if (head.includes('"type":"ping"')) socket.send('{"type":"pong"}');
          else if (head.includes('"type":"error"') || head.includes('"type":"complete"')) fail(text.slice(0, 200));
          return;
        }
        if (text.includes('"connection_ack"')) {
          socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: QUERY, variables: { id: config.endpointId } } }));
        } else if (text.includes('"type":"next"')) {
          ready = true;
          connected++;
          resolve(true);
        } else if (text.includes('"type":"ping"')) {
          socket.send('{"type":"pong"}');
        } else {
          fail(text.slice(0, 200));
          socket.close();
        }
      });
      socket.on('error', (error) => fail(error.message));
      socket.on('close', (code, reason) => fail(`closed ${code} ${reason.toString()}`));
      closers.push(() => socket.terminate());
    });

  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const openSse = () =>
    new Promise<boolean>((resolve) => {
      const body = JSON.stringify({ query: QUERY, variables: { id: config.endpointId } });
      let ready = false;
      const fail = (why: string) => failure(why, ready, resolve);
      const req = http.request(`${config.baseUrl}/graphql`, {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${config.key}`,
          'content-type': 'application/json',
          accept: 'text/event-stream',
          'content-length': Buffer.byteLength(body),
        },
      });
      req.on('response', (res) => {
        if (res.statusCode !== 200) {
          fail(`HTTP ${res.statusCode}`);
          res.resume();
          return;
        }
        res.setEncoding('utf8');
        let buffer = '';
        res.on('data', (chunk: string) => {
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const event = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            if (!event.startsWith('event: next')) {
              if (event.startsWith('event: complete') || event.includes('"errors"')) fail(event.slice(0, 200));
              continue;
            }
            if (!ready) {
              ready = true;
              connected++;
              resolve(true);
            } else {
              onPayload(event);
            }
          }
        });
        res.on('end', () => fail('stream ended'));
        res.on('error', (e) => fail(e.message));
      });
      req.on('error', (e) => fail(e.message));
      req.end(body);
      closers.push(() => req.destroy());
    });

  // Open the subscriptions, a bounded number at a time, within the budget.
  const started = performance.now();
  const deadline = started + config.connectBudgetMs;
  let launched = 0;
  let lastReport = 0;
  const opener = async () => {
    while (launched < config.count && performance.now() < deadline) {
      launched++;
      await Promise.race([config.mode === 'ws' ? openWs() : openSse(), sleep(30_000)]);
      if (connected - lastReport >= 1000) {
        lastReport = connected;
        send({ type: 'progress', connected });
      }
    }
  };
  await Promise.all(Array.from({ length: config.connectConcurrency }, opener));
  send({ type: 'connected', connected, failed, ms: performance.now() - started, failSamples });

  await new Promise<void>((resolve) => {
    receive((message) => {
      if (message.type === 'collect') {
        const v = message.versionIndex as number;
        const t0 = message.t0 as number;
        const until = performance.now() + (message.timeoutMs as number);
        void (async () => {
          while ((received.get(v)?.length ?? 0) < connected - lost && performance.now() < until) await sleep(5);
          const times = received.get(v) ?? [];
          send({
            type: 'collected',
            versionIndex: v,
            latencies: Float64Array.from(times, (t) => t - t0),
            missing: connected - times.length,
          });
        })();
      } else if (message.type === 'close') {
        closing = true;
        for (const close of closers) close();
        resolve();
      }
    });
  });
  agent.destroy();
  return { connected, lost, lostSamples };
});
