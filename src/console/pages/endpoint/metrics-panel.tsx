/**
 * The last hour's metrics (refreshed every 30 s) with the current minute
 * live from the `endpointMetrics` subscription: throughput, latency, tokens
 * and replicas, each a uPlot chart with its latest values as a table (the
 * charts' canvases are not readable by screen readers).
 */
import { useEffect, useMemo, useState } from 'react';
import type uPlot from 'uplot';
import { useQuery, useSubscription } from '../../api/hooks.js';
import {
  EndpointPageMetricsDocument,
  EndpointPageMinuteDocument,
  type EndpointPageMetricsQuery,
  type EndpointPageMinuteSubscription,
} from '../../api/generated.js';
import { ErrorAlert, Loading } from '../../components/ui.js';
import { UPlotChart, type ChartAxis, type ChartSeries } from './uplot-chart.js';
import { formatClock } from '../../format.js';
import { formatNumber } from './format.js';

const HOUR_MS = 3_600_000;
const STEP_SECONDS = 60;
const REFRESH_MS = 30_000;

type Metrics = NonNullable<EndpointPageMetricsQuery['endpoint']>['metrics'];
type Minute = EndpointPageMinuteSubscription['endpointMetrics'];

/** One point's values, per minute, the same for a stored step and the live minute. */
interface Point {
  at: number;
  requestsPerMinute: number;
  tokensPerSecond: number;
  ttftP50: number | null;
  ttftP95: number | null;
  ttftP99: number | null;
  latencyAvg: number | null;
  promptTokens: number;
  completionTokens: number;
  replicasCurrent: number | null;
  replicasDesired: number | null;
  replicasUpdated: number | null;
}

function pointsOf(metrics: Metrics): Point[] {
  const perMinute = 60 / metrics.stepSeconds;
  return metrics.timestamps.map((timestamp, i) => ({
    at: Date.parse(timestamp) / 1000,
    requestsPerMinute: (metrics.requests[i] ?? 0) * perMinute,
    tokensPerSecond: metrics.completionTokensPerSecond[i] ?? 0,
    ttftP50: metrics.ttftP50Ms[i] ?? null,
    ttftP95: metrics.ttftP95Ms[i] ?? null,
    ttftP99: metrics.ttftP99Ms[i] ?? null,
    latencyAvg: metrics.durationAvgMs[i] ?? null,
    promptTokens: (metrics.promptTokens[i] ?? 0) * perMinute,
    completionTokens: (metrics.completionTokens[i] ?? 0) * perMinute,
    replicasCurrent: metrics.replicasCurrent[i] ?? null,
    replicasDesired: metrics.replicasDesired[i] ?? null,
    replicasUpdated: metrics.replicasUpdated[i] ?? null,
  }));
}

function pointOf(minute: Minute): Point {
  return {
    at: Date.parse(minute.minute) / 1000,
    requestsPerMinute: minute.requests,
    tokensPerSecond: minute.completionTokensPerSecond,
    ttftP50: minute.ttftP50Ms,
    ttftP95: minute.ttftP95Ms,
    ttftP99: minute.ttftP99Ms,
    latencyAvg: minute.durationAvgMs,
    promptTokens: minute.promptTokens,
    completionTokens: minute.completionTokens,
    replicasCurrent: minute.replicasCurrent,
    replicasDesired: minute.replicasDesired,
    replicasUpdated: minute.replicasUpdated,
  };
}

/** The stored points with the live minute replacing (or following) its stored step; a figure the live minute lacks (replicas not sampled yet) is kept. */
function mergeLive(points: Point[], live: Point | undefined): Point[] {
  if (!live) return points;
  const stored = points.find((p) => p.at === live.at);
  const merged = { ...live };
  if (stored) {
    for (const key of Object.keys(merged) as Array<keyof Point>) {
      if (merged[key] === null && stored[key] !== null) (merged as Record<keyof Point, number | null>)[key] = stored[key];
    }
  }
  return [...points.filter((p) => p.at < live.at), merged];
}

/** The newest value of a series, and the minute it is from. */
function latestOf(points: Point[], key: Key): { value: number; at: number } | undefined {
  for (let i = points.length - 1; i >= 0; i--) {
    const value = points[i]![key];
    if (value !== null) return { value, at: points[i]!.at };
  }
  return undefined;
}

type Key = Exclude<keyof Point, 'at'>;

interface ChartDefinition {
  id: string;
  title: string;
  axes: ChartAxis[];
  lines: Array<ChartSeries & { key: Key; unit: string }>;
}

const CHARTS: ChartDefinition[] = [
  {
    id: 'throughput',
    title: 'Throughput',
    axes: [
      { scale: 'rpm', label: 'requests/min' },
      { scale: 'tps', label: 'tokens/s', side: 'right' },
    ],
    lines: [
      { key: 'requestsPerMinute', label: 'Requests/min', unit: '', color: '#2754c5', scale: 'rpm' },
      { key: 'tokensPerSecond', label: 'Completion tokens/s', unit: '', color: '#17803d', scale: 'tps' },
    ],
  },
  {
    id: 'latency',
    title: 'Latency',
    axes: [{ scale: 'ms', label: 'ms' }],
    lines: [
      { key: 'ttftP50', label: 'TTFT p50', unit: ' ms', color: '#2754c5', scale: 'ms' },
      { key: 'ttftP95', label: 'TTFT p95', unit: ' ms', color: '#a15c00', scale: 'ms' },
      { key: 'ttftP99', label: 'TTFT p99', unit: ' ms', color: '#b3261e', scale: 'ms' },
      { key: 'latencyAvg', label: 'Latency (avg)', unit: ' ms', color: '#6b4fbb', scale: 'ms', dash: [6, 4] },
    ],
  },
  {
    id: 'tokens',
    title: 'Tokens',
    axes: [{ scale: 'tokens', label: 'tokens/min' }],
    lines: [
      { key: 'promptTokens', label: 'Tokens in (prompt)/min', unit: '', color: '#2754c5', scale: 'tokens' },
      { key: 'completionTokens', label: 'Tokens out (completion)/min', unit: '', color: '#17803d', scale: 'tokens' },
    ],
  },
  {
    id: 'replicas',
    title: 'Replicas',
    axes: [{ scale: 'replicas', label: 'replicas' }],
    lines: [
      { key: 'replicasCurrent', label: 'Current', unit: '', color: '#2754c5', scale: 'replicas' },
      { key: 'replicasDesired', label: 'Desired', unit: '', color: '#a15c00', scale: 'replicas', dash: [6, 4] },
      { key: 'replicasUpdated', label: 'Updated', unit: '', color: '#17803d', scale: 'replicas' },
    ],
  },
];

function Chart({ definition, points }: { definition: ChartDefinition; points: Point[] }) {
  const data = useMemo<uPlot.AlignedData>(
    () => [points.map((p) => p.at), ...definition.lines.map((line) => points.map((p) => p[line.key]))],
    [points, definition],
  );
  const series = useMemo(() => definition.lines.map(({ label, color, scale, dash }) => ({ label, color, scale, dash })), [definition]);
  const last = points[points.length - 1];
  const clock = (at: number) => formatClock(new Date(at * 1000).toISOString());
  const headingId = `chart-${definition.id}-heading`;
  return (
    <section className="chart" aria-labelledby={headingId}>
      <h3 id={headingId}>{definition.title}</h3>
      <UPlotChart series={series} axes={definition.axes} data={data} />
      <div className="table-wrap">
        <table className="chart-summary small">
          <caption>
            {definition.title}, latest{last ? ` (minute from ${clock(last.at)})` : ''}
          </caption>
          <tbody>
            {definition.lines.map((line) => {
              const latest = latestOf(points, line.key);
              return (
                <tr key={line.key}>
                  <th scope="row">{line.label}</th>
                  <td>
                    {latest ? `${formatNumber(latest.value)}${line.unit}` : '—'}
                    {latest && last && latest.at !== last.at && <span className="muted"> (at {clock(latest.at)})</span>}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </section>
  );
}

export function MetricsPanel({ id }: { id: string }) {
  const [from, setFrom] = useState(() => new Date(Date.now() - HOUR_MS).toISOString());
  useEffect(() => {
    const timer = setInterval(() => setFrom(new Date(Date.now() - HOUR_MS).toISOString()), REFRESH_MS);
    return () => clearInterval(timer);
  }, []);
  const metrics = useQuery(EndpointPageMetricsDocument, { id, from, step: STEP_SECONDS });
  const [live, setLive] = useState<Point | undefined>();
  const minute = useSubscription(EndpointPageMinuteDocument, { id }, (value) => setLive(pointOf(value.endpointMetrics)));

  const stored = metrics.data?.endpoint?.metrics;
  const points = useMemo(() => mergeLive(stored ? pointsOf(stored) : [], live), [stored, live]);

  return (
    <section className="panel" aria-labelledby="metrics-heading">
      <h2 id="metrics-heading">Metrics</h2>
      <p className="hint">The last hour, per minute; the current minute is live.</p>
      <ErrorAlert error={metrics.error ?? minute.error} />
      {!stored && metrics.loading ? (
        <Loading what="the metrics" />
      ) : (
        <div className="charts">
          {CHARTS.map((definition) => (
            <Chart key={definition.id} definition={definition} points={points} />
          ))}
        </div>
      )}
    </section>
  );
}
