//! The model layer's question, on the wire: which of a few meanings did the
//! person mean? The options are the commands the nearest meanings would run
//! (said as their summaries), each with the example sentence it was nearest
//! to, and a way out ("none of these"). They are offered as one tool,
//! `choose`, whose `meaning` must be one of the options word for word: an
//! enum in its JSON Schema, which the local server turns into a grammar, so
//! a small model can only pick, never invent. The request and the reading
//! of the answer live here; asking, recording and deciding live in the
//! round and the router.

use serde_json::{Value, json};

use super::{ChatMessage, ChatRequest, ChatResponse, ToolSpec};
use crate::router::Choice;

/// The tool the model answers with.
pub const TOOL: &str = "choose";

/// What the model is told when `[understand.model] prompt` is empty.
pub const DEFAULT_PROMPT: &str = "You sort what a person said to a home assistant. \
Pick the option that does what they asked for. \
If they asked for none of them (they are talking, asking a question, or telling a story), pick the option that says none of these.";

/// One option: its words and the example sentence it was nearest to.
#[derive(Clone, Debug, PartialEq)]
pub struct Offer {
    pub label: String,
    pub example: String,
    /// The way out: no request.
    pub none: bool,
}

/// A decision's choices as the options offered.
pub fn offers(choices: &[Choice]) -> Vec<Offer> {
    choices
        .iter()
        .map(|c| Offer {
            label: c.label.clone(),
            example: c.example.clone(),
            none: c.understood.is_none(),
        })
        .collect()
}

/// What scoring puts before what was said and before each option.
const SAID: &str = "Someone said to their home assistant: \"";
const WANT: &str = "\"\nWhat they want the assistant to do is";
/// The same without the sentence: how likely each option is anyway.
const ANYWAY: &str =
    "Someone said something to their home assistant.\nWhat they want the assistant to do is";
/// The way out, as a continuation.
const NOTHING: &str = " nothing: it is not a request.";

/// The texts to score: each option after what was said, then each option
/// with nothing said (to take away how likely an option is anyway, so a
/// short or common one does not win by being short or common).
pub fn score_texts(said: &str, offers: &[Offer]) -> Vec<(String, String)> {
    let continuation = |o: &Offer| {
        if o.none {
            NOTHING.to_owned()
        } else {
            format!(" {}.", o.label)
        }
    };
    let with = format!("{SAID}{}{WANT}", said.trim().replace('"', "'"));
    offers
        .iter()
        .map(|o| (with.clone(), continuation(o)))
        .chain(offers.iter().map(|o| (ANYWAY.to_owned(), continuation(o))))
        .collect()
}

/// The option the scores of `score_texts` favour most (log probability
/// after what was said, less that with nothing said), with each option's score.
pub fn pick_by_score(sums: &[f64], offers: &[Offer]) -> Result<(usize, Vec<f64>), String> {
    if sums.len() != offers.len() * 2 || offers.is_empty() {
        return Err(format!(
            "{} scores for {} options",
            sums.len(),
            offers.len()
        ));
    }
    let (with, anyway) = sums.split_at(offers.len());
    let scores: Vec<f64> = with.iter().zip(anyway).map(|(w, a)| w - a).collect();
    let best = scores
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
        .ok_or("no scores")?;
    Ok((best, scores))
}

/// The request: the instruction and the options as the system message,
/// what was said as the user message, one tool whose argument is held to
/// the options.
pub fn request(prompt: &str, said: &str, options: &[Offer], max_tokens: u32) -> ChatRequest {
    let prompt = if prompt.trim().is_empty() {
        DEFAULT_PROMPT
    } else {
        prompt
    };
    let mut system = format!("{prompt}\nOptions:\n");
    for o in options {
        if o.example.is_empty() {
            system.push_str(&format!("- {}\n", o.label));
        } else {
            system.push_str(&format!("- {} (as in \"{}\")\n", o.label, o.example));
        }
    }
    let labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
    ChatRequest {
        messages: vec![
            ChatMessage::new("system", system),
            ChatMessage::new("user", said.to_owned()),
        ],
        tools: vec![ToolSpec {
            name: TOOL.into(),
            description: "what the person asked for: one of the options, word for word".into(),
            parameters: json!({
                "type": "object",
                "properties": {"meaning": {"type": "string", "enum": labels}},
                "required": ["meaning"],
                "additionalProperties": false,
            }),
        }],
        max_tokens: Some(max_tokens),
        // The same answer every time for the same sentence.
        temperature: Some(0.0),
        // A choice, never an answer in words.
        tool_required: true,
    }
}

/// Which option the answer chose; the error says why there is no choice
/// (the model answered in words, or named no option).
pub fn pick(response: &ChatResponse, options: &[Offer]) -> Result<usize, String> {
    let call = response
        .tool_calls
        .iter()
        .find(|c| c.name == TOOL)
        .ok_or_else(|| {
            format!(
                "the model answered in words instead of choosing: {:?}",
                response.text.chars().take(80).collect::<String>()
            )
        })?;
    let meaning = match &call.arguments {
        Value::Object(args) => args.get("meaning").and_then(Value::as_str),
        _ => None,
    }
    .ok_or("the choice names no `meaning`")?;
    let wanted = meaning.trim().to_lowercase();
    options
        .iter()
        .position(|o| o.label.to_lowercase() == wanted)
        .ok_or_else(|| format!("{meaning:?} is not one of the options"))
}

/// What asking came to: the pick (or why there is none), what the model
/// said (tool calls, text) or the scores, and the exchange's time.
pub struct Asked {
    pub picked: Result<usize, String>,
    pub evidence: Value,
    pub latency_ms: f64,
    /// The tier could not be asked at all (unreachable, refused).
    pub failed: Option<super::LlmError>,
}

/// Asks `tier` which offer was meant, by `method`.
pub fn ask(
    tier: &super::Tier,
    method: crate::config::ChoiceMethod,
    prompt: &str,
    said: &str,
    offers: &[Offer],
    max_tokens: u32,
) -> Asked {
    let started = std::time::Instant::now();
    // (the pick, what the model gave for it, the exchange's failure)
    let (picked, evidence, failed) = match method {
        crate::config::ChoiceMethod::Score => match tier.score(&score_texts(said, offers)) {
            Ok(sums) => match pick_by_score(&sums, offers) {
                Ok((best, scores)) => {
                    let scores: Vec<f64> = scores
                        .iter()
                        .map(|s| (s * 1000.0).round() / 1000.0)
                        .collect();
                    (Ok(best), json!({"scores": scores}), None)
                }
                Err(e) => (Err(e), Value::Null, None),
            },
            Err(e) => (Err(e.to_string()), Value::Null, Some(e)),
        },
        crate::config::ChoiceMethod::Choose => {
            match tier.chat(&request(prompt, said, offers, max_tokens)) {
                Ok(response) => (
                    pick(&response, offers),
                    json!({"tool_calls": response.tool_calls,
                           "text": crate::safety::global().scrub(&response.text)}),
                    None,
                ),
                Err(e) => (Err(e.to_string()), Value::Null, Some(e)),
            }
        }
    };
    Asked {
        picked,
        evidence,
        latency_ms: started.elapsed().as_secs_f64() * 1e3,
        failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ModelToolCall;

    fn options() -> Vec<Offer> {
        vec![
            Offer {
                label: "turn off the kitchen lights".into(),
                example: "shut the kitchen lights".into(),
                none: false,
            },
            Offer {
                label: "turn on the kitchen lights".into(),
                example: "light up the kitchen".into(),
                none: false,
            },
            Offer {
                label: "none of these".into(),
                example: String::new(),
                none: true,
            },
        ]
    }

    fn answer(tool_calls: Vec<ModelToolCall>, text: &str) -> ChatResponse {
        ChatResponse {
            text: text.into(),
            tool_calls,
            ..ChatResponse::default()
        }
    }

    #[test]
    fn the_options_are_held_to_by_the_tools_schema_and_shown_with_their_examples() {
        let r = request("", "the kitchen can go dark now", &options(), 48);
        let system = &r.messages[0].content;
        assert!(system.starts_with(DEFAULT_PROMPT), "{system}");
        assert!(
            system.contains("- turn on the kitchen lights (as in \"light up the kitchen\")"),
            "{system}"
        );
        assert!(system.contains("- none of these\n"), "{system}");
        assert_eq!(r.messages[1].content, "the kitchen can go dark now");
        let schema = &r.tools[0].parameters["properties"]["meaning"];
        assert_eq!(
            schema["enum"],
            json!([
                "turn off the kitchen lights",
                "turn on the kitchen lights",
                "none of these"
            ])
        );
        assert_eq!(r.temperature, Some(0.0));
        assert!(r.tool_required, "a choice, never words");
    }

    #[test]
    fn scoring_weighs_each_option_after_what_was_said_against_it_anyway() {
        let texts = score_texts("the kitchen can go \"dark\" now", &options());
        assert_eq!(texts.len(), 6);
        assert!(
            texts[0].0.contains("\"the kitchen can go 'dark' now\""),
            "{texts:?}"
        );
        assert_eq!(texts[1].1, " turn on the kitchen lights.");
        assert_eq!(texts[2].1, NOTHING);
        assert!(!texts[3].0.contains("kitchen"), "{texts:?}");
        // "off" is likelier after what was said, but much likelier anyway:
        // "on" gained the most from the sentence.
        let (best, scores) =
            pick_by_score(&[-5.0, -6.0, -9.0, -2.0, -8.0, -9.5], &options()).unwrap();
        assert_eq!(best, 1, "{scores:?}");
        assert_eq!(scores, vec![-3.0, 2.0, 0.5]);
        assert!(pick_by_score(&[-1.0], &options()).is_err());
    }

    #[test]
    fn a_choice_is_read_back_and_anything_else_is_named() {
        let call = |args: Value| ModelToolCall {
            id: None,
            name: TOOL.into(),
            arguments: args,
        };
        let o = options();
        assert_eq!(
            pick(
                &answer(
                    vec![call(json!({"meaning": "Turn on the kitchen lights"}))],
                    ""
                ),
                &o
            ),
            Ok(1)
        );
        assert_eq!(
            pick(
                &answer(vec![call(json!({"meaning": "none of these"}))], ""),
                &o
            ),
            Ok(2)
        );
        let words = pick(&answer(vec![], "Sure, I can help."), &o).unwrap_err();
        assert!(words.contains("answered in words"), "{words}");
        let other = pick(
            &answer(vec![call(json!({"meaning": "open the garage"}))], ""),
            &o,
        )
        .unwrap_err();
        assert!(other.contains("not one of the options"), "{other}");
        let none = pick(&answer(vec![call(json!({}))], ""), &o).unwrap_err();
        assert!(none.contains("no `meaning`"), "{none}");
    }
}
