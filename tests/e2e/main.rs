//! End-to-end tests: the real `caal` binary on temp data dirs.

mod router;
mod support;
mod trace;
