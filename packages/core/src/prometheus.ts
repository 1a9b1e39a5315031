// @sentinel/core/prometheus: an observer that keeps Prometheus metrics with prom-client.
// An entry of its own, so that prom-client stays an optional peer of core; it lives in observe/.
export { type PrometheusMetricsOptions, prometheusMetrics } from './observe/prometheus.ts';
