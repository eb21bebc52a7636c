/**
 * A small React wrapper around uPlot: the chart fills its container's width
 * (following it as it resizes), takes new data without being rebuilt, and is
 * rebuilt only when its series change. The canvas is hidden from screen
 * readers: each chart's caller gives a text summary beside it.
 */
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  color: string;
  /** The y scale: series with different units use different scales (and axes). */
  scale?: string;
  dash?: number[];
}

export interface ChartAxis {
  scale: string;
  label: string;
  side?: 'left' | 'right';
}

const HEIGHT = 200;

/** The indices of the series' values with no value on either side (drawn as points, since no line reaches them). */
function isolatedPoints(chart: uPlot, seriesIdx: number): number[] | null {
  const values = chart.data[seriesIdx] ?? [];
  const isolated: number[] = [];
  for (let i = 0; i < values.length; i++) {
    if (values[i] == null) continue;
    if (values[i - 1] == null && values[i + 1] == null) isolated.push(i);
  }
  return isolated;
}

export function UPlotChart({
  series,
  axes,
  data,
}: {
  series: ChartSeries[];
  axes: ChartAxis[];
  /** timestamps (seconds) first, then one array per series. */
  data: uPlot.AlignedData;
}) {
  const container = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);
  const latest = useRef(data);
  latest.current = data;
  const shape = JSON.stringify({ series, axes });

  useEffect(() => {
    const element = container.current;
    if (!element) return;
    const { series: lines, axes: yAxes } = JSON.parse(shape) as { series: ChartSeries[]; axes: ChartAxis[] };
    const styles = getComputedStyle(element);
    const text = styles.getPropertyValue('color') || '#444';
    const grid = styles.getPropertyValue('--border').trim() || '#ddd';
    const options: uPlot.Options = {
      width: Math.max(element.clientWidth, 200),
      height: HEIGHT,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, ...Object.fromEntries(yAxes.map((a) => [a.scale, { auto: true }])) },
      series: [
        {},
        ...lines.map((line) => ({
          label: line.label,
          stroke: line.color,
          width: 2,
          scale: line.scale ?? yAxes[0]?.scale ?? 'y',
          spanGaps: false,
          // A lone value between gaps draws no line: it gets a point.
          points: { show: true, size: 5, filter: isolatedPoints },
          ...(line.dash ? { dash: line.dash } : {}),
        })),
      ],
      axes: [
        { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
        ...yAxes.map((axis, i) => ({
          scale: axis.scale,
          label: axis.label,
          side: axis.side === 'right' ? 1 : 3,
          stroke: text,
          size: 50,
          grid: { show: i === 0, stroke: grid, width: 1 },
          ticks: { stroke: grid },
        })),
      ],
    };
    const chart = new uPlot(options, latest.current, element);
    plot.current = chart;
    const observer = new ResizeObserver(() => {
      const width = Math.max(element.clientWidth, 200);
      if (width !== chart.width) chart.setSize({ width, height: HEIGHT });
    });
    observer.observe(element);
    return () => {
      observer.disconnect();
      chart.destroy();
      plot.current = undefined;
    };
  }, [shape]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  return <div className="uplot-chart" ref={container} aria-hidden="true" />;
}
