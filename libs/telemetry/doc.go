// Package telemetry wires the cross-cutting signals every Skein process emits:
// OpenTelemetry traces (OTLP over gRPC when OTEL_EXPORTER_OTLP_ENDPOINT is set,
// W3C TraceContext + Baggage propagation, otelgrpc on every gRPC server and
// client), structured JSON logs through log/slog with the trace id on each
// line, and a Prometheus registry served at /metrics with gRPC request rates
// and latency histograms.
package telemetry
