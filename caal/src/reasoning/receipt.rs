//! Signed receipts for governed actions. A receipt binds what was decided
//! (`input_hash`), why (`reasoning_hash`) and what was handed to the
//! executor (`action_hash`), with the justification checks, the assurance,
//! the enforcement and configuration, and the confirmation decision, and is
//! signed with Ed25519 over its RFC 8785 canonical form. The data dir keeps
//! the signing key (`receipt_key`, mode 0600), generated on first use.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::Serialize;
use serde_json::{Value, json};

use super::justify::Evaluation;
pub use crate::crypto::{
    KEY_FILE, existing_public_key, hash_of, hex, parse_public_key, public_key_hex, sign_value,
    signature_holds,
};
use crate::crypto::{canonical_json, hex_decode};

pub const RECEIPT_VERSION: &str = "1";

/// What the receipt triad can and cannot see.
pub const CONTEXT_LIMITATION: &str = "router_boundary: input is the command and arguments as the rule or model decided them; action is the command and typed parameters handed to the executor; what the executor did inside is not observed";

#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error("cannot read or create the receipt key {}: {source}; check the data dir's permissions", path.display())]
    Key {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the receipt key {} is damaged (expected 64 hex digits); move it away and a new key is made, but receipts signed with the old one will no longer verify against it", path.display())]
    BadKey { path: PathBuf },
    #[error("not a receipt: {0}")]
    NotAReceipt(String),
    #[error(
        "the signature does not verify: the receipt was changed after signing, or signed by another key"
    )]
    BadSignature,
    #[error("signed by key {found}, not by this data dir's key {expected}")]
    WrongKey { found: String, expected: String },
    #[error(
        "{which} does not match the receipt's content: recorded {recorded}, recomputed {recomputed}"
    )]
    HashMismatch {
        which: &'static str,
        recorded: String,
        recomputed: String,
    },
}

/// This data dir's signing key, created on first use.
pub fn load_or_create_key(data_dir: &Path) -> Result<SigningKey, ReceiptError> {
    let path = data_dir.join(KEY_FILE);
    let key_error = |source| ReceiptError::Key {
        path: path.clone(),
        source,
    };
    match fs::read_to_string(&path) {
        Ok(text) => {
            let bytes = hex_decode(text.trim())
                .ok_or_else(|| ReceiptError::BadKey { path: path.clone() })?;
            let seed: [u8; 32] = bytes
                .try_into()
                .map_err(|_| ReceiptError::BadKey { path: path.clone() })?;
            Ok(SigningKey::from_bytes(&seed))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut seed = [0u8; 32];
            getrandom::fill(&mut seed)
                .map_err(|e| key_error(std::io::Error::other(e.to_string())))?;
            let mut options = fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            match options.open(&path) {
                Ok(mut file) => {
                    file.write_all(hex(&seed).as_bytes()).map_err(key_error)?;
                    file.sync_all().map_err(key_error)?;
                    Ok(SigningKey::from_bytes(&seed))
                }
                // Another process made it first: use theirs.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    load_or_create_key(data_dir)
                }
                Err(e) => Err(key_error(e)),
            }
        }
        Err(e) => Err(key_error(e)),
    }
}

/// What a receipt is about, before it is signed.
#[derive(Clone, Debug)]
pub struct ReceiptDraft {
    pub library_id: String,
    pub conversation_id: String,
    pub round_id: String,
    pub round_seq: i64,
    pub decided_in_round: Option<String>,
    pub decided_by: String,
    /// The command and arguments as decided (without the justification).
    pub input: Value,
    /// The justification (scrubbed), or a rule's reason.
    pub reasoning: String,
    pub justification_stripped: bool,
    /// The command and typed parameters handed to the executor.
    pub action: Value,
    pub call_id: Option<String>,
    /// `ok`, `failed`, `not_run`.
    pub outcome: String,
    pub evaluation: Option<Evaluation>,
    pub enforcement: Value,
    /// `confirmed`, `not_required`, `denied`, `expired`, `superseded`, `blocked`.
    pub decision: String,
    pub confirmations: u8,
    pub override_reason: Option<String>,
    pub audio_sha256: Option<String>,
    pub issued_at: String,
}

/// The receipt as signed: every field but `signature.signature` is covered.
pub fn sign(draft: &ReceiptDraft, key: &SigningKey) -> Value {
    let evaluation = match &draft.evaluation {
        Some(e) => json!(e),
        None => json!({"assurance": "none", "overall_score": 0.0, "passed": false, "checks": [],
                       "applied": "none", "reason": format!("decided by {}; there was no model reasoning to evaluate", draft.decided_by)}),
    };
    let mut receipt = json!({
        "receipt_version": RECEIPT_VERSION,
        "receipt_id": uuid::Uuid::now_v7().hyphenated().to_string(),
        "issued_at": draft.issued_at,
        "library_id": draft.library_id,
        "conversation_id": draft.conversation_id,
        "round_id": draft.round_id,
        "round_seq": draft.round_seq,
        "decided_in_round": draft.decided_in_round,
        "decided_by": draft.decided_by,
        "receipt_triad": {
            "input_hash": hash_of(&draft.input),
            "reasoning_hash": hash_of(&Value::String(draft.reasoning.clone())),
            "action_hash": hash_of(&draft.action),
            "context_limitation": CONTEXT_LIMITATION,
        },
        "input": draft.input,
        "reasoning": {"text": draft.reasoning, "justification_stripped": draft.justification_stripped},
        "action": {"command": draft.action, "call_id": draft.call_id, "outcome": draft.outcome},
        "reasoning_evaluation": evaluation,
        "enforcement": draft.enforcement,
        "confirmation": {"decision": draft.decision, "confirmations": draft.confirmations,
                          "override_reason": draft.override_reason},
        "audio_sha256": draft.audio_sha256,
        "signature": {"algorithm": "ed25519", "canonical_form": "rfc8785",
                       "public_key": public_key_hex(&key.verifying_key())},
    });
    let signature = key.sign(&signing_bytes(&receipt));
    receipt["signature"]["signature"] = json!(hex(&signature.to_bytes()));
    receipt
}

/// The canonical bytes a signature covers: the receipt without `signature.signature`.
fn signing_bytes(receipt: &Value) -> Vec<u8> {
    let mut unsigned = receipt.clone();
    if let Some(sig) = unsigned.get_mut("signature").and_then(Value::as_object_mut) {
        sig.remove("signature");
    }
    canonical_json(&unsigned).into_bytes()
}

/// What a verified receipt says.
#[derive(Clone, Debug, Serialize)]
pub struct Verified {
    pub receipt_id: String,
    pub round_id: String,
    pub command: Value,
    pub decision: String,
    pub assurance: String,
    pub public_key: String,
}

/// Checks the three hashes against the receipt's content and the signature
/// against `expected` (this data dir's key), or the key the receipt names.
pub fn verify(receipt: &Value, expected: Option<&VerifyingKey>) -> Result<Verified, ReceiptError> {
    let field = |path: &str| -> Result<&Value, ReceiptError> {
        receipt
            .pointer(path)
            .ok_or_else(|| ReceiptError::NotAReceipt(format!("it has no {path}")))
    };
    let text = |path: &str| -> Result<String, ReceiptError> {
        field(path)?
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| ReceiptError::NotAReceipt(format!("{path} is not text")))
    };
    for (which, pointer, preimage) in [
        (
            "input_hash",
            "/receipt_triad/input_hash",
            field("/input")?.clone(),
        ),
        (
            "reasoning_hash",
            "/receipt_triad/reasoning_hash",
            field("/reasoning/text")?.clone(),
        ),
        (
            "action_hash",
            "/receipt_triad/action_hash",
            field("/action/command")?.clone(),
        ),
    ] {
        let recorded = text(pointer)?;
        let recomputed = hash_of(&preimage);
        if recorded != recomputed {
            return Err(ReceiptError::HashMismatch {
                which,
                recorded,
                recomputed,
            });
        }
    }
    let named = text("/signature/public_key")?;
    let key = match expected {
        Some(k) => {
            if public_key_hex(k) != named {
                return Err(ReceiptError::WrongKey {
                    found: named,
                    expected: public_key_hex(k),
                });
            }
            *k
        }
        None => {
            let bytes: [u8; 32] = hex_decode(&named)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| {
                    ReceiptError::NotAReceipt("signature.public_key is not a key".into())
                })?;
            VerifyingKey::from_bytes(&bytes).map_err(|_| ReceiptError::BadSignature)?
        }
    };
    let signature: [u8; 64] = hex_decode(&text("/signature/signature")?)
        .and_then(|b| b.try_into().ok())
        .ok_or(ReceiptError::BadSignature)?;
    key.verify(&signing_bytes(receipt), &Signature::from_bytes(&signature))
        .map_err(|_| ReceiptError::BadSignature)?;
    Ok(Verified {
        receipt_id: text("/receipt_id")?,
        round_id: text("/round_id")?,
        command: field("/action/command")?.clone(),
        decision: text("/confirmation/decision")?,
        assurance: text("/reasoning_evaluation/assurance")?,
        public_key: named,
    })
}
