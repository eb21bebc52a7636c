/**
 * An endpoint's metrics and request activity: `Endpoint.metrics(from, to,
 * step)` (series ready to plot: one timestamp per step and one value per
 * step for every metric), `Endpoint.requests(first, after, filter)` (its
 * requests, newest first, with their content when content logging was on),
 * and the `endpointMetrics(id)` subscription (the current minute's figures
 * whenever they change). The Endpoint is reached only through the access
 * checks, so these fields check nothing more.
 */
import { GraphQLError } from 'graphql';
import type { GraphQLContext } from '../context.js';
import { builder } from '../builder.js';
import type { ActivityEntry, MetricsSeries } from '../../../services/metrics-service.js';
import { COUNT_METRICS, OPTIONAL_METRICS, RATE_METRICS } from '../../../services/metrics-figures.js';
import type { MinuteFigures } from '../../../services/live-metrics.js';
import { CONNECTION_ARG_NAMES, connectionArgs, connectionType } from './connection.js';
import { Endpoint } from './endpoints.js';
import { unwrapOrThrow } from './errors.js';
import { User } from './identity.js';

const DESCRIPTIONS: Record<string, string> = {
  requests: 'Requests that ended in the step, refused ones (400, 429, 503 before reaching a replica) included.',
  errors4xx: 'Requests answered with a 4xx status (refused by the gateway, e.g. 429 queue_full, or by the replica).',
  errors5xx: 'Requests answered with a 5xx status.',
  errorsCut: 'Answers cut short because the replica stopped (upstream_disconnected).',
  cancelled: 'Requests whose client left before the answer ended.',
  promptTokens: 'Prompt tokens processed.',
  completionTokens: 'Completion tokens generated.',
  requestsPerSecond: 'Requests per second over the step.',
  completionTokensPerSecond: 'Completion tokens per second over the step (throughput).',
  durationAvgMs: 'Average latency of the served requests, to the end of the answer.',
  ttftAvgMs: 'Average time to first token (the whole answer when not streamed).',
  tpotAvgMs: 'Average time per output token after the first (streamed answers).',
  queueWaitAvgMs: 'Average time waiting for a free slot.',
  replicasCurrent: 'Largest sampled count of running replicas.',
  replicasDesired: 'Largest sampled count of desired replicas.',
  replicasUpdated: 'Largest sampled count of replicas on the current version.',
};

const EndpointMetrics = builder.objectRef<MetricsSeries>('EndpointMetrics').implement({
  description:
    'Series of an endpoint over a range: `timestamps` holds the start of each step, and every metric one value per timestamp. ' +
    'Counts are 0 and latencies null in a step without data. Percentiles come from fixed buckets (within 25 %).',
  fields: (t) => ({
    from: t.field({ type: 'DateTime', resolve: (s) => s.from }),
    to: t.field({ type: 'DateTime', resolve: (s) => s.to }),
    stepSeconds: t.int({ resolve: (s) => s.stepSeconds }),
    timestamps: t.field({ type: ['DateTime'], resolve: (s) => s.timestamps }),
    ...Object.fromEntries(
      [...COUNT_METRICS, ...RATE_METRICS].map((name) => [
        name,
        t.floatList({ description: DESCRIPTIONS[name], resolve: (s) => s.values[name] }),
      ]),
    ),
    ...Object.fromEntries(
      OPTIONAL_METRICS.map((name) => [
        name,
        t.field({
          type: ['Float'],
          nullable: { list: false, items: true },
          ...(DESCRIPTIONS[name] ? { description: DESCRIPTIONS[name] } : {}),
          resolve: (s) => s.values[name],
        }),
      ]),
    ),
  }),
});

const EndpointMetricsMinute = builder.objectRef<MinuteFigures>('EndpointMetricsMinute').implement({
  description: "One endpoint's figures so far in the current minute (all gateway processes together).",
  fields: (t) => ({
    endpointId: t.id({ resolve: (m) => m.endpointId }),
    minute: t.field({ type: 'DateTime', resolve: (m) => m.minute }),
    ...Object.fromEntries([...COUNT_METRICS, ...RATE_METRICS].map((name) => [name, t.float({ resolve: (m) => m.figures[name] })])),
    ...Object.fromEntries(OPTIONAL_METRICS.map((name) => [name, t.float({ nullable: true, resolve: (m) => m.figures[name] })])),
  }),
});

interface ContentView {
  messages: unknown;
  response: {
    content?: string;
    reasoningContent?: string;
    finishReason?: string | null;
    toolCalls?: { name: string; arguments: string }[];
    raw?: string;
  };
}

const RequestContent = builder.objectRef<ContentView>('RequestContent').implement({
  description: 'What a request sent and got, logged only while its endpoint had enable_content_logging on.',
  fields: (t) => ({
    messages: t.field({
      type: 'JSON',
      description:
        "The request's messages, `[{ role, content }]` (an assistant's may have `toolCalls: [{ id, name, arguments }]`, a tool's a `toolCallId`); a text completion's prompt is `[{ role: 'prompt', content }]` (`tokens` for token ids).",
      resolve: (c) => c.messages,
    }),
    content: t.string({ resolve: (c) => c.response.content ?? '' }),
    reasoningContent: t.string({
      description: 'The reasoning (think block), empty when none.',
      resolve: (c) => c.response.reasoningContent ?? '',
    }),
    finishReason: t.string({ nullable: true, resolve: (c) => c.response.finishReason ?? null }),
    toolCalls: t.field({
      type: 'JSON',
      nullable: true,
      description: 'The tools the answer called, `[{ name, arguments }]` (arguments as the JSON text sent), or null when it called none.',
      resolve: (c) => c.response.toolCalls ?? null,
    }),
    raw: t.string({
      nullable: true,
      description: 'The answer as sent, when it was not in the OpenAI shape.',
      resolve: (c) => c.response.raw ?? null,
    }),
  }),
});

const RequestActivity = builder.objectRef<ActivityEntry>('RequestActivity').implement({
  description: 'One chat completion request an endpoint served.',
  fields: (t) => ({
    id: t.id({ resolve: (e) => e.id }),
    startedAt: t.field({ type: 'DateTime', resolve: (e) => e.startedAt }),
    status: t.int({ description: 'The HTTP status of the answer.', resolve: (e) => e.httpStatus }),
    latencyMs: t.float({ description: 'From the request to the end of its answer.', resolve: (e) => e.latencyMs }),
    ttftMs: t.float({ nullable: true, resolve: (e) => e.ttftMs }),
    queuedMs: t.float({ resolve: (e) => e.queuedMs }),
    promptTokens: t.int({ nullable: true, resolve: (e) => e.promptTokens }),
    completionTokens: t.int({ nullable: true, resolve: (e) => e.completionTokens }),
    stream: t.boolean({ resolve: (e) => e.stream }),
    cancelled: t.boolean({ description: 'The client left before the answer ended.', resolve: (e) => e.cancelled }),
    finishReason: t.string({ nullable: true, resolve: (e) => e.finishReason }),
    errorCode: t.string({
      nullable: true,
      description: 'Why the answer is incomplete, e.g. `upstream_disconnected`.',
      resolve: (e) => e.errorCode,
    }),
    replicaId: t.id({ nullable: true, resolve: (e) => e.replicaId }),
    user: t.field({
      type: User,
      nullable: true,
      description: 'The user of the API key the request came with.',
      resolve: (e, _, { loaders }) => loaders.user.load(e.userId),
    }),
    content: t.field({ type: RequestContent, nullable: true, resolve: (e) => e.content as ContentView | null }),
  }),
});

const RequestActivityConnection = connectionType('RequestActivity', RequestActivity);

const RequestActivityFilter = builder.inputType('RequestActivityFilter', {
  fields: (t) => ({
    statuses: t.intList({ description: 'Only these HTTP statuses.' }),
    errorsOnly: t.boolean({ description: 'Only failed requests (a status of 400 or more, or an error code).' }),
    userId: t.id({ description: "Only this user's requests." }),
    from: t.field({ type: 'DateTime', description: 'Started at or after.' }),
    to: t.field({ type: 'DateTime', description: 'Started before.' }),
  }),
});

builder.objectFields(Endpoint, (t) => ({
  metrics: t.field({
    type: EndpointMetrics,
    description: 'Per-step series over [from, to) (to: now). step: seconds, a multiple of 60; default: at most 120 points.',
    args: {
      from: t.arg({ type: 'DateTime', required: true }),
      to: t.arg({ type: 'DateTime' }),
      step: t.arg.int(),
    },
    resolve: async (e, args, { services }) => unwrapOrThrow(await services.metrics.series(e.id, args)),
  }),
  requests: t.field({
    type: RequestActivityConnection,
    description: "The endpoint's requests, newest first.",
    args: { ...connectionArgs(t), filter: t.arg({ type: RequestActivityFilter }) },
    resolve: async (e, args, { services }) => {
      const f = args.filter;
      const filter = {
        ...(f?.statuses ? { statuses: f.statuses } : {}),
        ...(f?.errorsOnly ? { errorsOnly: true } : {}),
        ...(f?.userId ? { userId: String(f.userId) } : {}),
        ...(f?.from ? { from: f.from } : {}),
        ...(f?.to ? { to: f.to } : {}),
      };
      return unwrapOrThrow(await services.metrics.activity(e.id, { first: args.first, after: args.after, filter }, CONNECTION_ARG_NAMES));
    },
  }),
}));

/** The subscription's values: the current minute's figures, as they change, until the client leaves. */
class MetricsSubscription implements AsyncIterableIterator<MinuteFigures> {
  private readonly queue: MinuteFigures[] = [];
  private wake: (() => void) | undefined;
  private unsubscribe: (() => void) | undefined;
  private started = false;
  private ended = false;

  constructor(
    private readonly context: GraphQLContext,
    private readonly endpointId: string,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<MinuteFigures>> {
    if (!this.started) {
      this.started = true;
      const endpoint = await this.context.loaders.endpointFor(this.context.principal, this.endpointId);
      if (!endpoint) throw new GraphQLError(`endpoint '${this.endpointId}' not found`, { extensions: { code: 'NOT_FOUND' } });
      if (this.ended) return { done: true, value: undefined };
      this.unsubscribe = this.context.services.metrics.live.subscribe(endpoint.id, (figures) => {
        // Only the latest figures matter to a slow reader.
        if (this.queue.length > 0) this.queue.length = 0;
        this.queue.push(figures);
        this.wake?.();
      });
    }
    while (!this.ended) {
      const value = this.queue.shift();
      if (value) return { done: false, value };
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
    return { done: true, value: undefined };
  }

  return(): Promise<IteratorResult<MinuteFigures>> {
    this.ended = true;
    this.unsubscribe?.();
    this.wake?.();
    return Promise.resolve({ done: true, value: undefined });
  }
}

builder.subscriptionFields((t) => ({
  endpointMetrics: t.field({
    type: EndpointMetricsMinute,
    description:
      "The endpoint's figures for the current minute: emitted at once, then whenever they change (a new minute starts from zero).",
    args: { id: t.arg.id({ required: true }) },
    subscribe: (_, { id }, context) => new MetricsSubscription(context, String(id)),
    resolve: (figures) => figures as MinuteFigures,
  }),
}));
