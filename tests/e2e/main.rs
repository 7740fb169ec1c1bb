//! End-to-end tests: the real `caal` binary on temp data dirs.

mod router;
mod safety;
mod support;
mod trace;
