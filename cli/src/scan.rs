//! `caal scan`: a text with its secrets replaced by secret_ref tokens, or
//! the findings.

use std::{
    fs,
    io::{self, Read},
    path::Path,
};

use anyhow::{Context, Result};

pub fn scan(file: Option<&Path>, json: bool) -> Result<()> {
    let mut text = String::new();
    match file {
        None => io::stdin()
            .read_to_string(&mut text)
            .context("cannot read standard input")?,
        Some(p) if p == Path::new("-") => io::stdin()
            .read_to_string(&mut text)
            .context("cannot read standard input")?,
        Some(p) => fs::File::open(p)
            .and_then(|mut f| f.read_to_string(&mut text))
            .with_context(|| format!("cannot read {} as UTF-8 text", p.display()))?,
    };
    let safety = caal::safety::global();
    if json {
        let findings: Vec<serde_json::Value> = safety
            .findings(&text)
            .into_iter()
            .map(|(kind, start, end)| {
                let line = text[..start].matches('\n').count() + 1;
                serde_json::json!({"kind": kind, "start": start, "end": end, "line": line})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&findings)?);
    } else {
        print!("{}", safety.scrub(&text));
    }
    Ok(())
}
