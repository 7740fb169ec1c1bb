//! What a bucket offers a prompt and a screen: the context package (pinned,
//! then high-score, then recent items, with their scores, split into a short
//! part that goes into every prompt and a long part for when there is room)
//! and the register (one line of at most 140 characters).

use serde::Serialize;

use crate::{config::BudgetUnit, trace::SCHEMA_VERSION};

use super::{ItemRef, ScoredItem};

/// The longest register, in characters.
pub const REGISTER_MAX_CHARS: usize = 140;

/// Why an item is in the package.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    Pinned,
    HighScore,
    Recent,
}

impl Why {
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Pinned => "pinned",
            Why::HighScore => "high_score",
            Why::Recent => "recent",
        }
    }
}

/// Which part of the package an item's line is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Always injected.
    Short,
    /// Injected when the prompt has room.
    Long,
    /// Over both budgets: listed, not injected.
    Left,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Short => "short",
            Tier::Long => "long",
            Tier::Left => "left",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PackagedItem {
    #[serde(flatten)]
    pub scored: ScoredItem,
    pub why: Why,
    pub tier: Tier,
}

/// How the package was sized.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Budget {
    pub unit: BudgetUnit,
    pub short: usize,
    pub long: usize,
    pub short_used: usize,
    pub long_used: usize,
}

/// A bucket's context package at one moment (`BucketContextPackage`).
#[derive(Clone, Debug, Serialize)]
pub struct ContextPackage {
    pub bucket_id: String,
    pub schema_version: u32,
    pub register_summary: String,
    /// Always injected into prompts (may be empty: nothing remembered).
    pub short_context: String,
    /// Injected when the prompt's budget allows.
    pub long_context: Option<String>,
    /// Pinned, then high-score, then recent; scores as of `computed_at`.
    pub items: Vec<PackagedItem>,
    pub budget: Budget,
    /// The bucket's last write, if it has any items.
    pub last_updated: Option<String>,
    pub computed_at: String,
}

impl ContextPackage {
    /// Lays out `ordered` items into the short and long parts.
    pub(crate) fn assemble(
        bucket_id: &str,
        register_summary: String,
        ordered: Vec<(ScoredItem, Why)>,
        unit: BudgetUnit,
        (short, long): (usize, usize),
        last_updated: Option<String>,
        computed_at: String,
    ) -> Self {
        let mut short_lines = Vec::new();
        let mut long_lines = Vec::new();
        let (mut short_used, mut long_used) = (0, 0);
        let mut items = Vec::with_capacity(ordered.len());
        for (scored, why) in ordered {
            let line = context_line(&scored.item.content, &scored.item.metadata.refs);
            // Lines are joined by newlines: each counts one more.
            let size = unit.measure(&line) + usize::from(!short_lines.is_empty());
            let long_size = unit.measure(&line) + usize::from(!long_lines.is_empty());
            let tier = if short_used + size <= short {
                short_used += size;
                short_lines.push(line);
                Tier::Short
            } else if long_used + long_size <= long {
                long_used += long_size;
                long_lines.push(line);
                Tier::Long
            } else {
                Tier::Left
            };
            items.push(PackagedItem { scored, why, tier });
        }
        Self {
            bucket_id: bucket_id.to_owned(),
            schema_version: SCHEMA_VERSION,
            register_summary,
            short_context: short_lines.join("\n"),
            long_context: (!long_lines.is_empty()).then(|| long_lines.join("\n")),
            items,
            budget: Budget {
                unit,
                short,
                long,
                short_used,
                long_used,
            },
            last_updated,
            computed_at,
        }
    }

    /// The items that went into a prompt given the parts it received.
    pub fn injected(&self, with_long: bool) -> impl Iterator<Item = &PackagedItem> {
        self.items
            .iter()
            .filter(move |i| i.tier == Tier::Short || (with_long && i.tier == Tier::Long))
    }
}

/// One item as a prompt sees it: `- content (file: x — excerpt)`.
fn context_line(content: &str, refs: &[ItemRef]) -> String {
    let mut line = format!("- {}", one_line(content));
    for r in refs {
        let detail = r.summary.as_deref().or(r.excerpt.as_deref());
        match detail {
            Some(d) => line.push_str(&format!(" ({}: {} — {})", r.kind, r.target, one_line(d))),
            None => line.push_str(&format!(" ({}: {})", r.kind, r.target)),
        }
    }
    line
}

/// Whitespace (newlines included) collapsed to single spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` on one line, cut to at most `max` characters, ending in "…" when cut
/// (at a word boundary when one is near).
pub(crate) fn fit(text: &str, max: usize) -> String {
    let text = one_line(text);
    if text.chars().count() <= max {
        return text;
    }
    if max == 0 {
        return String::new();
    }
    let keep: String = text.chars().take(max - 1).collect();
    let cut = match keep.rfind(' ') {
        Some(space) if keep[..space].chars().count() + 12 >= max => keep[..space].trim_end(),
        _ => keep.as_str(),
    };
    format!("{cut}…")
}

/// The register: how many items, the top pinned one and the latest, in at
/// most [`REGISTER_MAX_CHARS`] characters.
pub fn register_summary(
    count: u64,
    pinned: u64,
    top_pinned: Option<&str>,
    latest: Option<&str>,
) -> String {
    if count == 0 {
        return "Nothing remembered yet.".into();
    }
    let mut head = format!("{count} {}", if count == 1 { "memory" } else { "memories" });
    if pinned > 0 {
        head.push_str(&format!(", {pinned} pinned"));
    }
    let latest = latest.filter(|l| Some(*l) != top_pinned);
    let parts: Vec<(&str, &str)> = [("pinned: ", top_pinned), ("latest: ", latest)]
        .into_iter()
        .filter_map(|(label, text)| text.map(|t| (label, t)))
        .collect();
    let mut summary = head;
    let fixed: usize = summary.chars().count()
        + parts
            .iter()
            .map(|(label, _)| 2 + label.chars().count())
            .sum::<usize>();
    let share = REGISTER_MAX_CHARS.saturating_sub(fixed) / parts.len().max(1);
    for (label, text) in parts {
        summary.push_str(". ");
        summary.push_str(label);
        summary.push_str(&fit(text, share));
    }
    fit(&summary, REGISTER_MAX_CHARS)
}
