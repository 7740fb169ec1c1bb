//! The primitives evidence is sealed with: RFC 8785 canonical JSON,
//! `sha256:` tags, and the Ed25519 receipt key's public half and signatures.
//! The bottom layer beside `ids` and `config`: the trace chains with these,
//! receipts sign with them, configurations are hashed with them.

use std::{fs, path::Path};

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The signing key's file in a data dir.
pub const KEY_FILE: &str = "receipt_key";

/// RFC 8785 canonical form of any JSON value (the one canonicalizer used for
/// payloads everywhere).
pub fn canonical_json(value: &Value) -> String {
    // Serialising a `Value` cannot fail: its keys are strings and it has no
    // non-finite numbers.
    serde_json_canonicalizer::to_string(value)
        .unwrap_or_else(|e| unreachable!("canonical JSON of a Value: {e}"))
}

/// `"sha256:" + hex(SHA-256(bytes))`.
pub fn sha256_tagged(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

/// HMAC-SHA-256 of `bytes` under this data dir's receipt key, for `purpose`
/// (hex): a name derived from what a client said that nobody without the
/// key can work out (the OpenAI door's thread conversations).
pub fn private_digest(key: &SigningKey, purpose: &str, bytes: &[u8]) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&key.to_bytes())
        .unwrap_or_else(|e| unreachable!("HMAC takes a key of any length: {e}"));
    mac.update(purpose.as_bytes());
    mac.update(&[0]);
    mac.update(bytes);
    hex(&mac.finalize().into_bytes())
}

pub fn public_key_hex(key: &VerifyingKey) -> String {
    hex(key.as_bytes())
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A public key given as 64 hex digits (as `caal receipt pubkey` prints it).
pub fn parse_public_key(text: &str) -> Option<VerifyingKey> {
    let bytes: [u8; 32] = hex_decode(text.trim())?.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()
}

/// `sha256:` + hex of SHA-256 over the RFC 8785 canonical form of `value`
/// (a string is hashed as its UTF-8 bytes).
pub fn hash_of(value: &Value) -> String {
    match value {
        Value::String(s) => sha256_tagged(s.as_bytes()),
        other => sha256_tagged(canonical_json(other).as_bytes()),
    }
}

/// Whether `signature` (hex) by `public_key` (hex) covers `value`'s canonical form.
pub fn signature_holds(value: &Value, public_key: &str, signature: &str) -> bool {
    let key = parse_public_key(public_key);
    let sig = hex_decode(signature).and_then(|b| <[u8; 64]>::try_from(b).ok());
    match (key, sig) {
        (Some(k), Some(s)) => k
            .verify(canonical_json(value).as_bytes(), &Signature::from_bytes(&s))
            .is_ok(),
        _ => false,
    }
}

/// The data dir's public key (hex) if it has a key; never creates one.
pub fn existing_public_key(data_dir: &Path) -> Option<String> {
    let text = fs::read_to_string(data_dir.join(KEY_FILE)).ok()?;
    let seed: [u8; 32] = hex_decode(text.trim())?.try_into().ok()?;
    Some(public_key_hex(
        &SigningKey::from_bytes(&seed).verifying_key(),
    ))
}

/// Hex Ed25519 signature over the RFC 8785 canonical form of `value`.
pub fn sign_value(value: &Value, key: &SigningKey) -> String {
    hex(&key.sign(canonical_json(value).as_bytes()).to_bytes())
}
