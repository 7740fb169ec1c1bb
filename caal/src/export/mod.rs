//! What the trace becomes for other tools: OpenTelemetry traces (`otlp`).
//! Training formats, import and replay join here (issue "From traces to
//! training").

pub mod otlp;
pub mod training;
