//! LLM providers, reached over HTTP whatever their tier: an
//! OpenAI-compatible `/v1/chat/completions` (remote services, and the
//! embedded local model's own server) and Ollama's `/api/chat`. Both with
//! tool calling (tools described by JSON Schema) and timeouts. The text a
//! model gives beside its tool calls is kept as the turn narrative.
//!
//! Prompts reach a provider already scrubbed; secret_refs are never resolved
//! for a model.

pub use crate::config::ProviderKind;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use ureq::Agent;

use crate::trace::chain::sha256_tagged;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A tool the model may call, its arguments described by a JSON Schema.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

impl ToolSpec {
    /// As OpenAI's wire offers a tool (and its fine-tuning lines list one).
    pub fn wire(&self) -> Value {
        json!({"type": "function", "function": {"name": self.name,
            "description": self.description, "parameters": self.parameters}})
    }
}

#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// The reply must call one of the tools (OpenAI's `tool_choice:
    /// "required"`); Ollama has no such switch and is only asked.
    pub tool_required: bool,
}

/// A tool call the model asked for. `arguments` is JSON if it parsed, else
/// the raw text as a string (validators catch that).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelToolCall {
    pub id: Option<String>,
    pub name: String,
    pub arguments: Value,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ChatResponse {
    pub model: String,
    /// The assistant's text: the answer, or the narrative beside tool calls.
    pub text: String,
    pub tool_calls: Vec<ModelToolCall>,
    /// Reasoning the model gave apart from its answer (`reasoning_content`,
    /// `reasoning` or Ollama's `thinking`), if any.
    pub reasoning: Option<String>,
    pub usage: Option<Value>,
    /// The model stopped at its token limit.
    pub truncated: bool,
    pub latency_ms: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error(
        "{url} did not answer within {timeout_ms} ms; raise the timeout or check the model server"
    )]
    Timeout { url: String, timeout_ms: u64 },
    #[error("cannot reach {url} ({detail}); is the model server running there?")]
    Unreachable { url: String, detail: String },
    #[error("{url} answered HTTP {status}: {body}")]
    Http {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url} answered something that is not a chat response: {detail}")]
    Malformed { url: String, detail: String },
    #[error("cannot start the local model's server {bin}: {detail}")]
    Start { bin: String, detail: String },
}

impl LlmError {
    /// Worth trying again: timeouts, refused connections, HTTP 5xx and 429.
    pub fn transient(&self) -> bool {
        match self {
            LlmError::Timeout { .. } | LlmError::Unreachable { .. } => true,
            LlmError::Http { status, .. } => *status == 429 || *status >= 500,
            LlmError::Malformed { .. } | LlmError::Start { .. } => false,
        }
    }
}

/// An agent whose every phase (connect, send, wait for the answer, read it)
/// is bounded by `timeout_ms`. Not a global timeout: with one, ureq
/// resolves each new connection's host on a thread of its own.
pub(crate) fn phased_agent(timeout_ms: u64) -> Agent {
    let t = Some(Duration::from_millis(timeout_ms));
    Agent::config_builder()
        .timeout_connect(t)
        .timeout_send_request(t)
        .timeout_send_body(t)
        .timeout_recv_response(t)
        .timeout_recv_body(t)
        .http_status_as_error(false)
        .build()
        .into()
}

/// One model behind one HTTP endpoint.
pub struct Provider {
    kind: ProviderKind,
    base_url: String,
    model: String,
    api_key: Option<String>,
    timeout_ms: u64,
    agent: Agent,
}

impl Provider {
    pub fn new(
        kind: ProviderKind,
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout_ms: u64,
    ) -> Self {
        let agent = phased_agent(timeout_ms);
        if let Some(key) = &api_key {
            // The key is sent to its provider, and scrubbed from everything else.
            crate::safety::global().seed("llm_api_key", key);
        }
        Self {
            kind,
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key,
            timeout_ms,
            agent,
        }
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// A quick GET of the model listing (`/v1/models`, Ollama's `/api/tags`):
    /// does anything answer there?
    pub fn probe(&self) -> Result<(), String> {
        let url = match self.kind {
            ProviderKind::OpenAi => format!("{}/v1/models", self.base_url),
            ProviderKind::Ollama => format!("{}/api/tags", self.base_url),
        };
        let agent: Agent = Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(2)))
            .http_status_as_error(false)
            .build()
            .into();
        let mut call = agent.get(&url);
        if let Some(key) = &self.api_key {
            call = call.header("Authorization", &format!("Bearer {key}"));
        }
        match call.call() {
            Ok(r) if r.status().as_u16() < 500 => Ok(()),
            Ok(r) => Err(format!("HTTP {}", r.status().as_u16())),
            Err(e) => Err(e.to_string()),
        }
    }

    fn url(&self) -> String {
        match self.kind {
            ProviderKind::OpenAi => format!("{}/v1/chat/completions", self.base_url),
            ProviderKind::Ollama => format!("{}/api/chat", self.base_url),
        }
    }

    /// The request body in this provider's wire format.
    pub fn body(&self, request: &ChatRequest) -> Value {
        let tools: Vec<Value> = request.tools.iter().map(ToolSpec::wire).collect();
        let mut body = json!({"model": self.model, "messages": request.messages, "stream": false});
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        match self.kind {
            ProviderKind::OpenAi => {
                if let Some(n) = request.max_tokens {
                    body["max_tokens"] = json!(n);
                }
                if request.tool_required && !request.tools.is_empty() {
                    body["tool_choice"] = json!("required");
                }
                if let Some(t) = request.temperature {
                    body["temperature"] = json!(t);
                }
            }
            ProviderKind::Ollama => {
                let mut options = serde_json::Map::new();
                if let Some(n) = request.max_tokens {
                    options.insert("num_predict".into(), json!(n));
                }
                if let Some(t) = request.temperature {
                    options.insert("temperature".into(), json!(t));
                }
                if !options.is_empty() {
                    body["options"] = Value::Object(options);
                }
            }
        }
        body
    }

    /// POSTs `body` as JSON to `url`: the answer's JSON, or the error that
    /// says what went wrong (timeouts and refused connections apart).
    fn exchange(&self, url: &str, body: &Value) -> Result<Value, LlmError> {
        let mut call = self.agent.post(url);
        if let Some(key) = &self.api_key {
            call = call.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = call.send_json(body).map_err(|e| match e {
            ureq::Error::Timeout(_) => LlmError::Timeout {
                url: url.to_owned(),
                timeout_ms: self.timeout_ms,
            },
            other => LlmError::Unreachable {
                url: url.to_owned(),
                detail: other.to_string(),
            },
        })?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(|e| match e {
            ureq::Error::Timeout(_) => LlmError::Timeout {
                url: url.to_owned(),
                timeout_ms: self.timeout_ms,
            },
            other => LlmError::Malformed {
                url: url.to_owned(),
                detail: other.to_string(),
            },
        })?;
        if !(200..300).contains(&status) {
            let body = crate::safety::global()
                .scrub(&text.chars().take(300).collect::<String>())
                .into_owned();
            return Err(LlmError::Http {
                url: url.to_owned(),
                status,
                body,
            });
        }
        serde_json::from_str(&text).map_err(|e| LlmError::Malformed {
            url: url.to_owned(),
            detail: format!("not JSON ({e})"),
        })
    }

    /// How likely the model finds each continuation, in OpenAI's legacy
    /// completions wire format (`POST /v1/completions` with `echo: true`,
    /// `max_tokens: 0`, `logprobs: 0`; `caal-llm` and most local servers
    /// speak it): for each (prefix, continuation), the sum of the log
    /// probabilities of the continuation's tokens given what comes before.
    pub fn score(&self, texts: &[(String, String)]) -> Result<Vec<f64>, LlmError> {
        let url = format!("{}/v1/completions", self.base_url);
        if self.kind != ProviderKind::OpenAi {
            return Err(LlmError::Malformed {
                url,
                detail:
                    "scoring needs an OpenAI-compatible server (/v1/completions); Ollama has none"
                        .into(),
            });
        }
        let prompts: Vec<String> = texts.iter().map(|(p, c)| format!("{p}{c}")).collect();
        let v = self.exchange(
            &url,
            &json!({"model": self.model, "prompt": prompts, "max_tokens": 0, "echo": true, "logprobs": 0}),
        )?;
        let malformed = |detail: &str| LlmError::Malformed {
            url: url.clone(),
            detail: detail.to_owned(),
        };
        let choices = v["choices"]
            .as_array()
            .filter(|c| c.len() == texts.len())
            .ok_or_else(|| malformed("not one choice per prompt"))?;
        let mut sums = Vec::with_capacity(texts.len());
        for (i, (prefix, _)) in texts.iter().enumerate() {
            let choice = choices
                .iter()
                .find(|c| c["index"].as_u64() == Some(i as u64))
                .unwrap_or(&choices[i]);
            let lp = &choice["logprobs"];
            let (Some(offsets), Some(logprobs)) = (
                lp["text_offset"].as_array(),
                lp["token_logprobs"].as_array(),
            ) else {
                return Err(malformed(
                    "a choice has no logprobs.text_offset/token_logprobs",
                ));
            };
            let mut sum = 0.0;
            let mut counted = 0;
            for (at, logprob) in offsets.iter().zip(logprobs) {
                if at.as_u64().is_some_and(|at| at as usize >= prefix.len()) {
                    sum += logprob
                        .as_f64()
                        .ok_or_else(|| malformed("a continuation token has no log probability"))?;
                    counted += 1;
                }
            }
            if counted == 0 {
                return Err(malformed("a continuation has no tokens of its own"));
            }
            sums.push(sum);
        }
        Ok(sums)
    }

    /// One chat exchange.
    pub fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let url = self.url();
        let started = Instant::now();
        let v = self.exchange(&url, &self.body(request))?;
        let malformed = |detail: String| LlmError::Malformed {
            url: url.clone(),
            detail,
        };
        let latency_ms = started.elapsed().as_secs_f64() * 1e3;
        match self.kind {
            ProviderKind::OpenAi => {
                let choice = v["choices"]
                    .get(0)
                    .ok_or_else(|| malformed("no choices".into()))?;
                let message = &choice["message"];
                if !message.is_object() {
                    return Err(malformed("the choice has no message".into()));
                }
                Ok(ChatResponse {
                    model: v["model"].as_str().unwrap_or(&self.model).to_owned(),
                    text: message["content"].as_str().unwrap_or_default().to_owned(),
                    tool_calls: tool_calls(message),
                    reasoning: reasoning(message),
                    usage: v.get("usage").cloned(),
                    truncated: choice["finish_reason"] == "length",
                    latency_ms,
                })
            }
            ProviderKind::Ollama => {
                let message = &v["message"];
                if !message.is_object() {
                    return Err(malformed("no message".into()));
                }
                let usage = match (v.get("prompt_eval_count"), v.get("eval_count")) {
                    (Some(p), Some(c)) => Some(json!({"prompt_tokens": p, "completion_tokens": c})),
                    _ => None,
                };
                Ok(ChatResponse {
                    model: v["model"].as_str().unwrap_or(&self.model).to_owned(),
                    text: message["content"].as_str().unwrap_or_default().to_owned(),
                    tool_calls: tool_calls(message),
                    reasoning: reasoning(message),
                    usage,
                    truncated: v["done_reason"] == "length",
                    latency_ms,
                })
            }
        }
    }
}

/// The tool calls of a message; both wire formats put them under
/// `tool_calls[].function` (only OpenAI's carry an `id`).
fn tool_calls(message: &Value) -> Vec<ModelToolCall> {
    message["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| ModelToolCall {
                    id: c["id"].as_str().map(str::to_owned),
                    name: c["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    arguments: parse_arguments(&c["function"]["arguments"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The reasoning field a message may carry, under the names services use.
fn reasoning(message: &Value) -> Option<String> {
    ["reasoning_content", "reasoning", "thinking"]
        .iter()
        .find_map(|k| message[*k].as_str())
        .filter(|r| !r.trim().is_empty())
        .map(str::to_owned)
}

/// OpenAI sends arguments as a JSON string, Ollama as an object.
fn parse_arguments(raw: &Value) -> Value {
    match raw {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        other => other.clone(),
    }
}

/// A prompt made to fit: its hash (of the whole), and a head and a tail kept
/// for the trace (`llm.request` carries these, never more).
#[derive(Clone, Debug, PartialEq)]
pub struct CappedPrompt {
    pub text: String,
    pub hash: String,
    pub head: String,
    pub tail: String,
    pub truncated: bool,
}

/// Caps `prompt` at about `max_chars`, keeping its head and tail around a
/// marker that names how much was cut and the hash of the whole.
pub fn cap_prompt(prompt: &str, max_chars: usize) -> CappedPrompt {
    let hash = sha256_tagged(prompt.as_bytes());
    let chars: Vec<char> = prompt.chars().collect();
    let edge = |n: usize| -> (String, String) {
        let head: String = chars.iter().take(n).collect();
        let tail: String = chars[chars.len().saturating_sub(n)..].iter().collect();
        (head, tail)
    };
    let (head, tail) = edge(200);
    if chars.len() <= max_chars {
        return CappedPrompt {
            text: prompt.to_owned(),
            hash,
            head,
            tail,
            truncated: false,
        };
    }
    let keep = max_chars.saturating_sub(120) / 2;
    let (front, back) = edge(keep);
    let marker = format!(
        "\n[… {} characters cut; whole prompt {hash} …]\n",
        chars.len() - 2 * keep
    );
    CappedPrompt {
        text: format!("{front}{marker}{back}"),
        hash,
        head,
        tail,
        truncated: true,
    }
}

pub mod choose;
pub mod tiers;
pub mod toolbox;
pub mod validate;

pub use tiers::{Tier, Tiers};

#[cfg(test)]
mod tests;
