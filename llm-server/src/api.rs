//! The OpenAI-compatible surface: request parsing, the tool prompt and its
//! JSON Schema, the answer's shape (tool calls or text), streaming chunks.
//! Kept apart from llama.cpp so that it is tested without a model.

use std::{
    io::Write,
    sync::{Arc, mpsc},
    time::{SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};
use tiny_http::{Header, Method, Request, Response, Server};

use crate::Args;

/// What the model is asked to do.
pub struct Prompt {
    /// The conversation rendered with the model's chat template.
    pub text: String,
    /// Output constrained to this JSON Schema (tool calls), if any.
    pub schema: Option<Value>,
    pub max_tokens: u32,
    /// 0 or less: greedy (the same answer every time).
    pub temperature: f32,
}

pub struct Generation {
    pub text: String,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    /// Stopped at `max_tokens` rather than at an end token.
    pub hit_limit: bool,
    pub prompt_ms: f64,
    pub generation_ms: f64,
}

/// A text's tokens, each with where it starts in the text and its log
/// probability given the tokens before it (none for the first token).
#[derive(Debug, Default, PartialEq)]
pub struct Scored {
    pub tokens: Vec<String>,
    pub offsets: Vec<usize>,
    pub logprobs: Vec<Option<f32>>,
}

/// A loaded model.
pub trait Model: Send + 'static {
    fn name(&self) -> &str;
    /// The messages (role, content) in the model's own chat template, ready for the assistant's turn.
    fn render(&self, messages: &[(String, String)]) -> Result<String, String>;
    /// Generates, handing each piece of text to `on_piece` as it is made.
    fn generate(
        &mut self,
        prompt: &Prompt,
        on_piece: &mut dyn FnMut(&str),
    ) -> Result<Generation, String>;
    /// How likely the model finds each token of `text` (raw text, no chat template).
    fn score(&mut self, text: &str) -> Result<Scored, String>;
}

/// A parsed `/v1/completions` body. Only scoring is offered (OpenAI's
/// `echo: true` with `max_tokens: 0` and `logprobs`): the prompts' tokens
/// with their log probabilities, which is how a small model is best asked
/// which of a few continuations is likeliest.
#[derive(Debug, PartialEq)]
pub struct ScoreBody {
    pub prompts: Vec<String>,
}

pub fn parse_score_body(body: &str) -> Result<ScoreBody, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let prompts = match &v["prompt"] {
        Value::String(p) => vec![p.clone()],
        Value::Array(ps) => ps
            .iter()
            .map(|p| p.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or("`prompt` must be a string or an array of strings")?,
        _ => return Err("`prompt` must be a string or an array of strings".into()),
    };
    if prompts.is_empty() || prompts.iter().any(String::is_empty) {
        return Err("`prompt` must not be empty".into());
    }
    if v["echo"] != true || v["max_tokens"].as_u64() != Some(0) || v["logprobs"].is_null() {
        return Err(
            "this server scores prompts only: send \"echo\": true, \"max_tokens\": 0 and \"logprobs\": 0"
                .into(),
        );
    }
    Ok(ScoreBody { prompts })
}

/// The `/v1/completions` answer: each prompt echoed with its tokens' log probabilities.
pub fn scored_completion(model: &str, scored: &[(String, Scored)]) -> Value {
    let tokens: usize = scored.iter().map(|(_, s)| s.tokens.len()).sum();
    json!({
        "id": format!("cmpl-{}", now_nanos()),
        "object": "text_completion",
        "created": now_nanos() / 1_000_000_000,
        "model": model,
        "choices": scored.iter().enumerate().map(|(i, (text, s))| json!({
            "index": i, "text": text, "finish_reason": "length",
            "logprobs": {"tokens": s.tokens, "token_logprobs": s.logprobs, "text_offset": s.offsets,
                         "top_logprobs": null},
        })).collect::<Vec<_>>(),
        "usage": {"prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens},
    })
}

/// A parsed `/v1/chat/completions` body.
#[derive(Debug)]
pub struct ChatBody {
    pub messages: Vec<(String, String)>,
    pub tools: Vec<Tool>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub stream: bool,
    /// `tool_choice` was `"required"` (or named a function): the reply must
    /// be a tool call, never an answer in words.
    pub tool_required: bool,
}

#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// Parses a request body; the error names what is wrong.
pub fn parse_body(body: &str) -> Result<ChatBody, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let messages = v["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or("`messages` must be a non-empty array")?
        .iter()
        .map(|m| {
            let role = m["role"].as_str().ok_or("each message needs a `role`")?;
            // Tool results and assistant turns may have null content.
            let content = m["content"].as_str().unwrap_or_default();
            let role = if role == "tool" { "user" } else { role };
            Ok((role.to_owned(), content.to_owned()))
        })
        .collect::<Result<Vec<_>, &str>>()?;
    let tools = v["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    let f = &t["function"];
                    Ok(Tool {
                        name: f["name"]
                            .as_str()
                            .filter(|n| !n.is_empty())
                            .ok_or("each tool needs `function.name`")?
                            .to_owned(),
                        description: f["description"].as_str().unwrap_or_default().to_owned(),
                        parameters: match &f["parameters"] {
                            Value::Null => json!({"type": "object", "properties": {}}),
                            p => p.clone(),
                        },
                    })
                })
                .collect::<Result<Vec<_>, &str>>()
        })
        .transpose()?
        .unwrap_or_default();
    // "auto" (or absent): a tool call or an answer; "none": words only;
    // "required" or {"type": "function", "function": {"name"}}: a call
    // (of that one tool).
    let (tools, tool_required) = match &v["tool_choice"] {
        Value::Null => (tools, false),
        Value::String(c) if c == "auto" => (tools, false),
        Value::String(c) if c == "none" => (Vec::new(), false),
        Value::String(c) if c == "required" => (tools, true),
        Value::Object(o) => {
            let name = o
                .get("function")
                .and_then(|f| f["name"].as_str())
                .ok_or("`tool_choice` as an object names `function.name`")?;
            let named: Vec<Tool> = tools.into_iter().filter(|t| t.name == name).collect();
            if named.is_empty() {
                return Err("`tool_choice` names a function that is not in `tools`".into());
            }
            (named, true)
        }
        _ => {
            return Err(
                "`tool_choice` is \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}"
                    .into(),
            );
        }
    };
    if tool_required && tools.is_empty() {
        return Err("`tool_choice` requires a tool call, but no `tools` are given".into());
    }
    let max_tokens = v["max_tokens"]
        .as_u64()
        .or(v["max_completion_tokens"].as_u64())
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    Ok(ChatBody {
        messages,
        tools,
        max_tokens,
        temperature: v["temperature"].as_f64().map(|t| t as f32),
        stream: v["stream"].as_bool().unwrap_or(false),
        tool_required,
    })
}

/// The instruction that tells the model how to call a tool, one compact
/// line per tool (`name(arg: type, ...): description`): small models have
/// small contexts, and the grammar enforces the exact schema anyway.
pub fn tool_instructions(tools: &[Tool], required: bool) -> String {
    let mut s = String::from(if required {
        "Call one of these tools. Reply with JSON only: {\"tool\": \"<name>\", \"arguments\": {...}}.\nTools:\n"
    } else {
        "You can call one of these tools. Reply with JSON only: {\"tool\": \"<name>\", \"arguments\": {...}} to call a tool, or {\"answer\": \"<text>\"} to answer in words.\nTools:\n"
    });
    for t in tools {
        let required: Vec<&str> = t.parameters["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let args: Vec<String> = t.parameters["properties"]
            .as_object()
            .map(|props| {
                props
                    .iter()
                    .map(|(name, p)| {
                        let kind = match p["enum"].as_array() {
                            Some(values) => values
                                .iter()
                                .map(|v| v.as_str().map_or(v.to_string(), str::to_owned))
                                .collect::<Vec<_>>()
                                .join("|"),
                            None => p["type"].as_str().unwrap_or("any").to_owned(),
                        };
                        let optional = if required.contains(&name.as_str()) {
                            ""
                        } else {
                            "?"
                        };
                        format!("{name}{optional}: {kind}")
                    })
                    .collect()
            })
            .unwrap_or_default();
        s.push_str(&format!(
            "- {}({}): {}\n",
            t.name,
            args.join(", "),
            t.description
        ));
    }
    s
}

/// The JSON Schema of a reply when tools are offered: one tool call with
/// arguments of that tool's schema, or (unless a call is required) an answer.
pub fn tool_schema(tools: &[Tool], required: bool) -> Value {
    let mut options: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({"type": "object",
                   "properties": {"tool": {"const": t.name}, "arguments": t.parameters},
                   "required": ["tool", "arguments"], "additionalProperties": false})
        })
        .collect();
    if !required {
        options.push(
            json!({"type": "object", "properties": {"answer": {"type": "string"}},
                            "required": ["answer"], "additionalProperties": false}),
        );
    }
    json!({"oneOf": options})
}

/// The messages as the model sees them: the tool instructions joined to the
/// system message (one system message, first).
pub fn with_tools(
    messages: &[(String, String)],
    tools: &[Tool],
    required: bool,
) -> Vec<(String, String)> {
    if tools.is_empty() {
        return messages.to_vec();
    }
    let mut system = String::new();
    let mut rest = Vec::new();
    for (role, content) in messages {
        if role == "system" {
            system.push_str(content);
            system.push('\n');
        } else {
            rest.push((role.clone(), content.clone()));
        }
    }
    system.push_str(&tool_instructions(tools, required));
    let mut out = vec![("system".to_owned(), system)];
    out.extend(rest);
    out
}

/// A tool reply turned into the OpenAI message: a tool call, or content.
pub fn message_of(text: &str, tools: &[Tool]) -> (Value, &'static str) {
    if !tools.is_empty()
        && let Ok(v) = serde_json::from_str::<Value>(text.trim())
    {
        if let Some(name) = v["tool"].as_str() {
            let arguments = v.get("arguments").cloned().unwrap_or_else(|| json!({}));
            return (
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": format!("call_{}", now_nanos()),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()},
                }]}),
                "tool_calls",
            );
        }
        if let Some(answer) = v["answer"].as_str() {
            return (json!({"role": "assistant", "content": answer}), "stop");
        }
    }
    (json!({"role": "assistant", "content": text}), "stop")
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

fn completion(model: &str, message: Value, finish: &str, g: &Generation) -> Value {
    json!({
        "id": format!("chatcmpl-{}", now_nanos()),
        "object": "chat.completion",
        "created": now_nanos() / 1_000_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens,
                  "total_tokens": g.prompt_tokens + g.completion_tokens},
        "timings": timings(g),
    })
}

fn timings(g: &Generation) -> Value {
    let per_second = if g.generation_ms > 0.0 {
        g.completion_tokens as f64 * 1000.0 / g.generation_ms
    } else {
        0.0
    };
    json!({"prompt_ms": g.prompt_ms, "predicted_ms": g.generation_ms, "predicted_per_second": per_second})
}

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> Vec<u8> {
    let v = json!({"object": "chat.completion.chunk", "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {v}\n\n").into_bytes()
}

fn json_response(status: u16, body: &Value) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_data(body.to_string().into_bytes())
        .with_status_code(status)
        .with_header(header("Content-Type", "application/json"))
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("static header")
}

fn error(status: u16, kind: &str, message: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    json_response(
        status,
        &json!({"error": {"message": message, "type": kind}}),
    )
}

/// Listens, prints the ready line, and answers until killed. Health and
/// model listings are answered at once; chats wait their turn for the model.
pub fn serve(args: &Args, model: impl Model) -> anyhow::Result<()> {
    let server = Arc::new(
        Server::http((args.host.as_str(), args.port))
            .map_err(|e| anyhow::anyhow!("cannot listen on {}:{}: {e}", args.host, args.port))?,
    );
    let addr = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| anyhow::anyhow!("not an IP listener"))?;
    let name = model.name().to_owned();
    println!("caal-llm listening on http://{addr} model={name}");
    use std::io::Write as _;
    std::io::stdout().flush()?;

    let (tx, rx) = mpsc::channel::<(Request, String, bool)>();
    let default_max = args.max_tokens;
    let worker = std::thread::spawn(move || chat_loop(model, rx, default_max));
    for mut request in server.incoming_requests() {
        let path = request
            .url()
            .split('?')
            .next()
            .unwrap_or_default()
            .to_owned();
        let response = match (request.method(), path.as_str()) {
            (Method::Get, "/health") => json_response(200, &json!({"status": "ok", "model": name})),
            (Method::Get, "/v1/models") => json_response(
                200,
                &json!({"object": "list", "data": [{"id": name, "object": "model", "owned_by": "caal"}]}),
            ),
            (Method::Post, "/v1/chat/completions" | "/v1/completions") => {
                let mut body = String::new();
                if let Err(e) = request.as_reader().read_to_string(&mut body) {
                    let _ = request.respond(error(400, "invalid_request_error", &e.to_string()));
                    continue;
                }
                let scoring = path == "/v1/completions";
                if tx.send((request, body, scoring)).is_err() {
                    break;
                }
                continue;
            }
            _ => error(
                404,
                "not_found",
                "unknown path; this server offers GET /health, GET /v1/models, POST /v1/chat/completions and POST /v1/completions (scoring)",
            ),
        };
        let _ = request.respond(response);
    }
    drop(tx);
    let _ = worker.join();
    Ok(())
}

fn score(model: &mut impl Model, request: Request, body: &str) {
    let response = match parse_score_body(body) {
        Err(e) => error(400, "invalid_request_error", &e),
        Ok(parsed) => {
            let mut scored = Vec::with_capacity(parsed.prompts.len());
            let mut failed = None;
            for p in parsed.prompts {
                match model.score(&p) {
                    Ok(s) => scored.push((p, s)),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            match failed {
                Some(e) => error(400, "invalid_request_error", &e),
                None => json_response(200, &scored_completion(model.name(), &scored)),
            }
        }
    };
    let _ = request.respond(response);
}

fn chat_loop(mut model: impl Model, rx: mpsc::Receiver<(Request, String, bool)>, default_max: u32) {
    for (request, body, scoring) in rx {
        if scoring {
            score(&mut model, request, &body);
            continue;
        }
        let parsed = match parse_body(&body) {
            Ok(p) => p,
            Err(e) => {
                let _ = request.respond(error(400, "invalid_request_error", &e));
                continue;
            }
        };
        let messages = with_tools(&parsed.messages, &parsed.tools, parsed.tool_required);
        let text = match model.render(&messages) {
            Ok(t) => t,
            Err(e) => {
                let _ = request.respond(error(500, "server_error", &e));
                continue;
            }
        };
        let prompt = Prompt {
            text,
            schema: (!parsed.tools.is_empty())
                .then(|| tool_schema(&parsed.tools, parsed.tool_required)),
            max_tokens: parsed.max_tokens.unwrap_or(default_max).max(1),
            temperature: parsed.temperature.unwrap_or(0.0),
        };
        let name = model.name().to_owned();
        if parsed.stream {
            stream(&mut model, request, &prompt, &parsed.tools, &name);
            continue;
        }
        let response = match model.generate(&prompt, &mut |_| {}) {
            Ok(g) => {
                let (message, finish) = message_of(&g.text, &parsed.tools);
                let finish = if g.hit_limit { "length" } else { finish };
                json_response(200, &completion(&name, message, finish, &g))
            }
            Err(e) => error(400, "invalid_request_error", &e),
        };
        let _ = request.respond(response);
    }
}

/// `stream: true`: text pieces as they come, each written and flushed at
/// once as its own HTTP chunk (server-sent events over chunked transfer
/// encoding, so the connection stays usable); a tool call as one chunk at
/// the end.
fn stream(model: &mut impl Model, request: Request, prompt: &Prompt, tools: &[Tool], name: &str) {
    let mut out = request.into_writer();
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
    if out.write_all(head).is_err() {
        return;
    }
    let mut send = |bytes: &[u8]| -> bool {
        let mut framed = format!("{:x}\r\n", bytes.len()).into_bytes();
        framed.extend_from_slice(bytes);
        framed.extend_from_slice(b"\r\n");
        out.write_all(&framed).and_then(|()| out.flush()).is_ok()
    };
    if !send(&chunk(name, json!({"role": "assistant"}), None)) {
        return;
    }
    let text_only = tools.is_empty();
    let mut open = true;
    let result = model.generate(prompt, &mut |piece| {
        if text_only && open {
            open = send(&chunk(name, json!({"content": piece}), None));
        }
    });
    match result {
        Ok(g) => {
            let (message, finish) = message_of(&g.text, tools);
            if !text_only {
                let mut delta = message.clone();
                delta.as_object_mut().map(|m| m.remove("role"));
                send(&chunk(name, delta, None));
            }
            let finish = if g.hit_limit { "length" } else { finish };
            let last = json!({"object": "chat.completion.chunk", "model": name,
                              "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                              "usage": {"prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens,
                                        "total_tokens": g.prompt_tokens + g.completion_tokens},
                              "timings": timings(&g)});
            send(format!("data: {last}\n\n").as_bytes());
        }
        Err(e) => {
            let v = json!({"error": {"message": e, "type": "server_error"}});
            send(format!("data: {v}\n\n").as_bytes());
        }
    }
    if send(b"data: [DONE]\n\n") {
        // The last chunk: the body ends here.
        let _ = out.write_all(b"0\r\n\r\n").and_then(|()| out.flush());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<Tool> {
        vec![Tool {
            name: "lights_set".into(),
            description: "turn lights on or off".into(),
            parameters: json!({"type": "object", "properties": {"state": {"enum": ["on", "off"]}}, "required": ["state"]}),
        }]
    }

    #[test]
    fn bodies_are_parsed_and_bad_ones_named() {
        let b = parse_body(r#"{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,
                              "tools":[{"type":"function","function":{"name":"t","parameters":{"type":"object"}}}]}"#).unwrap();
        assert_eq!(b.messages.len(), 2);
        assert_eq!(b.max_tokens, Some(5));
        assert!(b.stream);
        assert_eq!(b.tools[0].name, "t");
        assert!(parse_body("{").unwrap_err().contains("not JSON"));
        assert!(
            parse_body(r#"{"messages":[]}"#)
                .unwrap_err()
                .contains("messages")
        );
        assert!(
            parse_body(r#"{"messages":[{"content":"x"}]}"#)
                .unwrap_err()
                .contains("role")
        );
    }

    #[test]
    fn tool_replies_become_tool_calls_and_answers_become_content() {
        let (m, finish) = message_of(
            r#"{"tool":"lights_set","arguments":{"state":"on"}}"#,
            &tools(),
        );
        assert_eq!(finish, "tool_calls");
        assert_eq!(m["tool_calls"][0]["function"]["name"], "lights_set");
        let args: Value = serde_json::from_str(
            m["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(args, json!({"state": "on"}));
        let (m, finish) = message_of(r#"{"answer":"Paris."}"#, &tools());
        assert_eq!((m["content"].as_str(), finish), (Some("Paris."), "stop"));
        // Without tools the text is the answer, JSON or not.
        let (m, _) = message_of(r#"{"tool":"x"}"#, &[]);
        assert_eq!(m["content"], r#"{"tool":"x"}"#);
    }

    #[test]
    fn tools_join_the_one_system_message_and_the_schema_offers_each() {
        let msgs = vec![
            ("system".to_owned(), "Be brief.".to_owned()),
            ("user".to_owned(), "lights on".to_owned()),
        ];
        let out = with_tools(&msgs, &tools(), false);
        assert_eq!(out.len(), 2);
        assert!(out[0].1.starts_with("Be brief."));
        assert!(
            out[0]
                .1
                .contains("- lights_set(state: on|off): turn lights on or off"),
            "{}",
            out[0].1
        );
        let schema = tool_schema(&tools(), false);
        assert_eq!(schema["oneOf"].as_array().unwrap().len(), 2);
        assert_eq!(
            schema["oneOf"][0]["properties"]["tool"]["const"],
            "lights_set"
        );
    }

    #[test]
    fn scoring_takes_prompts_to_echo_and_names_what_it_cannot_do() {
        let body = parse_score_body(
            r#"{"prompt": ["a b", "c d"], "max_tokens": 0, "echo": true, "logprobs": 0}"#,
        )
        .unwrap();
        assert_eq!(body.prompts, vec!["a b", "c d"]);
        let one =
            parse_score_body(r#"{"prompt": "x y", "max_tokens": 0, "echo": true, "logprobs": 1}"#)
                .unwrap();
        assert_eq!(one.prompts, vec!["x y"]);
        let generate = parse_score_body(r#"{"prompt": "x", "max_tokens": 16}"#).unwrap_err();
        assert!(generate.contains("scores prompts only"), "{generate}");
        assert!(
            parse_score_body(r#"{"prompt": 3}"#)
                .unwrap_err()
                .contains("`prompt`")
        );
        assert!(
            parse_score_body(r#"{"prompt": [], "max_tokens": 0, "echo": true, "logprobs": 0}"#)
                .unwrap_err()
                .contains("empty")
        );
        let scored = Scored {
            tokens: vec!["a".into(), " b".into()],
            offsets: vec![0, 1],
            logprobs: vec![None, Some(-1.5)],
        };
        let v = scored_completion("m", &[("a b".into(), scored)]);
        assert_eq!(v["object"], "text_completion");
        assert_eq!(v["choices"][0]["text"], "a b");
        assert_eq!(
            v["choices"][0]["logprobs"]["token_logprobs"],
            json!([null, -1.5])
        );
        assert_eq!(v["choices"][0]["logprobs"]["text_offset"], json!([0, 1]));
    }

    #[test]
    fn a_required_tool_call_leaves_no_answer_in_words() {
        let body = |choice: &str| {
            format!(
                r#"{{"messages":[{{"role":"user","content":"hi"}}],"tool_choice":{choice},
                    "tools":[{{"type":"function","function":{{"name":"a"}}}},{{"type":"function","function":{{"name":"b"}}}}]}}"#
            )
        };
        let required = parse_body(&body(r#""required""#)).unwrap();
        assert!(required.tool_required);
        assert_eq!(required.tools.len(), 2);
        let named = parse_body(&body(r#"{"type":"function","function":{"name":"b"}}"#)).unwrap();
        assert!(named.tool_required);
        assert_eq!(named.tools.len(), 1);
        assert_eq!(named.tools[0].name, "b");
        assert!(parse_body(&body(r#""none""#)).unwrap().tools.is_empty());
        assert!(!parse_body(&body(r#""auto""#)).unwrap().tool_required);
        let unknown = parse_body(&body(r#"{"type":"function","function":{"name":"c"}}"#));
        assert!(unknown.unwrap_err().contains("not in `tools`"));
        assert!(parse_body(&body("7")).unwrap_err().contains("tool_choice"));

        let schema = tool_schema(&tools(), true);
        assert_eq!(schema["oneOf"].as_array().unwrap().len(), 1, "{schema}");
        let msgs = vec![("user".to_owned(), "lights on".to_owned())];
        let out = with_tools(&msgs, &tools(), true);
        assert!(!out[0].1.contains("answer"), "{}", out[0].1);
    }
}
