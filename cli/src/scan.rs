//! `caal scan`: a text with its secrets replaced by secret_ref tokens, or
//! the findings. Read and written a window at a time (`Safety::scan_stream`):
//! memory stays flat however large the input.

use std::{
    fs,
    io::{self, BufWriter, Read, Write},
    path::Path,
};

use anyhow::{Context, Result};

pub fn scan(file: Option<&Path>, json: bool) -> Result<()> {
    let (input, name): (Box<dyn Read>, String) = match file {
        None => (Box::new(io::stdin().lock()), "standard input".into()),
        Some(p) if p == Path::new("-") => (Box::new(io::stdin().lock()), "standard input".into()),
        Some(p) => (
            Box::new(fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?),
            p.display().to_string(),
        ),
    };
    let safety = caal::safety::global();
    let read = |e: io::Error| anyhow::anyhow!("cannot read {name} as UTF-8 text: {e}");
    if json {
        let mut findings = Vec::new();
        let mut line = 1;
        safety
            .scan_stream(input, |text, found, offset| {
                let mut at = 0;
                for (kind, start, end) in found {
                    line += text[at..start].matches('\n').count();
                    at = start;
                    findings.push(serde_json::json!({"kind": kind, "start": offset + start,
                                                     "end": offset + end, "line": line}));
                }
                line += text[at..].matches('\n').count();
                Ok(())
            })
            .map_err(read)?;
        println!("{}", serde_json::to_string_pretty(&findings)?);
    } else {
        let out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
        safety.scrub_stream(input, out).map_err(read)?;
    }
    io::stdout().flush()?;
    Ok(())
}
