//! End-to-end tests: the real `caal` binary on temp data dirs.

mod support;
mod trace;
