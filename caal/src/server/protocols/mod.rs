//! The doors other software already speaks, each onto the same rounds:
//! OpenAI-compatible chat (`/v1`) and Wyoming (`caal serve --wyoming`). MCP
//! joins here.

pub mod openai;
pub mod wyoming;
