//! Commands as values: a command's spec and authority level, its
//! parameters typed and checked against the spec, and a command said back
//! as words.
//!
//! Below `router`, `tools` and `schedule`, which all need them: the router
//! types what was said into parameters, the executors and timers read them
//! and say them back, so none of the three imports another for these.

mod level;
mod params;
mod render;
mod spec;
mod value;

pub use level::AuthLevel;
pub use params::{Known, ParamProblem, parse_duration, parse_params};
pub use render::{all_the, join_summaries, join_with, render, render_with};
pub use spec::CommandSpec;
pub use value::{ParamValue, human_duration};
