//! ONNX Runtime, loaded once per process from the shared library the setup
//! installs (the PyPI `onnxruntime` wheel's `libonnxruntime.so`, checked by
//! hash), through the `ort` crate with `load-dynamic`: nothing is
//! downloaded or linked at build time. The Piper voice (`piper`), Silero
//! VAD (`silero`) and the wake word (`wake`) run on it, each a `Model`.

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, OnceLock},
};

use ort::{environment::Environment, session::Session};

/// Why ONNX Runtime is not at hand.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OnnxError {
    #[error(
        "ONNX Runtime is not installed at {path}; `bash .ci/setup` installs it (the PyPI onnxruntime wheel's library), or set voice.onnxruntime"
    )]
    Missing { path: String },
    #[error("ONNX Runtime at {path} could not be loaded: {problem}")]
    Load { path: String, problem: String },
    #[error("{what}: {problem}")]
    Model { what: String, problem: String },
}

static ENVIRONMENT: OnceLock<Result<(PathBuf, Environment), OnnxError>> = OnceLock::new();

/// The process's ONNX Runtime, loaded from `library` the first time (one
/// runtime a process: a later call naming another library gets the first).
pub fn environment(library: &Path) -> Result<&'static Environment, OnnxError> {
    let loaded = ENVIRONMENT.get_or_init(|| {
        let path = library.display().to_string();
        if !library.is_file() {
            return Err(OnnxError::Missing { path });
        }
        // `init_from` reports a library that will not load as an error
        // (ort panics when it finds none on its own).
        let built = ort::init_from(library)
            .map_err(|e| e.to_string())
            .and_then(|b| b.with_name("caal").build().map_err(|e| e.to_string()));
        built
            .map(|env| (library.to_owned(), env))
            .map_err(|problem| OnnxError::Load { path, problem })
    });
    match loaded {
        Ok((_, env)) => Ok(env),
        Err(e) => Err(e.clone()),
    }
}

/// A session of the model at `path` on `threads` threads.
pub fn session(
    env: &Environment,
    path: &Path,
    threads: usize,
) -> Result<ort::session::Session, OnnxError> {
    let what = path.display().to_string();
    let problem = |e: ort::Error| OnnxError::Model {
        what: what.clone(),
        problem: e.to_string(),
    };
    ort::session::Session::builder(env)
        .map_err(problem)?
        .with_intra_threads(threads.max(1))
        .map_err(|e| problem(e.into()))?
        .commit_from_file(path)
        .map_err(problem)
}

/// A model loaded on the process's ONNX Runtime: one run at a time (a
/// session runs on the threads it was given, and every stream shares it).
pub struct Model {
    session: Mutex<Session>,
    /// What it is, for errors: "Silero VAD", "the wake word's embedding".
    what: String,
}

impl Model {
    /// The model at `path` on ONNX Runtime from `library`, `threads` threads.
    pub fn load(
        path: &Path,
        library: &Path,
        threads: usize,
        what: &str,
    ) -> Result<Self, OnnxError> {
        if !path.is_file() {
            return Err(OnnxError::Missing {
                path: path.display().to_string(),
            });
        }
        let env = environment(library)?;
        Ok(Self {
            session: Mutex::new(session(env, path, threads)?),
            what: what.to_owned(),
        })
    }

    /// `run` given the session (and this model's way of naming an ONNX
    /// Runtime error), the only one running on it meanwhile.
    pub fn run<T>(
        &self,
        run: impl FnOnce(&mut Session, &dyn Fn(ort::Error) -> OnnxError) -> Result<T, OnnxError>,
    ) -> Result<T, OnnxError> {
        let failed = |e: ort::Error| OnnxError::Model {
            what: self.what.clone(),
            problem: e.to_string(),
        };
        let mut session = self
            .session
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        run(&mut session, &failed)
    }
}
