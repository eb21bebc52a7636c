/** Types for parse-prometheus-text-format (it ships none): prom2json's shape. */
declare module 'parse-prometheus-text-format' {
  interface PrometheusSample {
    labels?: Record<string, string>;
    /** Counters and gauges. */
    value?: string;
    /** Histograms and summaries. */
    buckets?: Record<string, string>;
    quantiles?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  interface PrometheusFamily {
    name: string;
    help: string;
    type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
    metrics: PrometheusSample[];
  }
  export default function parsePrometheusTextFormat(text: string): PrometheusFamily[];
}
