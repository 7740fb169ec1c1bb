//! The MCP door: CAAL as a Model Context Protocol server, for agent tools
//! (Claude Desktop, IDEs, any MCP client). `caal mcp` serves it on stdio;
//! `caal serve` serves it at `/mcp` (streamable HTTP, behind the same bearer
//! token as `/api`). Built on `rmcp`, the protocol's official Rust SDK.
//!
//! Tools: `say` (a round in the door's own namespace, `mcp:…`; a level-3/4
//! command asks, and a person confirms it on CAAL's page; an agent's own
//! "yes" confirms it only where `[doors] agents_confirm` allows, and only in
//! the MCP session that asked), `trace_search`,
//! `trace_verify`, `round_show`, `bucket_search`, `remember`. Resources: each
//! conversation (`caal://conversations/{id}`, its rounds) and each round
//! (`caal://rounds/{round_id}`, its events). Arguments that do not fit a
//! tool's schema get MCP's own error (invalid params, -32602), logged
//! scrubbed; a round or conversation that does not exist is a tool error
//! naming it.

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, tool::ToolCallContext, wrapper::Parameters},
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
        ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
        ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig,
    },
    schemars,
    service::RequestContext,
    tool, tool_handler, tool_router,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{
    auth::Door,
    ids::{BucketId, ConversationId},
    round::{Channel, Engine, OperatorWrite},
};

/// The conversation `say` uses when none is named (in the `mcp:` namespace).
pub const DEFAULT_CONVERSATION: &str = "default";

/// CAAL's MCP server: the engine, the tools it offers, and the session's
/// name as the door's client (`stdio`, or `session-…` over HTTP).
#[derive(Clone)]
pub struct CaalMcp {
    engine: Engine,
    tool_router: ToolRouter<Self>,
    client: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Say {
    /// What to say, as a person would ("turn on the kitchen lights", "yes").
    pub text: String,
    /// The conversation (default "default"; kept as "mcp:default", in the
    /// MCP door's own namespace); a confirmation is answered in it.
    pub conversation_id: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceSearch {
    /// Words that must all appear in what was said, answered or decided.
    pub query: String,
    /// Only this conversation's rounds.
    pub conversation_id: Option<String>,
    /// At most this many hits (default 20, at most 200).
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceVerify {
    /// Only this conversation's chain (default: every conversation).
    pub conversation_id: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoundShow {
    /// The round's id (a UUID, as `say` and `trace_search` return it).
    pub round_id: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BucketSearch {
    /// Words to look for in remembered items.
    pub query: String,
    /// Only this bucket (e.g. "bucket:default").
    pub bucket_id: Option<String>,
    /// Items holding any of the words, not all of them.
    pub any: Option<bool>,
    /// At most this many (default 10, at most 100).
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Remember {
    /// What to remember ("the spare key is under the blue pot").
    pub text: String,
    /// The bucket (default "bucket:default").
    pub bucket_id: Option<String>,
    /// Keep it in every context, whatever its score.
    pub pin: Option<bool>,
}

/// What a tool answers: the JSON, its text for the model, and whether it failed.
fn answered(value: Value, text: String) -> CallToolResult {
    let mut result = CallToolResult::structured(value);
    result.content = vec![ContentBlock::text(text)];
    result
}

/// A tool error the caller can act on (no such round, a bad id).
fn refused(message: String) -> CallToolResult {
    CallToolResult::structured_error(json!({"error": message}))
}

fn scrubbed(text: &str) -> String {
    crate::safety::global().scrub(text).into_owned()
}

/// Runs engine work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, ErrorData> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(ErrorData::internal_error(scrubbed(&e), None)),
        Err(e) => Err(ErrorData::internal_error(e.to_string(), None)),
    }
}

/// A conversation named by the agent, as it is (to read the trace); the
/// refusal names it scrubbed.
fn conversation(id: &str) -> Result<ConversationId, String> {
    id.parse()
        .map_err(|e: crate::ids::InvalidId| format!("conversation_id: {e}"))
}

/// The conversation `say` talks in: the one named (or the default) in the
/// door's own namespace, `mcp:…`.
fn own_conversation(id: Option<&str>) -> Result<ConversationId, String> {
    let id = id.unwrap_or(DEFAULT_CONVERSATION);
    let namespace = Door::Mcp.namespace().unwrap_or_default();
    if id.starts_with(namespace) {
        conversation(id)
    } else {
        conversation(&format!("{namespace}{id}"))
    }
}

/// An optional `conversation_id` argument: none means every conversation.
fn only_conversation(id: Option<&str>) -> Result<Option<ConversationId>, String> {
    id.map(conversation).transpose()
}

#[tool_router]
impl CaalMcp {
    /// The door's client behind a call: its MCP session over HTTP (named
    /// by a digest of the session id, which the trace does not keep), else
    /// the transport's (`token`, `stdio`).
    fn client_of(&self, context: &RequestContext<RoleServer>) -> String {
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(|session| {
                let digest = crate::crypto::sha256_tagged(session.as_bytes());
                format!("session-{}", &digest.trim_start_matches("sha256:")[..12])
            })
            .unwrap_or_else(|| self.client.clone())
    }

    /// The server; `client` names its transport in the trace.
    pub fn new(engine: Engine, client: impl Into<String>) -> Self {
        Self {
            engine,
            tool_router: Self::tool_router(),
            client: client.into(),
        }
    }

    #[tool(
        description = "Say something to CAAL, as a person would: one round, understood, gated by its authority level, run and recorded. A level-3 or 4 command asks for confirmation, which a person gives on CAAL's page (an agent's own \"yes\" counts only where the owner allows it); \"no\" in the same conversation cancels. Returns the reply, the round id and what was decided."
    )]
    async fn say(
        &self,
        Parameters(a): Parameters<Say>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let id = match own_conversation(a.conversation_id.as_deref()) {
            Ok(c) => c,
            Err(e) => return Ok(refused(e)),
        };
        let origin = self.engine.origin(Door::Mcp, self.client_of(&context));
        let engine = self.engine.clone();
        let round = blocking(move || {
            engine
                .round_from(&origin, &id, &a.text, Channel::Api)
                .map_err(|e| e.to_string())
        })
        .await?;
        let value = json!({
            "reply": round.reply,
            "conversation_id": round.conversation_id,
            "round_id": round.round_id,
            "route_code": round.route_code,
            "command_id": round.command_id,
            "auth_level": round.auth_level,
            "status": round.status,
            "pending_confirmation": round.pending_confirmation,
        });
        Ok(answered(value, round.reply))
    }

    #[tool(
        description = "Search the trace: inputs, replies and decisions that hold every word of the query, newest first."
    )]
    async fn trace_search(
        &self,
        Parameters(a): Parameters<TraceSearch>,
    ) -> Result<CallToolResult, ErrorData> {
        let only = match only_conversation(a.conversation_id.as_deref()) {
            Ok(only) => only,
            Err(e) => return Ok(refused(e)),
        };
        let limit = a.limit.unwrap_or(20).clamp(1, 200) as usize;
        let engine = self.engine.clone();
        let hits = blocking(move || {
            engine
                .store()
                .reader()
                .search(
                    &a.query,
                    &crate::trace::SearchFilter {
                        conversation: only.as_ref(),
                        limit,
                        ..Default::default()
                    },
                )
                .map_err(|e| e.to_string())
        })
        .await?;
        let text = if hits.is_empty() {
            "Nothing in the trace holds those words.".to_owned()
        } else {
            hits.iter()
                .map(|h| {
                    format!(
                        "{} #{} {}: {}",
                        h.conversation_id, h.round_seq, h.event_type, h.text
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        Ok(answered(json!({"hits": hits}), text))
    }

    #[tool(
        description = "Verify the trace's hash chains (every conversation, or one): whether every event is intact and in order."
    )]
    async fn trace_verify(
        &self,
        Parameters(a): Parameters<TraceVerify>,
    ) -> Result<CallToolResult, ErrorData> {
        let only = match only_conversation(a.conversation_id.as_deref()) {
            Ok(only) => only,
            Err(e) => return Ok(refused(e)),
        };
        let engine = self.engine.clone();
        let report = blocking(move || {
            engine
                .store()
                .reader()
                .verify(only.as_ref())
                .map_err(|e| e.to_string())
        })
        .await?;
        let value = json!(report);
        let text = if report.ok {
            format!(
                "The chain holds: {} conversation(s), {} round(s), {} event(s).",
                value["conversations"], value["rounds"], value["events"]
            )
        } else {
            format!("The chain is broken: {value}")
        };
        Ok(answered(value, text))
    }

    #[tool(
        description = "One round with its events in order (what was said, decided, run, answered)."
    )]
    async fn round_show(
        &self,
        Parameters(a): Parameters<RoundShow>,
    ) -> Result<CallToolResult, ErrorData> {
        let engine = self.engine.clone();
        let id = a.round_id.clone();
        let found = blocking(move || round_json(&engine, &id)).await?;
        Ok(match found {
            Some(value) => {
                let text = value.to_string();
                answered(value, text)
            }
            None => refused(format!("there is no round {:?}", scrubbed(&a.round_id))),
        })
    }

    #[tool(description = "Search what CAAL remembers (memory items), best matches first.")]
    async fn bucket_search(
        &self,
        Parameters(a): Parameters<BucketSearch>,
    ) -> Result<CallToolResult, ErrorData> {
        let bucket = match a.bucket_id.as_deref().map(str::parse::<BucketId>) {
            Some(Err(e)) => return Ok(refused(format!("bucket_id: {e}"))),
            Some(Ok(b)) => Some(b),
            None => None,
        };
        let how = if a.any.unwrap_or(false) {
            crate::memory::Match::Any
        } else {
            crate::memory::Match::All
        };
        let limit = a.limit.unwrap_or(10).clamp(1, 100) as usize;
        let engine = self.engine.clone();
        let hits = blocking(move || {
            let now = engine.now_ms();
            engine
                .memory()
                .search(&a.query, bucket.as_ref(), how, limit, now)
                .map_err(|e| e.to_string())
        })
        .await;
        let hits = match hits {
            Ok(h) => h,
            // An empty query and the like: the caller's to fix.
            Err(e) => return Ok(refused(e.message.to_string())),
        };
        let value = json!({"hits": hits});
        let text = value["hits"]
            .as_array()
            .map(|h| {
                h.iter()
                    .filter_map(|i| i["content"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "Nothing remembered matches.".into());
        Ok(answered(value, text))
    }

    #[tool(
        description = "Remember something in a memory bucket (recorded as an operator round, secrets replaced before storing)."
    )]
    async fn remember(
        &self,
        Parameters(a): Parameters<Remember>,
    ) -> Result<CallToolResult, ErrorData> {
        let bucket: BucketId = match a.bucket_id.as_deref().unwrap_or("bucket:default").parse() {
            Ok(b) => b,
            Err(e) => return Ok(refused(format!("bucket_id: {e}"))),
        };
        let engine = self.engine.clone();
        let write = OperatorWrite::Add {
            content: a.text,
            refs: Vec::new(),
            pin: a.pin.unwrap_or(false),
        };
        let done = blocking(move || {
            engine
                .operator_memory(&bucket, write, Channel::Api)
                .map_err(|e| e.to_string())
        })
        .await;
        Ok(match done {
            Ok(outcome) => {
                let text = format!("Remembered ({} {}).", outcome.op, outcome.item_id);
                answered(json!(outcome), text)
            }
            Err(e) => refused(e.message.to_string()),
        })
    }
}

/// A round and its events, as `GET /api/rounds/{id}` gives them.
fn round_json(engine: &Engine, round_id: &str) -> Result<Option<Value>, String> {
    crate::server::round_json(engine, round_id).map_err(|e| e.to_string())
}

const CONVERSATIONS: &str = "caal://conversations/";
const ROUNDS: &str = "caal://rounds/";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CaalMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("caal", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "CAAL is a home voice assistant's router. `say` talks to it as a person would; \
             governed commands ask for a confirmation, answered by saying \"yes\" in the same \
             conversation. The trace (every round, hash-chained) can be searched, shown and \
             verified; memory can be searched and added to.",
        )
    }

    /// Logs what it refuses (scrubbed), then answers as the router does.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let called = self
            .tool_router
            .call(ToolCallContext::new(self, request, context))
            .await;
        match &called {
            Err(e) => {
                tracing::warn!(tool = %scrubbed(&name), code = e.code.0, error = %scrubbed(&e.message),
                               "mcp call refused");
            }
            // Arguments that do not fit the tool's schema come back as a
            // tool error (the protocol's way since 2025-11-25, so a model can
            // correct itself), as do CAAL's own refusals.
            Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => {
                let said: String = r
                    .content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                    .collect::<Vec<_>>()
                    .join(" ");
                tracing::warn!(tool = %scrubbed(&name), error = %scrubbed(&said), "mcp call refused");
            }
            Ok(_) => {}
        }
        called
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let engine = self.engine.clone();
        let list = blocking(move || {
            engine
                .store()
                .reader()
                .conversations()
                .map_err(|e| e.to_string())
        })
        .await?;
        let resources = list
            .into_iter()
            .map(|c| {
                Resource::new(
                    format!("{CONVERSATIONS}{}", c.conversation_id),
                    c.conversation_id.clone(),
                )
                .with_description(format!(
                    "{} round(s), the last at {}",
                    c.rounds, c.last_round_at
                ))
                .with_mime_type("application/json")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(
                format!("{CONVERSATIONS}{{conversation_id}}"),
                "conversation",
            )
            .with_description("A conversation's rounds, newest last")
            .with_mime_type("application/json"),
            ResourceTemplate::new(format!("{ROUNDS}{{round_id}}"), "round")
                .with_description("A round with its events in order")
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.clone();
        let engine = self.engine.clone();
        let found: Option<Value> = if let Some(id) = uri.strip_prefix(CONVERSATIONS) {
            let conversation =
                conversation(id).map_err(|e| ErrorData::invalid_params(scrubbed(&e), None))?;
            blocking(move || {
                let rounds = engine
                    .store()
                    .reader()
                    .rounds(Some(&conversation), 200)
                    .map_err(|e| e.to_string())?;
                Ok((!rounds.is_empty())
                    .then(|| json!({"conversation_id": conversation.as_str(), "rounds": rounds})))
            })
            .await?
        } else if let Some(id) = uri.strip_prefix(ROUNDS) {
            let id = id.to_owned();
            blocking(move || round_json(&engine, &id)).await?
        } else {
            return Err(ErrorData::resource_not_found(
                format!(
                    "{} is not a CAAL resource; they are {CONVERSATIONS}{{id}} and {ROUNDS}{{round_id}}",
                    scrubbed(&uri)
                ),
                None,
            ));
        };
        let Some(value) = found else {
            return Err(ErrorData::resource_not_found(
                format!("nothing at {}", scrubbed(&uri)),
                None,
            ));
        };
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(value.to_string(), uri).with_mime_type("application/json"),
        ])
        .into())
    }
}

/// The streamable HTTP service for `/mcp` (sessions kept in memory; the
/// bearer token in front of it is `caal serve`'s).
pub fn http_service(
    engine: Engine,
) -> rmcp::transport::StreamableHttpService<
    CaalMcp,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    let config = rmcp::transport::StreamableHttpServerConfig::default()
        // The bearer token guards /mcp, which a DNS-rebinding page cannot
        // send; so any Host is accepted, as for the rest of the API.
        .disable_allowed_hosts();
    rmcp::transport::StreamableHttpService::new(
        // Each session its own client (`client_of`): a confirmation it
        // asked for is answered in it or on the page, never in another.
        move || Ok(CaalMcp::new(engine.clone(), "token")),
        Arc::new(Default::default()),
        config,
    )
}

/// Serves MCP on stdin/stdout until the client closes it.
pub async fn serve_stdio(engine: Engine) -> Result<(), String> {
    use rmcp::ServiceExt;
    let running = CaalMcp::new(engine, "stdio")
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| e.to_string())?;
    running.waiting().await.map_err(|e| e.to_string())?;
    Ok(())
}
