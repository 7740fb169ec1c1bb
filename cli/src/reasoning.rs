//! `caal reasoning ...` and `caal receipt ...`: the reasoning ledger read
//! back (Markdown export, replay, one step, sessions) and signed receipts
//! (the public key, verification); and the reasoning block `caal chat`
//! prints after each round with tool calls (`/reasoning [N|all]`).

use std::{fs, path::Path, path::PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use caal::{
    ids::ConversationId,
    reasoning::{
        MarkdownRound, RoundReasoning,
        ledger::{self, steps_of},
        markdown,
        receipt::{self, load_or_create_key, public_key_hex},
    },
    trace::{DB_FILE, TraceReader},
};
use clap::Subcommand;
use serde_json::Value;

#[derive(Subcommand)]
pub enum ReasoningCommand {
    /// Write rounds' reasoning as Markdown with the bracket labels
    /// ([思考] thinking, [計画] plan, [承認待ち] waiting for approval, [実行] execute, [エラー] error).
    Export {
        #[arg(
            long,
            conflicts_with = "conversation",
            required_unless_present = "conversation"
        )]
        /// The round (`caal trace list` shows them).
        round: Option<String>,
        /// The conversation (its id).
        #[arg(long)]
        conversation: Option<String>,
        /// Write here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Every step of a conversation in order, with its chain checked.
    Replay {
        /// The conversation (its id).
        #[arg(long)]
        conversation: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One step: the Nth (from 0) of a round.
    Step {
        /// The round (`caal trace list` shows them).
        round_id: String,
        /// The step number (1 is the first).
        n: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Recent conversations with their round and step counts and whether their chain verifies.
    Sessions {
        /// Show at most this many (the most recent).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum ReceiptCommand {
    /// Print the public key receipts are signed with (hex, Ed25519).
    Pubkey,
    /// Check receipts' signatures and hashes: those of a round, or one in a
    /// file (a receipt, or a `receipt.issued` line of an export).
    Verify {
        /// The round (`caal trace list` shows them).
        #[arg(long, conflicts_with = "file", required_unless_present = "file")]
        round: Option<String>,
        /// A receipt as JSON, or a `receipt.issued` line of an export.
        file: Option<PathBuf>,
        /// Verify against this public key (hex) instead of the data dir's.
        #[arg(long)]
        pubkey: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn reader(data_dir: &Path) -> Result<TraceReader> {
    Ok(TraceReader::open(&data_dir.join(DB_FILE))?)
}

fn conversation(id: &str) -> Result<ConversationId> {
    Ok(id.parse::<ConversationId>()?)
}

pub fn run(data_dir: &Path, command: ReasoningCommand) -> Result<()> {
    let reader = reader(data_dir)?;
    match command {
        ReasoningCommand::Export {
            round,
            conversation: c,
            out,
        } => {
            let rounds: Vec<(caal::trace::RoundRecord, Vec<caal::trace::EventRecord>)> = match (
                round, c,
            ) {
                (Some(r), _) => vec![reader.round(&r)?.ok_or_else(|| {
                    anyhow!("no round {r:?}; list rounds with `caal trace list`")
                })?],
                (None, Some(c)) => {
                    let id = conversation(&c)?;
                    let mut all = Vec::new();
                    for summary in reader.rounds(Some(&id), usize::MAX)? {
                        if let Some(found) = reader.round(&summary.round.round_id)? {
                            all.push(found);
                        }
                    }
                    if all.is_empty() {
                        bail!(
                            "conversation {c:?} has no rounds; `caal trace list` shows the conversations"
                        );
                    }
                    all
                }
                (None, None) => unreachable!("clap requires --round or --conversation"),
            };
            let steps: Vec<_> = rounds.iter().map(|(_, e)| steps_of(e)).collect();
            let md: Vec<MarkdownRound<'_>> = rounds
                .iter()
                .zip(&steps)
                .map(|((r, _), s)| MarkdownRound {
                    round_id: &r.round_id,
                    round_seq: r.round_seq,
                    created_at: &r.created_at,
                    steps: s,
                })
                .collect();
            let text = markdown(&md);
            match out {
                Some(path) => fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => print!("{text}"),
            }
        }
        ReasoningCommand::Replay {
            conversation: c,
            json,
        } => {
            let replay = ledger::replay(&reader, &conversation(&c)?)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&replay)?);
            } else {
                println!(
                    "conversation {}: {} steps, chain {}",
                    replay.conversation_id,
                    replay.step_count,
                    match &replay.broken {
                        None => "valid".to_owned(),
                        Some(b) => format!("BROKEN: {b}"),
                    }
                );
                for r in &replay.rounds {
                    println!("round {} ({})", r.round_seq, r.created_at);
                    for s in &r.steps {
                        println!(
                            "  {:>2} {} {}",
                            s.step_number,
                            s.phase.label(),
                            s.content.replace('\n', " ")
                        );
                    }
                }
            }
            if !replay.chain_valid {
                bail!(
                    "the chain of conversation {c} is broken; `caal trace verify --conversation {c}` names the link"
                );
            }
        }
        ReasoningCommand::Step { round_id, n, json } => {
            let step = ledger::step(&reader, &round_id, n)?.ok_or_else(|| {
                anyhow!("round {round_id:?} has no reasoning step {n}; `caal reasoning export --round {round_id}` lists its steps")
            })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&step)?);
            } else {
                println!(
                    "round {} step {} ({} {:?}, {}): {}",
                    step.round_seq,
                    step.step_number,
                    step.phase.label(),
                    step.step_type,
                    step.source,
                    step.content
                );
            }
        }
        ReasoningCommand::Sessions { limit, json } => {
            let sessions = ledger::sessions(&reader, limit)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&sessions)?);
            } else {
                println!(
                    "{:<20} {:>6} {:>6}  {:<8} last round",
                    "conversation", "rounds", "steps", "chain"
                );
                for s in &sessions {
                    println!(
                        "{:<20} {:>6} {:>6}  {:<8} {}",
                        s.conversation_id,
                        s.rounds,
                        s.step_count,
                        if s.chain_valid { "valid" } else { "BROKEN" },
                        s.last_round_at
                    );
                }
            }
        }
    }
    Ok(())
}

/// Ok(false): a receipt did not verify (said on standard error).
pub fn receipt(data_dir: &Path, command: ReceiptCommand) -> Result<bool> {
    match command {
        ReceiptCommand::Pubkey => {
            std::fs::create_dir_all(data_dir)
                .with_context(|| format!("cannot create the data dir {}", data_dir.display()))?;
            let key = load_or_create_key(data_dir)?;
            println!("{}", public_key_hex(&key.verifying_key()));
        }
        ReceiptCommand::Verify {
            round,
            file,
            pubkey,
            json,
        } => {
            let expected = match pubkey {
                Some(hex) => Some(receipt::parse_public_key(&hex).ok_or_else(|| {
                    anyhow!("--pubkey {hex:?} is not 64 hex digits of an Ed25519 key; `caal receipt pubkey` prints one")
                })?),
                None => Some(load_or_create_key(data_dir)?.verifying_key()),
            };
            let receipts: Vec<Value> = match (round, file) {
                (Some(r), _) => {
                    let (_, events) = reader(data_dir)?.round(&r)?.ok_or_else(|| {
                        anyhow!("no round {r:?}; list rounds with `caal trace list`")
                    })?;
                    let found: Vec<Value> = events
                        .iter()
                        .filter(|e| e.event_type == "receipt.issued")
                        .filter_map(|e| serde_json::from_str::<Value>(&e.payload).ok())
                        .map(|p| p["receipt"].clone())
                        .collect();
                    if found.is_empty() {
                        bail!("round {r} issued no receipt (only governed actions get one)");
                    }
                    found
                }
                (None, Some(path)) => {
                    let text = fs::read_to_string(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?;
                    let value: Value = serde_json::from_str(text.trim()).with_context(|| {
                        format!("{} is not JSON; give a receipt, or one `receipt.issued` line of `caal trace export`", path.display())
                    })?;
                    vec![match value.get("event_type").and_then(Value::as_str) {
                        Some("receipt.issued") => value["payload"]["receipt"].clone(),
                        _ => value,
                    }]
                }
                (None, None) => unreachable!("clap requires --round or a file"),
            };
            let mut verified = Vec::new();
            for r in &receipts {
                match receipt::verify(r, expected.as_ref()) {
                    Ok(v) => verified.push(v),
                    Err(e) => {
                        eprintln!(
                            "caal: receipt {} does not verify: {e}",
                            r["receipt_id"].as_str().unwrap_or("(no id)")
                        );
                        return Ok(false);
                    }
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&verified)?);
            } else {
                for v in &verified {
                    println!(
                        "receipt {} ok: {} ({}, assurance {}), round {}",
                        v.receipt_id,
                        v.command["command_id"].as_str().unwrap_or("?"),
                        v.decision,
                        v.assurance,
                        v.round_id
                    );
                }
            }
        }
    }
    Ok(true)
}

/// The reasoning block after a round with tool calls (and for `/reasoning`).
pub fn print_block(r: &RoundReasoning) {
    println!("  ┄ Reasoning (round {})", r.round_seq);
    if let Some(n) = &r.narrative {
        println!("  Narrative: \"{n}\"");
    }
    let mut announced = None;
    for d in &r.tool_decisions {
        let lead = match d.parallel_group {
            Some(g) => {
                if announced != Some(g) {
                    println!("  ┄ [parallel batch {g}]");
                    announced = Some(g);
                }
                "  ┄   ↳ "
            }
            None => "  ┄ ",
        };
        println!("{lead}{}  \"{}\"", d.tool_name, d.rationale);
        let params = d.parameters.to_string();
        let params = if params.chars().count() > 200 {
            format!("{}…", params.chars().take(200).collect::<String>())
        } else {
            params
        };
        println!("      params: {params}");
        println!(
            "      → {}{}",
            d.outcome,
            d.call_id
                .as_deref()
                .map(|c| format!(" (call {c})"))
                .unwrap_or_default()
        );
    }
}

/// `/reasoning`, `/reasoning N`, `/reasoning all`: past rounds of the conversation.
pub fn slash(reader: &TraceReader, conversation: &ConversationId, arg: &str) -> Result<()> {
    let rounds = reader.rounds(Some(conversation), usize::MAX)?;
    let chosen: Vec<i64> = match arg {
        "" => rounds
            .last()
            .map(|r| r.round.round_seq)
            .into_iter()
            .collect(),
        "all" => rounds.iter().map(|r| r.round.round_seq).collect(),
        n => vec![
            n.parse::<i64>()
                .map_err(|_| anyhow!("/reasoning takes a round number or `all`, not {n:?}"))?,
        ],
    };
    if chosen.is_empty() {
        println!("  ✗ No reasoning data: this conversation has no rounds yet.");
    }
    for seq in chosen {
        let Some(summary) = rounds.iter().find(|r| r.round.round_seq == seq) else {
            println!("  ✗ No reasoning data for round {seq} in this conversation.");
            continue;
        };
        let Some((_, events)) = reader.round(&summary.round.round_id)? else {
            println!("  ✗ No reasoning data for round {seq} in this conversation.");
            continue;
        };
        match ledger::round_reasoning(&events) {
            Some(r) => print_block(&r),
            None if events.iter().any(|e| e.event_type == "command.executed") => {
                println!("  ─ No reasoning recorded for round {seq}.")
            }
            None => println!("  ─ Round {seq} had no tool calls."),
        }
    }
    Ok(())
}
