//! The doors other software already speaks, each onto the same rounds:
//! OpenAI-compatible chat (`/v1`). Wyoming and MCP join here.

pub mod openai;
