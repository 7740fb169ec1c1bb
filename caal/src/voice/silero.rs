//! Silero VAD v6 (MIT, an ONNX model of 2.3 MB, from the PyPI package
//! `silero-vad`): the probability that a 32 ms chunk of 16 kHz audio is
//! speech, from a small recurrent network that has heard speech in noise.
//! One model serves every stream; each stream keeps its own recurrent state
//! and the last 64 samples it was given (the model reads them before the
//! chunk), as Silero's own wrapper does.

use std::path::Path;

use ort::value::Tensor;

use super::onnx::{Model, OnnxError};

/// Samples of 16 kHz audio per chunk the model reads.
pub const CHUNK: usize = 512;
/// Samples of the chunk before that it reads too.
const CONTEXT: usize = 64;
/// The recurrent state: 2 × 1 × 128.
const STATE: usize = 2 * 128;

/// The loaded model.
pub struct Silero {
    model: Model,
}

/// One stream's place in the model: its state and the samples before.
#[derive(Clone)]
pub struct Stream {
    state: Vec<f32>,
    context: Vec<f32>,
}

impl Default for Stream {
    fn default() -> Self {
        Self {
            state: vec![0.0; STATE],
            context: vec![0.0; CONTEXT],
        }
    }
}

impl Silero {
    /// The model at `model` on ONNX Runtime from `library` (one thread: a
    /// chunk takes well under a millisecond).
    pub fn load(model: &Path, library: &Path) -> Result<Self, OnnxError> {
        Ok(Self {
            model: Model::load(model, library, 1, "Silero VAD")?,
        })
    }

    /// How likely `chunk` (`CHUNK` samples of 16 kHz audio, the next of
    /// `stream`) is speech, 0–1.
    pub fn probability(&self, stream: &mut Stream, chunk: &[f32]) -> Result<f32, OnnxError> {
        let mut input = Vec::with_capacity(CONTEXT + CHUNK);
        input.extend_from_slice(&stream.context);
        input.extend_from_slice(chunk);
        input.resize(CONTEXT + CHUNK, 0.0);
        stream
            .context
            .copy_from_slice(&input[input.len() - CONTEXT..]);
        self.model.run(|session, failed| {
            let out = session
                .run(ort::inputs![
                    "input" => Tensor::from_array(([1usize, CONTEXT + CHUNK], input)).map_err(failed)?,
                    "state" => Tensor::from_array(([2usize, 1, 128], stream.state.clone())).map_err(failed)?,
                    "sr" => Tensor::from_array(((), vec![i64::from(super::audio::RATE)])).map_err(failed)?,
                ])
                .map_err(failed)?;
            let (_, p) = out["output"].try_extract_tensor::<f32>().map_err(failed)?;
            let (_, next) = out["stateN"].try_extract_tensor::<f32>().map_err(failed)?;
            stream.state.copy_from_slice(next);
            Ok(p.first().copied().unwrap_or(0.0))
        })
    }
}
