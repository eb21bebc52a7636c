/**
 * `dedicated replicas EP`, `dedicated logs EP [--replica R] [--tail N] [--follow]` and `dedicated events EP`: an
 * endpoint's replicas, a replica's engine log (followed live over the `replicaLogs` subscription) and its event
 * history, over the typed SDK.
 */
import { print as printDocument } from 'graphql';
import { createClient as createWsClient } from 'graphql-ws';
import { ClientError } from 'graphql-request';
import WebSocket from 'ws';
import {
  EndpointEventsDocument,
  EndpointLogsDocument,
  EndpointReplicasDocument,
  ReplicaLogsDocument,
  type EndpointEventsQuery,
  type ReplicaLogsSubscription,
} from '../../sdk/client.js';
import { CliError } from './errors.js';
import { graphqlClient } from './http.js';
import { forHumans, statusColor, table, textBody } from './render.js';
import type { Output } from './commands.js';
import type { Settings } from './settings.js';

type EventNode = NonNullable<EndpointEventsQuery['endpoint']>['events']['edges'][number]['node'];

export class ReplicaCommands {
  constructor(
    private readonly settings: Settings,
    private readonly out: Output,
  ) {}

  private async call<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      if (error instanceof ClientError) {
        const messages = error.response.errors?.map((e) => e.message).join('; ');
        if (error.response.status === 401) throw new CliError(`the API key was refused (401): ${messages ?? 'unauthenticated'}`);
        throw new CliError(messages || `HTTP ${error.response.status}`);
      }
      throw new CliError(`cannot reach ${this.settings.baseUrl}: ${(error as Error).message}`);
    }
  }

  private get client() {
    return graphqlClient(this.settings);
  }

  async replicas(id: string): Promise<void> {
    const { endpoint } = await this.call(() => this.client.request(EndpointReplicasDocument, { id }));
    if (!endpoint) throw new CliError(`endpoint '${id}' not found`);
    if (this.out.json) return this.out.print(JSON.stringify(endpoint.replicas, null, 2));
    const { nodes, failures } = forHumans(endpoint.replicas);
    if (nodes.length === 0) this.out.print('no replicas');
    else {
      table(
        this.out.print,
        ['REPLICA', 'STATE', 'VERSION', 'NODE', 'GPU', 'SINCE', 'LAST ERROR'],
        nodes.map((r) => [
          r.id,
          statusColor(r.state),
          String(r.versionIndex),
          r.node,
          `${r.numGpu} × ${r.gpuType}`,
          r.since,
          r.lastError ?? '',
        ]),
      );
    }
    const minutes = Math.round(failures.windowSeconds / 60);
    const last = failures.last
      ? ` (last: ${failures.last.id} at ${failures.last.endedAt ?? failures.last.since}: ${failures.last.lastError ?? 'no reason given'})`
      : '';
    this.out.print(`failed in the last ${minutes} min: ${failures.count}${last}`);
  }

  async logs(id: string, flags: { replica?: string; tail?: number; follow?: boolean }, signal?: AbortSignal): Promise<void> {
    const replicaId = flags.replica ?? null;
    if (!flags.follow) {
      const { endpoint } = await this.call(() => this.client.request(EndpointLogsDocument, { id, replicaId, tail: flags.tail ?? null }));
      if (!endpoint) throw new CliError(`endpoint '${id}' not found`);
      if (this.out.json) return this.out.print(JSON.stringify(endpoint.logs));
      for (const line of endpoint.logs.lines) this.out.print(textBody(line));
      return;
    }
    await this.follow(id, replicaId, flags.tail ?? 100, signal);
  }

  /** Prints the log's last lines, then new lines as they come, until Ctrl-C (`signal`) or the log ends. */
  private async follow(endpointId: string, replicaId: string | null, tail: number, signal?: AbortSignal): Promise<void> {
    const url = new URL('/graphql', this.settings.baseUrl);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    const client = createWsClient({
      url: url.toString(),
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${this.settings.apiKey}` },
      lazy: true,
    });
    try {
      const subscription = client.iterate<ReplicaLogsSubscription>({
        query: printDocument(ReplicaLogsDocument),
        variables: { endpointId, replicaId, tail },
      });
      const onAbort = () => void subscription.return?.();
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        for await (const result of subscription) {
          if (result.errors?.length) throw new CliError(result.errors.map((e) => e.message).join('; '));
          const chunk = result.data?.replicaLogs;
          if (!chunk) continue;
          if (this.out.json) this.out.print(JSON.stringify(chunk));
          else for (const line of chunk.lines) this.out.print(textBody(line));
        }
      } finally {
        signal?.removeEventListener('abort', onAbort);
      }
    } catch (error) {
      if (error instanceof CliError) throw error;
      const close = error as { code?: number; reason?: string };
      if (close && (close.code === 4401 || close.code === 4403))
        throw new CliError(`the API key was refused: ${close.reason ?? ''}`.trim());
      throw new CliError(`the log stream failed: ${error instanceof Error ? error.message : (close?.reason ?? String(error))}`);
    } finally {
      await client.dispose();
    }
  }

  async events(id: string, flags: { newestFirst?: boolean; limit?: number }): Promise<void> {
    const events: EventNode[] = [];
    let after: string | null = null;
    const limit = flags.limit ?? Infinity;
    do {
      const first = Math.min(100, limit - events.length);
      const page = await this.call(() =>
        this.client.request(EndpointEventsDocument, { id, first, after, newestFirst: flags.newestFirst === true }),
      );
      if (!page.endpoint) throw new CliError(`endpoint '${id}' not found`);
      events.push(...page.endpoint.events.edges.map((e) => e.node));
      after = page.endpoint.events.pageInfo.hasNextPage ? page.endpoint.events.pageInfo.endCursor : null;
    } while (after && events.length < limit);
    if (this.out.json) return this.out.print(JSON.stringify(events, null, 2));
    table(
      this.out.print,
      ['ID', 'TIME', 'TYPE', 'STATUS', 'CAUSE', 'DETAIL'],
      forHumans(events).map((e) => [
        e.id,
        e.createdAt,
        e.type,
        [e.status ? statusColor(e.status) : '', e.phase ?? '', e.errorCode ?? ''].join(' ').trim(),
        e.cause,
        [
          e.versionIndex !== null ? `version ${e.versionIndex}` : '',
          e.replicas ? `replicas ${e.replicas.currReplicaCnt}/${e.replicas.desiredReplicaCnt}` : '',
          e.message ?? '',
        ]
          .filter(Boolean)
          .join('; '),
      ]),
    );
  }
}
