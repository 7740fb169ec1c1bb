//! The doors other software already speaks, each onto the same rounds:
//! OpenAI-compatible chat (`/v1`), Wyoming (`caal serve --wyoming`) and MCP
//! (`/mcp` and `caal mcp`).

pub mod mcp;
pub mod openai;
pub mod wyoming;
