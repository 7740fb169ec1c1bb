//! `caal-llm`: one local GGUF model behind an OpenAI-compatible
//! `POST /v1/chat/completions` on 127.0.0.1, with tool calls made valid JSON
//! by a grammar built from the tools' JSON Schemas, and `stream: true` as
//! server-sent chunks. `caal` starts and supervises it; it is its own
//! process because llama.cpp and whisper.cpp each bundle ggml and cannot be
//! linked into one binary.
//!
//! It prints one line, `caal-llm listening on http://ADDR model=NAME`, once
//! the model is loaded and the port is open; the supervisor waits for it.

use std::path::PathBuf;

use clap::Parser;

mod api;
#[cfg(feature = "llama")]
mod engine;

#[derive(Parser, Debug)]
#[command(name = "caal-llm", version, about)]
pub struct Args {
    /// The GGUF model file (its chat template is used).
    #[arg(long, env = "CAAL_LLM_LOCAL_MODEL")]
    pub model: PathBuf,
    /// The address to listen on; loopback only unless you mean otherwise.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// 0 picks a free port (printed on the ready line).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Context window in tokens (prompt and answer together).
    #[arg(long, default_value_t = 4096)]
    pub ctx: u32,
    /// CPU threads for generation; 0 uses every core.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// The chat template: the name of one llama.cpp knows ("gemma", "chatml",
    /// "llama3", ...); empty uses the one the model file carries. A base
    /// (not instruction-tuned) model's file carries none.
    #[arg(long, env = "CAAL_LLM_CHAT_TEMPLATE", default_value = "")]
    pub chat_template: String,
    /// Answer length when a request does not set `max_tokens`.
    #[arg(long, default_value_t = 256)]
    pub max_tokens: u32,
    /// Exit when standard input closes: the supervisor's pipe, so the server
    /// never outlives the process that started it.
    #[arg(long)]
    pub exit_with_stdin: bool,
    /// Load the weights requantized to this llama.cpp type: `q8_0` (what
    /// caal starts it with; llama.cpp multiplies Q8_0 in batches, so a prompt
    /// is decoded about 1.4x faster than from the Q4_1 file a registry ships,
    /// at about the same generation speed). The file is written once beside
    /// the model, `<name>.q8_0.gguf`, and remade when the model is newer.
    /// Empty: the file as it is.
    #[arg(long, default_value = "")]
    pub requantize: String,
}

fn main() {
    let args = Args::parse();
    if args.exit_with_stdin {
        std::thread::spawn(|| {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            std::process::exit(0);
        });
    }
    if let Err(e) = run(args) {
        eprintln!("caal-llm: {e:#}");
        std::process::exit(2);
    }
}

#[cfg(feature = "llama")]
fn run(args: Args) -> anyhow::Result<()> {
    let weights = if args.requantize.is_empty() {
        args.model.clone()
    } else {
        engine::requantized(&args.model, &args.requantize)?
    };
    let engine = engine::Engine::load(&args, &weights)?;
    api::serve(&args, engine)
}

#[cfg(not(feature = "llama"))]
fn run(_: Args) -> anyhow::Result<()> {
    anyhow::bail!(
        "this build has no llama.cpp; build it with `cargo build -p caal-llm-server --features llama`"
    )
}
