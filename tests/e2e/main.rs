//! End-to-end tests: the real `caal` binary on temp data dirs.

mod boundary;
mod browser;
mod cli;
mod contract;
mod docs;
mod doors;
mod home;
mod llm;
mod memory;
mod parquet;
mod reasoning;
mod router;
mod safety;
mod serve;
mod ship;
mod support;
mod time;
mod trace;
mod training;
mod understand;
mod voice;
