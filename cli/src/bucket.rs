//! `caal bucket ...`: what each bucket remembers. Reads open `memory.db`
//! read-only (they work beside a running service); writes go through the
//! engine, so each is a round of the `operator` conversation in the trace.

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use caal::{
    config::Config,
    ids::{BucketId, ConversationId},
    memory::{ItemRef, MEMORY_FILE, Match, MemoryStore},
    round::OperatorWrite,
    state::{Clock, SystemClock},
};
use clap::Subcommand;

use crate::output;

#[derive(Subcommand)]
pub enum BucketCommand {
    /// Every bucket, with its register (most recently written first).
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A bucket's context package: pinned, high-score and recent items,
    /// their scores and what each score is made of, and what a prompt gets.
    Show {
        /// A bucket id (`bucket:kitchen`) or a conversation (`kitchen`).
        bucket: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remember something in a bucket (scrubbed of secrets first).
    Add {
        /// The bucket (`caal bucket list` shows them).
        bucket: String,
        /// What to remember.
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
        /// Pin it: pinned items always come first.
        #[arg(long)]
        pin: bool,
        /// A document, file or url it refers to: `file:/home/ana/boiler.pdf`.
        #[arg(long = "ref", value_name = "KIND:TARGET")]
        reference: Option<String>,
        /// An excerpt of the ref.
        #[arg(long, requires = "reference")]
        excerpt: Option<String>,
        /// A summary of the ref.
        #[arg(long, requires = "reference")]
        summary: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pin an item: it comes first in the bucket's package.
    Pin {
        /// The bucket (`caal bucket list` shows them).
        bucket: String,
        /// The memory item (`caal bucket show BUCKET` lists them).
        item_id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Unpin an item.
    Unpin {
        /// The bucket (`caal bucket list` shows them).
        bucket: String,
        /// The memory item (`caal bucket show BUCKET` lists them).
        item_id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Forget an item: it leaves the bucket and search; the trace records
    /// that it was forgotten, never what it said.
    Forget {
        /// The bucket (`caal bucket list` shows them).
        bucket: String,
        /// The memory item (`caal bucket show BUCKET` lists them).
        item_id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Full-text search, best match first.
    Search {
        /// The words to look for.
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Only this bucket.
        #[arg(long)]
        bucket: Option<String>,
        /// Match any of the words (default: all of them).
        #[arg(long)]
        any: bool,
        /// Show at most this many (the most recent).
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Every item of a bucket with its score breakdown.
    Dump {
        /// The bucket (`caal bucket list` shows them).
        bucket: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The register (a summary of at most 140 characters) of one bucket, or of all.
    Register {
        /// The bucket (`caal bucket list` shows them).
        bucket: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `bucket:kitchen` as given, or a conversation's bucket.
pub fn parse_bucket(given: &str) -> Result<BucketId> {
    if given.starts_with("bucket:") {
        return Ok(given.parse::<BucketId>()?);
    }
    let conversation: ConversationId = given.parse().with_context(|| {
        format!("{given:?} is neither a bucket id (bucket:NAME) nor a conversation id")
    })?;
    Ok(BucketId::for_conversation(&conversation))
}

fn parse_ref(given: &str, excerpt: Option<String>, summary: Option<String>) -> Result<ItemRef> {
    let (kind, target) = given.split_once(':').ok_or_else(|| {
        anyhow!("--ref {given:?} needs KIND:TARGET, such as file:/home/ana/boiler-manual.pdf")
    })?;
    if target.is_empty() {
        return Err(anyhow!("--ref {given:?} names no target after the colon"));
    }
    Ok(ItemRef {
        kind: kind.parse().map_err(|e: String| anyhow!("--ref: {e}"))?,
        target: target.to_owned(),
        excerpt,
        summary,
    })
}

fn read_store(data_dir: &Path, config: &Config) -> Result<MemoryStore> {
    let path = data_dir.join(MEMORY_FILE);
    if !path.exists() {
        return Err(anyhow!(
            "nothing remembered yet: no {}; say `caal say \"remember that ...\"` or `caal bucket add BUCKET TEXT`, or point --data-dir at a data dir",
            path.display()
        ));
    }
    Ok(MemoryStore::open_read_only(&path, &config.memory)?)
}

fn print_json(value: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

pub fn run(data_dir: &Path, config: Config, command: BucketCommand) -> Result<()> {
    let now = SystemClock.now_ms();
    let write = |bucket: &str, w: OperatorWrite, json: bool| -> Result<()> {
        let bucket = parse_bucket(bucket)?;
        let engine =
            crate::engine::open_engine(data_dir, config.clone(), crate::engine::Start::Lazy)?;
        let outcome = engine.operator_memory(&bucket, w, caal::round::Channel::Cli)?;
        if json {
            print_json(&outcome)?;
        } else {
            println!(
                "{} {} in {} (round {})",
                outcome.op, outcome.item_id, outcome.bucket_id, outcome.round_id
            );
            if !outcome.redacted_kinds.is_empty() {
                println!(
                    "secrets replaced by secret_ref before storing: {}",
                    outcome.redacted_kinds.join(", ")
                );
            }
        }
        Ok(())
    };
    match command {
        BucketCommand::Add {
            bucket,
            text,
            pin,
            reference,
            excerpt,
            summary,
            json,
        } => {
            let refs = reference
                .map(|r| parse_ref(&r, excerpt, summary))
                .transpose()?
                .into_iter()
                .collect();
            let content = text.join(" ");
            write(&bucket, OperatorWrite::Add { content, refs, pin }, json)
        }
        BucketCommand::Pin {
            bucket,
            item_id,
            json,
        } => write(&bucket, OperatorWrite::Pin { item_id }, json),
        BucketCommand::Unpin {
            bucket,
            item_id,
            json,
        } => write(&bucket, OperatorWrite::Unpin { item_id }, json),
        BucketCommand::Forget {
            bucket,
            item_id,
            json,
        } => write(&bucket, OperatorWrite::Forget { item_id }, json),
        BucketCommand::List { json } => {
            let registers = read_store(data_dir, &config)?.registers()?;
            if json {
                print_json(&registers)
            } else {
                output::print_registers(&registers);
                Ok(())
            }
        }
        BucketCommand::Register { bucket, json } => {
            let store = read_store(data_dir, &config)?;
            let registers = match bucket {
                Some(b) => {
                    let bucket = parse_bucket(&b)?;
                    let register = store.register(&bucket)?.ok_or_else(|| {
                        anyhow!("{bucket} has nothing remembered; `caal bucket list` shows the buckets that do")
                    })?;
                    vec![register]
                }
                None => store.registers()?,
            };
            if json {
                print_json(&registers)
            } else {
                for r in &registers {
                    println!("{}  {}", r.bucket_id, r.summary);
                }
                Ok(())
            }
        }
        BucketCommand::Show { bucket, json } => {
            let bucket = parse_bucket(&bucket)?;
            let package = read_store(data_dir, &config)?.compute_package(&bucket, now)?;
            if json {
                print_json(&package)
            } else {
                output::print_package(&package);
                Ok(())
            }
        }
        BucketCommand::Dump { bucket, json } => {
            let bucket = parse_bucket(&bucket)?;
            let items = read_store(data_dir, &config)?.items(&bucket, now)?;
            if json {
                print_json(&items)
            } else {
                output::print_items(&items);
                Ok(())
            }
        }
        BucketCommand::Search {
            query,
            bucket,
            any,
            limit,
            json,
        } => {
            let bucket = bucket.as_deref().map(parse_bucket).transpose()?;
            let how = if any { Match::Any } else { Match::All };
            let hits = read_store(data_dir, &config)?.search(
                &query.join(" "),
                bucket.as_ref(),
                how,
                limit.max(1),
                now,
            )?;
            if json {
                print_json(&hits)
            } else {
                output::print_hits(&hits);
                Ok(())
            }
        }
    }
}
