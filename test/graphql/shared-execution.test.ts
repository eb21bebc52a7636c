/** The shared-execution plugin: subscribers asking the same thing of the same event share one execution. */
import { createSchema, createYoga } from 'graphql-yoga';
import { expect, test } from 'vitest';
import type { ExecutionResult } from 'graphql';
import { resultJson, useSharedSubscriptionExecution, type ResultSink } from '../../src/http/graphql/shared-execution.js';

interface Tick {
  n: number;
  /** A tick that fails to resolve: its result carries an error. */
  fail?: boolean;
}

interface Context {
  audience: string;
  sink?: ResultSink;
}

/** A subscription source whose events are shared objects, like the live-status hub's. */
function setup() {
  const listeners = new Set<(tick: Tick) => void>();
  let executions = 0;
  const source = () => {
    const queue: Tick[] = [];
    let wake: (() => void) | undefined;
    const listener = (tick: Tick) => (queue.push(tick), wake?.());
    listeners.add(listener);
    return {
      [Symbol.asyncIterator]() {
        return this;
      },
      async next(): Promise<IteratorResult<Tick>> {
        while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        return { done: false, value: queue.shift()! };
      },
      async return(): Promise<IteratorResult<Tick>> {
        listeners.delete(listener);
        return { done: true, value: undefined };
      },
    };
  };
  const schema = createSchema<Context>({
    typeDefs: `
      type Query { ok: Boolean }
      type Tick { n: Int!, scaled: Int! }
      type Subscription { shared(factor: Int!): Tick!, private(factor: Int!): Tick! }`,
    resolvers: {
      Tick: {
        scaled: (tick: Tick & { factor: number }) => {
          executions++;
          if (tick.fail) throw new Error('no scale for this tick');
          return tick.n * tick.factor;
        },
      },
      Subscription: {
        shared: { subscribe: source, resolve: (tick: Tick, { factor }: { factor: number }) => ({ ...tick, factor }) },
        private: { subscribe: source, resolve: (tick: Tick, { factor }: { factor: number }) => ({ ...tick, factor }) },
      },
    },
  });
  const yoga = createYoga<Context>({
    schema,
    logging: false,
    plugins: [useSharedSubscriptionExecution<Context>({ fields: ['shared'], audienceOf: (c) => c.audience, sinkOf: (c) => c.sink })],
  });
  const subscribe = async (field: 'shared' | 'private', factor: number, audience: string, sink?: ResultSink) => {
    const { parse, subscribe, contextFactory, schema } = yoga.getEnveloped({ audience, sink });
    const result = await subscribe({
      schema,
      document: parse(`subscription($f: Int!) { ${field}(factor: $f) { n scaled } }`),
      variableValues: { f: factor },
      contextValue: await contextFactory(),
    });
    return (result as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  };
  const publish = (tick: Tick) => listeners.forEach((l) => l(tick));
  /** Subscribes to the shared field with the variables as sent, before any coercion. */
  const subscribeRaw = async (variableValues: Record<string, unknown>) => {
    const { parse, subscribe, contextFactory, schema } = yoga.getEnveloped({ audience: 'a' });
    return subscribe({
      schema,
      document: parse('subscription($f: Int!) { shared(factor: $f) { n } }'),
      variableValues,
      contextValue: await contextFactory(),
    });
  };
  return { subscribe, subscribeRaw, publish, listeners, executions: () => executions };
}

test('one execution per event for the same operation, variables and audience; separate ones otherwise', async () => {
  const s = setup();
  const same = await Promise.all([s.subscribe('shared', 2, 'a'), s.subscribe('shared', 2, 'a'), s.subscribe('shared', 2, 'a')]);
  const otherVariables = await s.subscribe('shared', 3, 'a');
  const otherAudience = await s.subscribe('shared', 2, 'b');
  const all = [...same, otherVariables, otherAudience];
  const results = all.map((it) => it.next());
  await new Promise((r) => setTimeout(r, 10)); // every subscriber is listening
  s.publish({ n: 5 });
  const values = (await Promise.all(results)).map((r) => r.value as { data: { shared: { n: number; scaled: number } } });
  expect(values.map((v) => v.data.shared.scaled)).toEqual([10, 10, 10, 15, 10]);
  expect(values[1]).toBe(values[0]); // the very same result object
  expect(values[4]).not.toBe(values[0]);
  expect(s.executions()).toBe(3); // (2, a), (3, a) and (2, b)

  // A second event is a new execution, shared again.
  const next = same.map((it) => it.next());
  s.publish({ n: 6 });
  expect((await Promise.all(next)).map((r) => (r.value as { data: { shared: { scaled: number } } }).data.shared.scaled)).toEqual([
    12, 12, 12,
  ]);
  expect(s.executions()).toBe(4);

  // Ending a subscriber ends its source subscription.
  for (const it of all) await it.return!();
  expect(s.listeners.size).toBe(0);
});

test('fields not named for sharing execute per subscriber', async () => {
  const s = setup();
  const subscribers = await Promise.all([s.subscribe('private', 2, 'a'), s.subscribe('private', 2, 'a')]);
  const results = subscribers.map((it) => it.next());
  await new Promise((r) => setTimeout(r, 10));
  s.publish({ n: 1 });
  await Promise.all(results);
  expect(s.executions()).toBe(2);
  for (const it of subscribers) await it.return!();
});

/** A sink that takes results while `open`, recording them. */
class RecordingSink implements ResultSink {
  written: ExecutionResult[] = [];
  constructor(public open = true) {}
  write(result: ExecutionResult): boolean {
    if (this.open) this.written.push(result);
    return this.open;
  }
}

test('a sink takes shared results without errors; what it refuses, and errors, are yielded as usual', async () => {
  const s = setup();
  const sinks = [new RecordingSink(), new RecordingSink()];
  const subscribers = await Promise.all(sinks.map((sink) => s.subscribe('shared', 2, 'a', sink)));
  const pending = subscribers.map((it) => it.next());
  let settled = 0;
  for (const p of pending) void p.then(() => settled++);
  await new Promise((r) => setTimeout(r, 10));

  s.publish({ n: 1 });
  s.publish({ n: 2 });
  await new Promise((r) => setTimeout(r, 10));
  expect(sinks.map((sink) => sink.written.map((r) => (r.data as { shared: { scaled: number } }).shared.scaled))).toEqual([
    [2, 4],
    [2, 4],
  ]);
  expect(sinks[1]!.written[0]).toBe(sinks[0]!.written[0]); // one execution, one object
  expect(resultJson(sinks[0]!.written[0]!)).toBe('{"data":{"shared":{"n":1,"scaled":2}}}');
  expect(resultJson(sinks[1]!.written[0]!)).toBe(resultJson(sinks[0]!.written[0]!));
  expect(settled).toBe(0); // nothing went the usual way
  expect(s.executions()).toBe(2);

  // A sink that refuses (a socket that is behind): the result is yielded instead.
  sinks[1]!.open = false;
  s.publish({ n: 3 });
  const [, refused] = await Promise.all([new Promise((r) => setTimeout(r, 10)), pending[1]!]);
  expect((refused.value as ExecutionResult).data).toEqual({ shared: { n: 3, scaled: 6 } });
  expect(sinks[0]!.written).toHaveLength(3);
  expect(settled).toBe(1);

  // A result with errors is never written to a sink: it goes through the usual path (and its error masking).
  s.publish({ n: 4, fail: true });
  const failed = await pending[0]!;
  expect((failed.value as ExecutionResult).errors?.[0]?.message).toBe('Unexpected error.');
  expect(sinks[0]!.written).toHaveLength(3);

  // Once ended, a subscriber's sink gets nothing more.
  for (const it of subscribers) await it.return!();
  s.publish({ n: 5 });
  await new Promise((r) => setTimeout(r, 10));
  expect(sinks[0]!.written).toHaveLength(3);
  expect(s.listeners.size).toBe(0);
});

test('variables nested deeper than JSON.stringify can go are refused by their coercion, not a stack overflow', async () => {
  const s = setup();
  let deep: unknown = [];
  for (let i = 0; i < 200_000; i++) deep = [deep];
  expect(() => JSON.stringify(deep)).toThrow(RangeError);
  const result = (await s.subscribeRaw({ f: deep })) as ExecutionResult;
  expect(result.errors?.[0]?.message).toMatch(/^Variable "\$f" got invalid value/);
  expect(s.listeners.size).toBe(0);
});
