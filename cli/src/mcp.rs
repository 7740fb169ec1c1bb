//! `caal mcp`: CAAL as an MCP server on stdin/stdout, for agent tools that
//! start their servers as processes (Claude Desktop, IDEs). While `caal
//! serve` holds the data dir, its `/mcp` endpoint is the way in instead.

use std::path::Path;

use anyhow::{Context, Result, bail};
use caal::config::Config;

use crate::{
    engine::{Start, open_engine},
    remote,
};

pub fn mcp(data_dir: &Path, config: Config) -> Result<()> {
    // Logs go to stderr: stdout carries the protocol.
    caal::safety::logging::init(&std::env::var("CAAL_LOG").unwrap_or_else(|_| "warn".into()));
    let engine = match open_engine(data_dir, config, Start::Lazy) {
        Ok(engine) => engine,
        Err(e) if remote::is_locked(&e) => match remote::Remote::find(data_dir, e) {
            Ok(served) => bail!(
                "caal serve holds {} already; connect your MCP client to {}/mcp (streamable HTTP, \
                 header Authorization: Bearer <the token in {}>) instead of starting caal mcp",
                data_dir.display(),
                served.url(),
                data_dir.join(caal::server::auth::TOKEN_FILE).display()
            ),
            Err(e) => return Err(e),
        },
        Err(e) => return Err(e),
    };
    // Timers set through MCP ring from here while it runs.
    let _scheduler = engine.start_scheduler()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime
        .block_on(caal::server::protocols::mcp::serve_stdio(engine))
        .map_err(anyhow::Error::msg)
        .context("the MCP session over stdio ended with an error")
}
