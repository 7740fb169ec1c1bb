//! The model itself, through llama.cpp: one context, reused (its KV cache is
//! cleared per request), greedy or temperature sampling, and a grammar
//! sampler from `json_schema_to_grammar` when the reply must be JSON.

use std::{
    num::NonZeroU32,
    path::{Path, PathBuf},
    sync::OnceLock,
    time::Instant,
};

use anyhow::Context as _;
use llama_cpp_2::{
    context::{LlamaContext, params::LlamaContextParams},
    llama_backend::LlamaBackend,
    llama_batch::LlamaBatch,
    model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel, params::LlamaModelParams},
    sampling::LlamaSampler,
    token::LlamaToken,
};

use crate::{
    Args,
    api::{Generation, Model, Prompt, Scored},
};

pub struct Engine {
    name: String,
    template: LlamaChatTemplate,
    n_ctx: usize,
    n_batch: usize,
    /// The tokens whose keys and values the context holds: a new prompt that
    /// starts the same way (the system prompt and tools always do) only
    /// decodes what differs.
    cached: Vec<LlamaToken>,
    /// The log probability of each cached token, where it was computed
    /// (scoring keeps every position's logits; generation only the last).
    cached_logprobs: Vec<Option<f32>>,
    // Declared before the model it borrows, so dropped first.
    context: LlamaContext<'static>,
    model: &'static LlamaModel,
}

// The context is only ever used from the one thread that owns the engine.
unsafe impl Send for Engine {}

impl Engine {
    /// Loads `weights` (the model file, or its requantized copy); the
    /// model is named after `args.model`.
    pub fn load(args: &Args, weights: &Path) -> anyhow::Result<Self> {
        if !weights.is_file() {
            anyhow::bail!(
                "the model file {} does not exist; `bash .ci/setup` installs the default one",
                weights.display()
            );
        }
        let backend = backend()?;
        let model = LlamaModel::load_from_file(backend, weights, &LlamaModelParams::default())
            .with_context(|| format!("loading {}", weights.display()))?;
        let model: &'static LlamaModel = Box::leak(Box::new(model));
        let template = if args.chat_template.is_empty() {
            model.chat_template(None).context(
                "the model file carries no chat template (a base model?); name one llama.cpp knows with --chat-template, e.g. gemma or chatml",
            )?
        } else {
            LlamaChatTemplate::new(&args.chat_template)
                .context("the --chat-template name has a NUL byte")?
        };
        let threads = if args.threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            args.threads
        };
        let threads = i32::try_from(threads).unwrap_or(2);
        let n_batch = 512u32;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(args.ctx))
            .with_n_batch(n_batch)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let context = model
            .new_context(backend, params)
            .context("creating the model's context")?;
        let name = args
            .model
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".into());
        Ok(Self {
            name,
            template,
            n_ctx: args.ctx as usize,
            n_batch: n_batch as usize,
            cached: Vec::new(),
            cached_logprobs: Vec::new(),
            context,
            model,
        })
    }
}

impl Model for Engine {
    fn name(&self) -> &str {
        &self.name
    }

    fn score(&mut self, text: &str) -> Result<Scored, String> {
        self.score_text(text)
    }

    fn render(&self, messages: &[(String, String)]) -> Result<String, String> {
        let chat = messages
            .iter()
            .map(|(role, content)| LlamaChatMessage::new(role.clone(), content.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("a message cannot be passed to the model: {e}"))?;
        self.model
            .apply_chat_template(&self.template, &chat, true)
            .map_err(|e| format!("the chat template failed: {e}"))
    }

    fn generate(
        &mut self,
        prompt: &Prompt,
        on_piece: &mut dyn FnMut(&str),
    ) -> Result<Generation, String> {
        let started = Instant::now();
        let tokens = self
            .model
            .vocab()
            .tokenize(prompt.text.as_bytes(), false, true);
        let max_tokens = prompt.max_tokens as usize;
        if tokens.len() + max_tokens > self.n_ctx {
            return Err(format!(
                "the prompt is {} tokens and the answer may take {max_tokens}; together more than the context of {} (start caal-llm with a larger --ctx, or send a shorter prompt)",
                tokens.len(),
                self.n_ctx
            ));
        }
        let mut sampler = sampler(self.model, prompt)?;
        // Keep the longest shared prefix (at least the last token is decoded
        // again, for its logits); drop the rest of the cache.
        let mut reuse = self
            .cached
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count()
            .min(tokens.len().saturating_sub(1));
        let trimmed = u32::try_from(reuse)
            .ok()
            .and_then(|p0| {
                self.context
                    .clear_kv_cache_seq(Some(0), Some(p0), None)
                    .ok()
            })
            .unwrap_or(false);
        if !trimmed {
            self.context.clear_kv_cache();
            reuse = 0;
        }
        self.cached.clear();
        self.cached_logprobs.clear();
        let mut batch = LlamaBatch::new(self.n_batch, 1);
        let last = tokens.len() - 1;
        for (start, part) in tokens[reuse..].chunks(self.n_batch).enumerate() {
            batch.clear();
            for (i, token) in part.iter().enumerate() {
                let pos = reuse + start * self.n_batch + i;
                batch
                    .add(*token, pos as i32, &[0], pos == last)
                    .map_err(|e| e.to_string())?;
            }
            self.context
                .decode(&mut batch)
                .map_err(|e| format!("decoding the prompt: {e}"))?;
        }
        self.cached.extend_from_slice(&tokens);
        let prompt_ms = started.elapsed().as_secs_f64() * 1e3;
        let generating = Instant::now();
        let vocab = self.model.vocab();
        let mut bytes = Vec::new();
        let mut emitted = 0usize;
        let mut produced = 0usize;
        let mut pos = tokens.len();
        let mut hit_limit = true;
        let mut logits_at = batch.n_tokens() - 1;
        while produced < max_tokens {
            let token = sampler.sample(&self.context, logits_at);
            if vocab.is_eog(token) {
                hit_limit = false;
                break;
            }
            produced += 1;
            bytes.extend(vocab.token_to_piece(token, false, None));
            // Hand on the longest prefix that is whole UTF-8.
            let valid = match std::str::from_utf8(&bytes[emitted..]) {
                Ok(s) => s.len(),
                Err(e) => e.valid_up_to(),
            };
            if valid > 0 {
                on_piece(std::str::from_utf8(&bytes[emitted..emitted + valid]).unwrap_or_default());
                emitted += valid;
            }
            batch.clear();
            batch
                .add(token, pos as i32, &[0], true)
                .map_err(|e| e.to_string())?;
            pos += 1;
            logits_at = 0;
            self.context
                .decode(&mut batch)
                .map_err(|e| format!("decoding: {e}"))?;
            self.cached.push(token);
        }
        Ok(Generation {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            prompt_tokens: tokens.len(),
            completion_tokens: produced,
            hit_limit,
            prompt_ms,
            generation_ms: generating.elapsed().as_secs_f64() * 1e3,
        })
    }
}

impl Engine {
    /// Keeps the KV cache up to `keep` tokens; false if it had to be cleared.
    fn keep_cache(&mut self, keep: usize) -> bool {
        u32::try_from(keep)
            .ok()
            .and_then(|p0| {
                self.context
                    .clear_kv_cache_seq(Some(0), Some(p0), None)
                    .ok()
            })
            .unwrap_or(false)
    }

    pub(crate) fn score_text(&mut self, text: &str) -> Result<Scored, String> {
        let tokens = self.model.vocab().tokenize(text.as_bytes(), true, false);
        if tokens.len() < 2 {
            return Err("the prompt must be at least two tokens long".into());
        }
        if tokens.len() > self.n_ctx {
            return Err(format!(
                "the prompt is {} tokens, more than the context of {} (start caal-llm with a larger --ctx)",
                tokens.len(),
                self.n_ctx
            ));
        }
        // Decode again from the last token shared with the cache, so its
        // logits (the distribution of the first new token) are at hand.
        let common = self
            .cached
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count();
        let mut reuse = common.saturating_sub(1);
        if !self.keep_cache(reuse) {
            self.context.clear_kv_cache();
            reuse = 0;
        }
        let mut logprobs: Vec<Option<f32>> = (0..tokens.len())
            .map(|i| {
                if i <= reuse {
                    self.cached_logprobs.get(i).copied().flatten()
                } else {
                    None
                }
            })
            .collect();
        logprobs[0] = None;
        self.cached.clear();
        self.cached_logprobs.clear();
        let mut batch = LlamaBatch::new(self.n_batch, 1);
        for (start, part) in tokens[reuse..].chunks(self.n_batch).enumerate() {
            batch.clear();
            let first = reuse + start * self.n_batch;
            for (i, token) in part.iter().enumerate() {
                batch
                    .add(*token, (first + i) as i32, &[0], true)
                    .map_err(|e| e.to_string())?;
            }
            self.context
                .decode(&mut batch)
                .map_err(|e| format!("decoding the prompt: {e}"))?;
            for i in 0..part.len() {
                let Some(next) = tokens.get(first + i + 1) else {
                    break;
                };
                let logits = self.context.get_logits_ith(i as i32);
                logprobs[first + i + 1] = log_softmax_at(logits, next.0 as usize);
            }
        }
        self.cached.extend_from_slice(&tokens);
        self.cached_logprobs.clone_from(&logprobs);
        let vocab = self.model.vocab();
        let mut offsets = Vec::with_capacity(tokens.len());
        let mut pieces = Vec::with_capacity(tokens.len());
        let mut at = 0usize;
        for token in &tokens {
            let piece =
                String::from_utf8_lossy(&vocab.token_to_piece(*token, false, None)).into_owned();
            offsets.push(at);
            at += piece.len();
            pieces.push(piece);
        }
        Ok(Scored {
            tokens: pieces,
            offsets,
            logprobs,
        })
    }
}

/// log softmax(logits)[token]; hand-written: a few lines, and llama.cpp's
/// samplers would sort the whole vocabulary to give the same number.
fn log_softmax_at(logits: &[f32], token: usize) -> Option<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    logits.get(token).map(|l| l - max - sum.ln())
}

fn sampler(model: &LlamaModel, prompt: &Prompt) -> Result<LlamaSampler, String> {
    let mut chain = Vec::new();
    if let Some(schema) = &prompt.schema {
        let grammar = llama_cpp_2::json_schema_to_grammar(&schema.to_string())
            .map_err(|e| format!("the tools' JSON Schema cannot become a grammar: {e}"))?;
        chain.push(
            LlamaSampler::grammar(model, &grammar, "root")
                .map_err(|e| format!("the grammar was refused: {e}"))?,
        );
    }
    if prompt.temperature > 0.0 {
        chain.push(LlamaSampler::top_k(40));
        chain.push(LlamaSampler::temp(prompt.temperature));
        chain.push(LlamaSampler::dist(0x5eed));
    } else {
        chain.push(LlamaSampler::greedy());
    }
    Ok(LlamaSampler::chain_simple(chain))
}

/// llama.cpp, initialised once, its log quiet; it lives as long as the process.
fn backend() -> anyhow::Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<&'static LlamaBackend> = OnceLock::new();
    if let Some(b) = BACKEND.get() {
        return Ok(b);
    }
    let mut backend = LlamaBackend::init().context("initialising llama.cpp")?;
    backend.void_logs();
    Ok(BACKEND.get_or_init(|| Box::leak(Box::new(backend))))
}

/// `model`'s weights requantized to `kind` (q8_0 or q4_0) by llama.cpp's own
/// quantizer (what its `llama-quantize` tool runs): written once beside the
/// model as `<name>.<kind>.gguf` (through a `.part` file, so a reader never
/// sees half of one), remade when the model file is newer. Where that file
/// cannot be written, the model as it is, with a warning.
pub fn requantized(model: &Path, kind: &str) -> anyhow::Result<PathBuf> {
    let ftype = match kind {
        "q8_0" => llama_cpp_sys_2::LLAMA_FTYPE_MOSTLY_Q8_0,
        "q4_0" => llama_cpp_sys_2::LLAMA_FTYPE_MOSTLY_Q4_0,
        other => anyhow::bail!(
            "--requantize {other} is not a type this server writes; use q8_0 or q4_0, or leave it empty to load the file as it is"
        ),
    };
    if !model.is_file() {
        anyhow::bail!(
            "the model file {} does not exist; `bash .ci/setup` installs the default one",
            model.display()
        );
    }
    let stem = model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem.to_ascii_lowercase().ends_with(kind) {
        return Ok(model.to_path_buf());
    }
    let out = model.with_file_name(format!("{stem}.{kind}.gguf"));
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(made), Some(source)) = (modified(&out), modified(model))
        && made >= source
    {
        return Ok(out);
    }
    // Its own part file: two servers starting at once each write a whole
    // file, and the rename of either leaves a whole one.
    let part = out.with_extension(format!("gguf.part-{}", std::process::id()));
    let path = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .with_context(|| format!("{} has a NUL byte", p.display()))
    };
    let (input, output) = (path(model)?, path(&part)?);
    backend()?;
    // SAFETY: one C call with llama.cpp's own default parameters (two fields
    // changed) and NUL-terminated paths that outlive it.
    let status = unsafe {
        let mut params = llama_cpp_sys_2::llama_model_quantize_default_params();
        params.ftype = ftype;
        params.allow_requantize = true;
        llama_cpp_sys_2::llama_model_quantize(input.as_ptr(), output.as_ptr(), &params)
    };
    if status != 0 || std::fs::rename(&part, &out).is_err() {
        let _ = std::fs::remove_file(&part);
        eprintln!(
            "caal-llm: warning: could not write {} (llama.cpp status {status}); loading {} as it is",
            out.display(),
            model.display()
        );
        return Ok(model.to_path_buf());
    }
    Ok(out)
}
