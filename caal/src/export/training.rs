//! The trace as training data: `caal export training`. One JSON line per
//! round (or per conversation) in the OpenAI chat fine-tuning shape
//! (`messages` with system, user, assistant, tool calls with their
//! arguments, tool results) or ShareGPT's (`conversations` with `human`,
//! `gpt`, `function_call`, `observation`). Text is what the trace holds,
//! so secrets are their `secret_ref` tokens. A manifest beside it names the
//! filters, the configuration hash and, per line, the rounds it came from
//! with the hash of each one's last event: every example traces back to
//! verified evidence.
//!
//! What makes an example: a round someone said something in (not a
//! feedback round, an operator's, or CAAL's own ringing). A round people
//! marked bad is left out, or exported with `--negatives` labelled `bad`
//! with its assistant turns weighted 0 (OpenAI's way to keep a turn as
//! context without training on it).

use std::{
    collections::{BTreeMap, HashMap},
    io::Write,
};

use serde::Serialize;
use serde_json::{Value, json};

use crate::{
    ids::ConversationId,
    trace::{EventRecord, RoundRecord, StoreError, TraceReader},
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    OpenaiChat,
    Sharegpt,
}

/// Which rounds make examples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Only {
    /// Every round someone spoke in that no one marked bad.
    All,
    /// Rounds that completed ok.
    Ok,
    /// Rounds in which the person confirmed a request ("yes" to the
    /// question), each exported after the round that asked.
    Confirmed,
    /// Rounds someone marked good.
    Good,
}

#[derive(Clone, Debug, Serialize)]
pub struct Options {
    pub format: Format,
    pub only: Only,
    /// Rounds created at or after this (`parse_since`).
    #[serde(serialize_with = "as_text")]
    pub since: Option<jiff::Timestamp>,
    /// Rounds marked bad are exported, labelled, instead of left out.
    pub negatives: bool,
    /// One line per conversation instead of per round.
    pub by_conversation: bool,
    /// The system message each example starts with.
    #[serde(skip)]
    pub system_prompt: String,
    /// The tools as offered to a model, by command id: OpenAI's
    /// `{"type": "function", "function": {name, description, parameters}}`
    /// (each line lists those it calls; a command not here is called by its id).
    #[serde(skip)]
    pub tools: BTreeMap<String, Value>,
    pub config_hash: String,
}

/// What the export came to (the manifest's counts).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub rounds_seen: u64,
    pub lines: u64,
    pub rounds_exported: u64,
    pub negatives: u64,
    /// Rounds not exported, by why.
    pub skipped: BTreeMap<&'static str, u64>,
}

/// One manifest entry: the line, and the evidence it came from.
#[derive(Serialize)]
struct Provenance<'a> {
    line: u64,
    conversation_id: &'a str,
    rounds: Vec<RoundRef<'a>>,
}

#[derive(Serialize)]
struct RoundRef<'a> {
    round_id: &'a str,
    round_seq: i64,
    /// The hash of the round's last event: the chain covers everything before it.
    event_hash: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<&'a str>,
}

/// One turn of an example, format-neutral.
enum Turn {
    User(String),
    /// A tool call: its id, the tool's name, its arguments.
    Call {
        id: String,
        name: String,
        arguments: Value,
    },
    Result {
        id: String,
        content: Value,
    },
    Assistant(String),
}

/// A round made into turns, with what the filters need.
struct Example<'a> {
    round: &'a RoundRecord,
    turns: Vec<Turn>,
    event_hash: &'a str,
    verdict: Option<&'a str>,
}

/// Writes the examples to `sink` and, when given, the manifest to
/// `manifest`; `progress` gets the number of rounds read so far.
pub fn export(
    reader: &TraceReader,
    conversation: Option<&ConversationId>,
    options: &Options,
    sink: &mut dyn Write,
    manifest: Option<&mut dyn Write>,
    progress: &mut dyn FnMut(u64),
) -> Result<Stats, StoreError> {
    let verdicts = reader.verdicts()?;
    let mut stats = Stats::default();
    let mut manifest = manifest;
    if let Some(m) = manifest.as_mut() {
        // The counts come last: they are known only at the end.
        let head = json!({"kind": "caal.training-export", "version": 1,
            "options": options, "source": reader.path().display().to_string()});
        let head = serde_json::to_string(&head).map_err(json_error)?;
        write!(m, "{},\"lines\":[", &head[..head.len() - 1]).map_err(io)?;
    }
    let conversations: Vec<Option<ConversationId>> = match (conversation, options.by_conversation) {
        (Some(c), _) => vec![Some(c.clone())],
        (None, true) => reader
            .conversations()?
            .into_iter()
            .filter_map(|c| c.conversation_id.parse().ok())
            .map(Some)
            .collect(),
        (None, false) => vec![None],
    };
    let mut seen = 0u64;
    for c in conversations {
        let mut held: Vec<(RoundRecord, Vec<EventRecord>)> = Vec::new();
        // Rounds that asked for a confirmation, by its id: the round that
        // says "yes" is exported after the round that asked.
        let mut asked: HashMap<String, (RoundRecord, Vec<EventRecord>)> = HashMap::new();
        reader.each_round(c.as_ref(), &mut |_| {}, &mut |round, events| {
            seen += 1;
            stats.rounds_seen += 1;
            progress(seen);
            let verdict = verdicts.get(&round.round_id).map(String::as_str);
            let received = events
                .iter()
                .find(|e| e.event_type == "confirm.received")
                .map(payload)
                .filter(|p| p["accepted"] == true);
            let context = received
                .as_ref()
                .and_then(|p| p["confirmation_id"].as_str())
                .and_then(|id| asked.remove(id));
            for e in events
                .iter()
                .filter(|e| e.event_type == "confirm.requested")
            {
                if let Some(id) = payload(e)["confirmation_id"].as_str() {
                    asked.insert(id.to_owned(), (round.clone(), events.to_vec()));
                }
            }
            if let Some(reason) = skip_reason(round, events, options, verdict, received.is_some()) {
                *stats.skipped.entry(reason).or_default() += 1;
                return Ok(());
            }
            if options.by_conversation {
                held.push((round.clone(), events.to_vec()));
                return Ok(());
            }
            let mut examples = Vec::with_capacity(2);
            if let Some((r, e)) = &context {
                examples.push(example(
                    r,
                    e,
                    verdicts.get(&r.round_id).map(String::as_str),
                    &options.tools,
                ));
            }
            examples.push(example(round, events, verdict, &options.tools));
            write_line(&examples, options, sink, &mut manifest, &mut stats)
        })?;
        if !held.is_empty() {
            let examples: Vec<Example<'_>> = held
                .iter()
                .map(|(r, e)| {
                    example(
                        r,
                        e,
                        verdicts.get(&r.round_id).map(String::as_str),
                        &options.tools,
                    )
                })
                .collect();
            write_line(&examples, options, sink, &mut manifest, &mut stats)?;
        }
    }
    if let Some(m) = manifest {
        let counts = serde_json::to_string(&stats).map_err(json_error)?;
        write!(m, "],\"counts\":{counts}}}").map_err(io)?;
        writeln!(m).map_err(io)?;
    }
    Ok(stats)
}

/// Why a round makes no example, if it makes none.
fn skip_reason(
    round: &RoundRecord,
    events: &[EventRecord],
    options: &Options,
    verdict: Option<&str>,
    confirmed: bool,
) -> Option<&'static str> {
    if matches!(round.channel.as_str(), "system" | "cli") {
        return Some("not said by a person");
    }
    let feedback = events.iter().any(|e| {
        e.event_type == "feedback.recorded"
            || (e.event_type == "route.selected"
                && payload(e)["route_code"] == crate::trace::events::FEEDBACK_ROUTE)
    });
    if feedback {
        return Some("feedback");
    }
    if !events.iter().any(|e| e.event_type == "input.received") {
        return Some("no input");
    }
    if options.since.is_some_and(|s| {
        round
            .created_at
            .parse::<jiff::Timestamp>()
            .is_ok_and(|t| t < s)
    }) {
        return Some("before --since");
    }
    if verdict == Some("bad") && !options.negatives {
        return Some("marked bad");
    }
    match options.only {
        Only::All => None,
        Only::Ok => (round.status != "ok").then_some("not ok"),
        Only::Confirmed => (!confirmed).then_some("not confirmed"),
        Only::Good => {
            (verdict != Some("good") && verdict != Some("bad")).then_some("not marked good")
        }
    }
}

/// `--since`: a date (`2026-11-01`, from its midnight UTC) or an RFC 3339
/// time (`2026-11-01T08:00:00Z`).
pub fn parse_since(since: &str) -> Result<jiff::Timestamp, String> {
    let since = since.trim();
    since
        .parse::<jiff::Timestamp>()
        .or_else(|_| {
            since
                .parse::<jiff::civil::Date>()
                .and_then(|d| d.to_zoned_datetime(jiff::tz::TimeZone::UTC))
                .map(|z| z.timestamp())
        })
        .map_err(|_| {
            format!(
                "--since {since:?} is not a date; give YYYY-MM-DD or an RFC 3339 time such as 2026-11-01T08:00:00Z"
            )
        })
}

fn payload(e: &EventRecord) -> Value {
    serde_json::from_str(&e.payload).unwrap_or(Value::Null)
}

/// A round's turns: what was said, the commands run (as tool calls with
/// their arguments, and their results), what was answered.
fn example<'a>(
    round: &'a RoundRecord,
    events: &'a [EventRecord],
    verdict: Option<&'a str>,
    tools: &BTreeMap<String, Value>,
) -> Example<'a> {
    let mut turns = Vec::new();
    let mut results: HashMap<String, Value> = HashMap::new();
    for e in events.iter().filter(|e| e.event_type == "tool.response") {
        let p = payload(e);
        if let Some(id) = p["call_id"].as_str() {
            // A retried call's last answer stands.
            results.insert(
                id.to_owned(),
                json!({"status": p["status"], "result": p["result"]}),
            );
        }
    }
    for e in events {
        let p = payload(e);
        match e.event_type.as_str() {
            "input.received" => {
                turns.push(Turn::User(p["raw_text"].as_str().unwrap_or("").to_owned()))
            }
            "reasoning.update" => {
                for d in p["tool_decisions"].as_array().into_iter().flatten() {
                    let (Some(command), Some(id)) =
                        (d["command_id"].as_str(), d["call_id"].as_str())
                    else {
                        continue;
                    };
                    let name = tools
                        .get(command)
                        .and_then(|t| t["function"]["name"].as_str())
                        .unwrap_or(command);
                    turns.push(Turn::Call {
                        id: id.to_owned(),
                        name: name.to_owned(),
                        arguments: d["parameters"].clone(),
                    });
                    if let Some(content) = results.get(id) {
                        turns.push(Turn::Result {
                            id: id.to_owned(),
                            content: content.clone(),
                        });
                    }
                }
            }
            "output.emitted" => {
                if let Some(text) = p["text"].as_str() {
                    turns.push(Turn::Assistant(text.to_owned()));
                }
            }
            _ => {}
        }
    }
    Example {
        round,
        turns,
        event_hash: events.last().map_or("", |e| e.hash.as_str()),
        verdict,
    }
}

fn write_line(
    examples: &[Example<'_>],
    options: &Options,
    sink: &mut dyn Write,
    manifest: &mut Option<&mut dyn Write>,
    stats: &mut Stats,
) -> Result<(), StoreError> {
    let negative = examples.iter().any(|e| e.verdict == Some("bad"));
    // The tools this line calls, as they were offered.
    let called: Vec<&str> = examples
        .iter()
        .flat_map(|e| &e.turns)
        .filter_map(|t| match t {
            Turn::Call { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let tools: Vec<Value> = options
        .tools
        .values()
        .filter(|t| {
            t["function"]["name"]
                .as_str()
                .is_some_and(|n| called.contains(&n))
        })
        .cloned()
        .collect();
    let mut line = match options.format {
        Format::OpenaiChat => openai_chat(examples, options, &tools),
        Format::Sharegpt => sharegpt(examples, options, &tools),
    };
    if negative {
        line["label"] = json!("bad");
        stats.negatives += 1;
    }
    serde_json::to_writer(&mut *sink, &line).map_err(json_error)?;
    sink.write_all(b"\n").map_err(io)?;
    stats.lines += 1;
    // A round before it for context (the question a "yes" answered) was
    // counted as its own line, or skipped, when it was read.
    stats.rounds_exported += if options.by_conversation {
        examples.len() as u64
    } else {
        1
    };
    if let Some(m) = manifest.as_mut() {
        let entry = Provenance {
            line: stats.lines,
            conversation_id: examples
                .first()
                .map_or("", |e| e.round.conversation_id.as_str()),
            rounds: examples
                .iter()
                .map(|e| RoundRef {
                    round_id: &e.round.round_id,
                    round_seq: e.round.round_seq,
                    event_hash: e.event_hash,
                    verdict: e.verdict,
                })
                .collect(),
        };
        if stats.lines > 1 {
            m.write_all(b",").map_err(io)?;
        }
        serde_json::to_writer(&mut *m, &entry).map_err(json_error)?;
    }
    Ok(())
}

fn openai_chat(examples: &[Example<'_>], options: &Options, tools: &[Value]) -> Value {
    let mut messages = vec![json!({"role": "system", "content": options.system_prompt})];
    for e in examples {
        // A turn people marked bad stays as context, never as a target.
        let weight = (e.verdict == Some("bad")).then_some(0);
        let mut calls: Vec<Value> = Vec::new();
        let flush = |calls: &mut Vec<Value>, messages: &mut Vec<Value>| {
            if !calls.is_empty() {
                let mut m = json!({"role": "assistant", "tool_calls": std::mem::take(calls)});
                if let Some(w) = weight {
                    m["weight"] = json!(w);
                }
                messages.push(m);
            }
        };
        for t in &e.turns {
            match t {
                Turn::Call {
                    id,
                    name,
                    arguments,
                } => calls.push(json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()}})),
                Turn::Result { id, content } => {
                    flush(&mut calls, &mut messages);
                    messages.push(
                        json!({"role": "tool", "tool_call_id": id, "content": content.to_string()}),
                    );
                }
                Turn::User(text) => {
                    flush(&mut calls, &mut messages);
                    messages.push(json!({"role": "user", "content": text}));
                }
                Turn::Assistant(text) => {
                    flush(&mut calls, &mut messages);
                    let mut m = json!({"role": "assistant", "content": text});
                    if let Some(w) = weight {
                        m["weight"] = json!(w);
                    }
                    messages.push(m);
                }
            }
        }
        flush(&mut calls, &mut messages);
    }
    let mut line = json!({"messages": messages});
    if !tools.is_empty() {
        line["tools"] = json!(tools);
    }
    line
}

fn sharegpt(examples: &[Example<'_>], options: &Options, tools: &[Value]) -> Value {
    let mut turns = Vec::new();
    for e in examples {
        for t in &e.turns {
            turns.push(match t {
                Turn::User(text) => json!({"from": "human", "value": text}),
                Turn::Call {
                    name, arguments, ..
                } => json!({"from": "function_call",
                    "value": json!({"name": name, "arguments": arguments}).to_string()}),
                Turn::Result { content, .. } => {
                    json!({"from": "observation", "value": content.to_string()})
                }
                Turn::Assistant(text) => json!({"from": "gpt", "value": text}),
            });
        }
    }
    let functions: Vec<&Value> = tools.iter().map(|t| &t["function"]).collect();
    json!({"conversations": turns, "system": options.system_prompt,
        "tools": serde_json::to_string(&functions).unwrap_or_default()})
}

fn as_text<S: serde::Serializer>(t: &Option<jiff::Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&t.to_string()),
        None => s.serialize_none(),
    }
}

fn io(e: std::io::Error) -> StoreError {
    StoreError::Io {
        what: "writing the training export failed".into(),
        source: e,
    }
}

fn json_error(e: serde_json::Error) -> StoreError {
    io(std::io::Error::other(e))
}
