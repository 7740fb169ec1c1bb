//! What the trace becomes for other tools, and what comes into it:
//! OpenTelemetry traces (`otlp`, and live to a receiver: `ship`), columnar
//! tables for analytics engines (`parquet`), training data (`training`),
//! older data brought in once (`import`). Replay routes, so it lives in
//! `router::replay`.

pub mod import;
pub mod otlp;
pub mod parquet;
pub mod ship;
pub mod training;
