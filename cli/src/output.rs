//! How the CLI prints things for people (JSON output is serde's).

use std::collections::BTreeMap;

use caal::{
    auth::Pending,
    config::StateConfig,
    state::rfc3339_ms,
    trace::{EventRecord, RoundRecord, RoundSummary, VerifyReport},
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::bench::{
    router::RouterBenchReport, scan::ScanBenchReport, serve::ServeBenchReport,
    ship::ShipBenchReport, trace::TraceBenchReport,
};

/// A bar on standard error for long jobs; hidden when stderr is not a terminal
/// or the job is small.
pub fn progress_bar(total: u64, what: &str) -> ProgressBar {
    if total < 10_000 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} {wide_bar} {human_pos}/{human_len} events ({elapsed} elapsed, {eta} left)",
    ) {
        bar.set_style(style);
    }
    bar.set_message(what.to_owned());
    bar
}

pub fn seconds(ts: &str) -> &str {
    ts.get(..19).unwrap_or(ts)
}

/// `s` in at most `n` display columns (CJK and most emoji take two); a cut
/// is marked with an ellipsis.
pub fn clip(s: &str, n: usize) -> String {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    if s.width() <= n {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > n {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// A table cell: `s` clipped and padded to exactly `n` display columns, so
/// columns line up whatever script or emoji the text holds (`{:<n}` counts
/// characters, not columns).
pub fn cell(s: &str, n: usize) -> String {
    use unicode_width::UnicodeWidthStr;
    let mut out = clip(s, n);
    let width = out.width();
    out.extend(std::iter::repeat_n(' ', n.saturating_sub(width)));
    out
}

pub fn print_round_list(rounds: &[RoundSummary]) {
    if rounds.is_empty() {
        println!("no rounds yet; try `caal say \"turn on the kitchen lights\"`");
        return;
    }
    println!(
        "{:<19}  {:<16} {:>5}  {:<7}  {:<16}  {:<36}  input → reply",
        "created (UTC)", "conversation", "seq", "status", "route", "round_id"
    );
    for r in rounds {
        println!(
            "{:<19}  {} {:>5}  {:<7}  {}  {:<36}  {} → {}",
            seconds(&r.round.created_at),
            cell(&r.round.conversation_id, 16),
            r.round.round_seq,
            r.round.status,
            cell(r.route_code.as_deref().unwrap_or("-"), 16),
            r.round.round_id,
            clip(r.input.as_deref().unwrap_or(""), 40),
            clip(r.reply.as_deref().unwrap_or("-"), 50),
        );
    }
}

/// The verdicts on a round, each with the round that recorded it.
pub fn print_feedback(feedback: &[EventRecord]) {
    for e in feedback {
        let p: serde_json::Value = serde_json::from_str(&e.payload).unwrap_or_default();
        println!(
            "  feedback {} ({}, {}) in round {} (seq {}){}",
            p["verdict"].as_str().unwrap_or("?"),
            p["by"].as_str().unwrap_or("?"),
            seconds(&e.timestamp),
            e.round_id,
            e.round_seq,
            p["note"]
                .as_str()
                .map(|n| format!(": {n}"))
                .unwrap_or_default()
        );
    }
}

pub fn print_round(round: &RoundRecord, events: &[EventRecord]) {
    println!(
        "round {}  (conversation {}, round_seq {})",
        round.round_id, round.conversation_id, round.round_seq
    );
    println!(
        "  library {}  bucket {}  channel {}",
        round.library_id, round.bucket_id, round.channel
    );
    println!(
        "  created {}  status {}  state {} → {}",
        round.created_at,
        round.status,
        round.state_in,
        round.state_out.as_deref().unwrap_or("(open)")
    );
    if let (Some(code), Some(reason)) = (&round.failure_code, &round.failure_reason) {
        println!("  failure {code}: {reason}");
    }
    println!();
    for e in events {
        let failure = e
            .failure_code
            .as_deref()
            .map(|c| format!(" [{c}]"))
            .unwrap_or_default();
        println!(
            "  {:>3}  {}  {:<18} {:<7}{failure}  {}",
            e.event_seq,
            &e.timestamp[11..],
            e.event_type,
            e.status,
            clip(&e.payload, 120)
        );
    }
    if let Some(last) = events.last() {
        println!("\n  chain head {}", last.hash);
    }
}

pub fn print_verify(report: &VerifyReport) {
    for link in &report.broken {
        println!("BROKEN {link}");
    }
    for (conversation, round_seq) in &report.open_rounds {
        println!(
            "note: conversation {conversation} round_seq {round_seq} has not ended (in progress, or its last event is lost)"
        );
    }
    let summary = format!(
        "{} conversations, {} rounds, {} events",
        report.conversations, report.rounds, report.events
    );
    if report.ok {
        println!("ok: every chain intact ({summary})");
    } else {
        println!(
            "broken: {} of {} conversations ({summary})",
            report.broken.len(),
            report.conversations
        );
    }
}

pub fn print_trace_bench(r: &TraceBenchReport) {
    println!(
        "trace store benchmark ({} events, rounds of 10 over 64 conversations)",
        r.events
    );
    println!(
        "  chained, schema-checked appends (normal): {:>12.0} events/s  ({:.0} events per commit, writer busy {:.0}%)",
        r.chained_events_per_s,
        r.events as f64 / r.chained_commits.max(1) as f64,
        r.chained_writer_busy * 100.0
    );
    println!(
        "  bare prepared inserts, same rows:          {:>12.0} events/s",
        r.bare_inserts_per_s
    );
    println!(
        "  ratio chained / bare:                      {:>12.2}",
        r.ratio
    );
    println!(
        "  fsync rounds, {} concurrent conversations: {:>12.0} rounds/s  ({} rounds, {:.1} rounds per fsync)",
        r.fsync_conversations, r.fsync_rounds_per_s, r.fsync_rounds, r.fsync_rounds_per_commit
    );
}

pub fn print_llm_bench(r: &crate::bench::llm::LlmBenchReport) {
    println!("local model tier benchmark ({})", r.model);
    let rss = r
        .rss_mb
        .map_or("unknown".to_owned(), |m| format!("{m:.0} MB"));
    println!(
        "  server start (model load): {:.0} ms; resident memory {rss}",
        r.start_ms
    );
    println!(
        "  streamed answers ({}): time to first token p50 {:.0} ms  p90 {:.0} ms;  {:.0} tokens/s p50",
        r.runs, r.ttft_p50_ms, r.ttft_p90_ms, r.tokens_per_s_p50
    );
    println!(
        "  rounds the model answers ({}): round p50 {:.0} ms, of which HTTP exchange p50 {:.0} ms",
        r.rounds, r.round_p50_ms, r.exchange_p50_ms
    );
    println!(
        "  CAAL around the model call, real model on the same cores: p50 {:.3} ms  p99 {:.3} ms",
        r.overhead_p50_ms, r.overhead_p99_ms
    );
    println!(
        "  CAAL around the call, instant server ({} rounds each): words p50 {:.3} ms  p99 {:.3} ms;  all commands offered as tools p50 {:.3} ms  p99 {:.3} ms",
        r.instant_rounds,
        r.instant_overhead_p50_ms,
        r.instant_overhead_p99_ms,
        r.tool_overhead_p50_ms,
        r.tool_overhead_p99_ms
    );
}

pub fn print_router_bench(r: &RouterBenchReport) {
    println!("router benchmark ({} decisions per rule set)", r.decisions);
    println!(
        "  route decision, default rules ({:>3}):  p50 {:>7.2} µs   p99 {:>7.2} µs",
        r.default_rules, r.default_p50_us, r.default_p99_us
    );
    println!(
        "  route decision, generated rules ({:>3}): p50 {:>7.2} µs   p99 {:>7.2} µs",
        r.generated_rules, r.generated_p50_us, r.generated_p99_us
    );
    println!(
        "  level-1 text round, in-process, durability normal ({} rounds): p50 {:.3} ms   p99 {:.3} ms",
        r.rounds, r.round_p50_ms, r.round_p99_ms
    );
}

pub fn print_understanding(
    text: &str,
    d: &caal::router::RouteDecision,
    matches: &[caal::understand::Understood],
    nearest: Option<&Vec<caal::understand::reading::Nearest>>,
    json: bool,
) {
    let commands: Vec<serde_json::Value> = match &d.intent {
        caal::router::Intent::Chain(chain) => chain
            .commands
            .iter()
            .map(|c| serde_json::json!({"command_id": c.command_id, "params": c.params, "auth_level": c.auth_level, "summary": c.summary}))
            .collect(),
        _ => Vec::new(),
    };
    let choices: Vec<serde_json::Value> = d
        .choices
        .iter()
        .map(|c| serde_json::json!({"label": c.label, "example": c.example, "rank": c.rank, "similarity": c.similarity}))
        .collect();
    if json {
        println!(
            "{}",
            serde_json::json!({"text": text, "route_code": d.route_code, "layer": d.layer, "source_rule": d.source_rule,
                "auth_level": d.auth_level, "commands": commands, "understood": d.understood, "templates": matches,
                "nearest": nearest, "choices": choices})
        );
        return;
    }
    println!("{text:?}");
    println!(
        "  decision: {} by {} ({})",
        d.route_code,
        d.layer,
        d.source_rule.as_deref().unwrap_or("-")
    );
    for c in &commands {
        println!(
            "  command: {} {} (level {})",
            c["command_id"].as_str().unwrap_or(""),
            c["params"],
            c["auth_level"]
        );
    }
    if let caal::router::Intent::Reply(r)
    | caal::router::Intent::Invalid {
        problem: caal::command::ParamProblem { message: r, .. },
        ..
    } = &d.intent
    {
        println!("  reply: {r}");
    }
    if let caal::router::Intent::Ambiguous { candidates } = &d.intent {
        println!("  asks which: {}", candidates.join(" | "));
    }
    if !d.choices.is_empty() {
        let labels: Vec<&str> = d.choices.iter().map(|c| c.label.as_str()).collect();
        println!("  not sure: a model chooses among {}", labels.join(" | "));
    }
    if matches.is_empty() {
        println!("  no sentence template matched");
    }
    for m in matches.iter().take(5) {
        let slots: Vec<String> = m
            .slots
            .iter()
            .map(|(k, s)| format!("{k}={}", s.value))
            .collect();
        println!(
            "  template {} [{}] {:.2}: {:?} {}",
            m.intent,
            m.source,
            m.confidence,
            m.template,
            slots.join(" ")
        );
    }
    match nearest {
        None => {
            println!("  meaning layer off (understand.semantic.model is empty or not installed)")
        }
        Some(near) => {
            for n in near {
                println!(
                    "  nearest {} {} {:.3}: {:?}",
                    n.intent,
                    serde_json::json!(n.slots),
                    n.similarity,
                    n.example
                );
            }
        }
    }
}

pub fn print_understand_bench(r: &crate::bench::understand::UnderstandReport, misses: usize) {
    println!(
        "understanding benchmark: {} ({} sentences){}",
        r.library,
        r.sentences,
        if r.spoken {
            // Who says the lines is printed above ("said by …"): espeak-ng or Piper.
            ", spoken: said -> whisper -> router"
        } else {
            ""
        }
    );
    let pct = |x: f64| {
        if x.is_nan() {
            "   -  ".to_owned()
        } else {
            format!("{:5.1}%", x * 100.0)
        }
    };
    for s in &r.suites {
        println!("  {} ({} lines)", s.suite, s.lines);
        if s.commands_expected > 0 {
            println!(
                "    command right {}   command and parameters right {}   ({} expecting a command)",
                pct(s.command_accuracy),
                pct(s.command_params_accuracy),
                s.commands_expected
            );
            println!(
                "    level-1/2 commands understood that would ask for confirmation: {} of {}",
                s.low_level_asked, s.low_level_right
            );
            println!(
                "    understood wrong: {} would run, {} would ask first",
                s.wrong_would_run, s.wrong_would_ask
            );
        }
        if s.out_of_domain > 0 {
            println!(
                "    out of domain ({} lines): {} proposed, {} would run",
                s.out_of_domain, s.ood_proposed, s.ood_executed
            );
            if s.talk_cannot_help + s.talk_model_words > 0 {
                println!(
                    "    replies to talk no layer understood: {} said what CAAL can do, {} gave a model's words",
                    s.talk_cannot_help, s.talk_model_words
                );
            }
        }
        for l in &s.latency {
            println!(
                "    decision time, {:<9} ({:>3}): p50 {:>8.1} µs   p90 {:>8.1} µs",
                l.layer, l.count, l.p50_us, l.p90_us
            );
        }
        for m in s.misses.iter().take(misses) {
            let shown = |v: &[caal::understand::suite::Expected]| {
                if v.is_empty() {
                    "-".to_owned()
                } else {
                    v.iter()
                        .map(|e| {
                            format!(
                                "{} {}",
                                e.command,
                                serde_json::to_string(&e.params).unwrap_or_default()
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(" + ")
                }
            };
            let heard = if m.heard != m.text {
                format!(" (heard {:?})", m.heard)
            } else {
                String::new()
            };
            // What becomes of the miss: run as understood, or asked first.
            let then = if m.would_run {
                ", would run"
            } else if m.would_ask {
                ", asked first"
            } else {
                ""
            };
            println!(
                "    miss: {:?}{heard}: wanted {}, got {} [{} {}{then}]",
                m.text,
                shown(&m.expected),
                shown(&m.decided),
                m.layer,
                m.route_code
            );
            if let Some(reply) = &m.reply {
                println!("      replied {reply:?}");
            }
        }
        if s.misses.len() > misses {
            println!(
                "    … {} more misses (--misses N lists more)",
                s.misses.len() - misses
            );
        }
    }
}

pub fn print_pending(pending: &[(String, Pending)]) {
    if pending.is_empty() {
        println!("nothing is waiting for a confirmation");
        return;
    }
    for (conversation, p) in pending {
        println!(
            "{conversation}: {} (level {}, {} of {} confirmations, expires {}) [{}]",
            p.chain.summary,
            p.chain.chain_level,
            p.received,
            p.required,
            rfc3339_ms(p.expires_at_ms),
            p.confirmation_id
        );
    }
}

pub fn print_state(conversation: &str, current: &str, states: &BTreeMap<String, StateConfig>) {
    match states.get(current) {
        Some(s) => println!(
            "{conversation}: {} {} ({current}): {}",
            s.icon, s.label, s.description
        ),
        None => println!("{conversation}: {current} (no longer configured)"),
    }
    println!("\nstates:");
    for (name, s) in states {
        let marker = if name == current { "*" } else { " " };
        println!(
            " {marker} {} {} {}",
            cell(&s.icon, 2),
            cell(name, 13),
            s.description
        );
    }
}

pub fn print_scan_bench(r: &ScanBenchReport) {
    println!(
        "secret scrubber benchmark ({} lines, {:.1} MB generated)",
        r.lines,
        r.bytes as f64 / 1e6
    );
    println!(
        "  secrets removed: {} of {} ({:.3}%; none may keep a 12-character run of its random part)",
        r.secrets_removed,
        r.secrets,
        r.recall * 100.0
    );
    println!(
        "  clean lines altered: {} of {} ({:.3}%)",
        r.clean_lines_altered,
        r.clean_lines,
        r.clean_altered_share * 100.0
    );
    println!(
        "  throughput, one core: {:.0} MB/s over the corpus; {:.0} MB/s on lines without secrets, {:.0} MB/s on lines with one",
        r.mb_per_s, r.clean_mb_per_s, r.secret_mb_per_s
    );
    println!(
        "  worst case, a megabyte of one anchor repeated: {:.0} MB/s ({})",
        r.worst_case_mb_per_s, r.worst_case
    );
    for (kind, n) in &r.missed {
        println!("  missed {kind}: {n}");
    }
    for p in &r.whole_process {
        println!(
            "  caal scan FILE, whole process: {:.1} MB with {} secrets in {:.2} s ({:.0} MB/s), peak {:.1} MB resident",
            p.bytes as f64 / 1e6,
            p.secrets,
            p.seconds,
            p.mb_per_s,
            p.peak_rss_mb
        );
    }
}

pub fn print_timers_bench(r: &crate::bench::timers::TimersBenchReport) {
    println!(
        "timers benchmark: {} timers due within {} ms, {} conversations, each rung as a round",
        r.timers, r.spread_ms, r.conversations
    );
    println!(
        "  rang: {} of {}, {}",
        r.rang,
        r.timers,
        if r.in_due_order {
            "in due order"
        } else {
            "NOT in due order"
        }
    );
    println!(
        "  late (heard minus due): p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        r.late_p50_ms, r.late_p99_ms, r.late_max_ms
    );
    println!(
        "  first due to last heard: {:.0} ms ({:.0} firing rounds/s)",
        r.span_ms, r.rounds_per_s
    );
}

pub fn print_serve_bench(r: &ServeBenchReport) {
    println!(
        "service benchmark: {} keep-alive clients for {:.1} s, POST /api/chat, level-1 rounds",
        r.clients, r.seconds
    );
    println!(
        "  rounds: {} ({:.0} rounds/s), errors: {}",
        r.rounds, r.rounds_per_s, r.errors
    );
    println!("  latency: p50 {:.2} ms, p99 {:.2} ms", r.p50_ms, r.p99_ms);
    println!(
        "  live stream: {} of {} committed events delivered ({} lost)",
        r.events_streamed, r.events_committed, r.stream_lost
    );
}

pub fn print_ship_bench(r: &ShipBenchReport) {
    if let Some(parquet) = &r.parquet {
        crate::bench::parquet::print(parquet);
    }
    println!(
        "shipping benchmark: OTLP/HTTP protobuf, gzip, {} rounds a request, to a receiver on 127.0.0.1",
        r.batch_size
    );
    for (n, run) in r.runs.iter().enumerate() {
        println!(
            "  run {}: backlog of {} rounds shipped in {:.2} s ({:.0} rounds/s), {} requests, {:.0} bytes a round compressed",
            n + 1,
            run.backlog_rounds,
            run.ship_seconds,
            run.rounds_per_s,
            run.requests,
            run.bytes_per_round
        );
        for (what, s) in [
            ("not shipping", &run.serve_without),
            ("shipping", &run.serve_with),
        ] {
            println!(
                "    service, {what}: {:.0} rounds/s, p50 {:.2} ms, p99 {:.2} ms, {} errors",
                s.rounds_per_s, s.p50_ms, s.p99_ms, s.errors
            );
        }
        println!(
            "    the shipping run's last round acknowledged {:.0} ms after its load ended",
            run.drain_after_ms
        );
    }
    let usual = r
        .runs
        .iter()
        .map(|run| run.serve_without.p99_ms)
        .fold(f64::NAN, f64::max);
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    println!(
        "  medians of {} runs: {:.0} rounds/s shipped; service p99 {:.2} ms shipping, {:.2} ms not ({:.2}x)",
        r.runs.len(),
        r.rounds_per_s_median,
        r.p99_with_median_ms,
        r.p99_without_median_ms,
        r.p99_with_median_ms / r.p99_without_median_ms
    );
    println!("goals:");
    println!(
        "  shipping >= 5,000 rounds/s: {} ({:.0})",
        verdict(r.rounds_per_s_median >= 5_000.0),
        r.rounds_per_s_median
    );
    println!(
        "  the service's p99 with shipping within its usual (the highest without, {:.2} ms): {} ({:.2} ms)",
        usual,
        verdict(r.p99_with_median_ms <= usual),
        r.p99_with_median_ms
    );
    if let Some(parquet) = &r.parquet {
        if let (Some(small), Some(large)) = (parquet.sizes.first(), parquet.sizes.last()) {
            let peak = |s: &crate::bench::parquet::ExportRuns| crate::bench::median(&s.peak_rss_mb);
            println!(
                "  Parquet export >= 1M rounds/min: {} ({:.0} at {} rounds)",
                verdict(large.rounds_per_min_median >= 1e6),
                large.rounds_per_min_median,
                large.rounds
            );
            println!(
                "  its memory flat (peak at {} rounds within 1.25x of {}): {} ({:.1} MB, {:.1} MB)",
                large.rounds,
                small.rounds,
                verdict(peak(large) <= 1.25 * peak(small)),
                peak(large),
                peak(small)
            );
        }
        match &parquet.duckdb {
            Some(q) => println!(
                "  a DuckDB query over {} exported rounds < 1 s: {} ({:.3} s)",
                q.rounds_counted,
                verdict(q.median_seconds < 1.0),
                q.median_seconds
            ),
            None => println!("  a DuckDB query < 1 s: not measured (DuckDB skipped)"),
        }
    }
    println!(
        "  0 rounds lost or doubled over 3 outages and 3 kills: the test tests/e2e/ship.rs every_ended_round_arrives_once_over_three_outages_and_three_kills"
    );
}

pub fn print_registers(registers: &[caal::memory::Register]) {
    if registers.is_empty() {
        println!(
            "nothing remembered yet; try `caal say \"remember that the spare key is in the blue box\"`"
        );
        return;
    }
    println!(
        "{:<24}  {:>6}  {:>6}  {:<19}  register",
        "bucket", "items", "pinned", "last written (UTC)"
    );
    for r in registers {
        println!(
            "{}  {:>6}  {:>6}  {:<19}  {}",
            cell(&r.bucket_id, 24),
            r.item_count,
            r.pinned_count,
            seconds(&r.last_updated),
            r.summary
        );
    }
}

fn print_scored(scored: &caal::memory::ScoredItem, label: &str) {
    let item = &scored.item;
    println!(
        "{label:<10} {:>8.3}  {}{}  {}",
        scored.reference_score,
        if item.pinned { "📌 " } else { "" },
        item.item_id,
        clip(&item.content, 80)
    );
    for r in &item.metadata.refs {
        let detail = r.summary.as_deref().or(r.excerpt.as_deref()).unwrap_or("");
        println!(
            "{:<10}           ↳ {}: {} {}",
            "",
            r.kind,
            r.target,
            clip(detail, 60)
        );
    }
    println!("{:<10}           {}", "", scored.score.explanation);
}

pub fn print_package(p: &caal::memory::ContextPackage) {
    println!("{}  {}", p.bucket_id, p.register_summary);
    if p.items.is_empty() {
        println!("nothing remembered in this bucket yet");
        return;
    }
    println!(
        "package at {} ({} items; short part {}/{} {unit}, long part {}/{} {unit})",
        seconds(&p.computed_at),
        p.items.len(),
        p.budget.short_used,
        p.budget.short,
        p.budget.long_used,
        p.budget.long,
        unit = p.budget.unit.as_str()
    );
    println!("{:<10} {:>8}  item", "why/tier", "score");
    for i in &p.items {
        print_scored(
            &i.scored,
            &format!("{}/{}", i.why.as_str(), i.tier.as_str()),
        );
    }
}

pub fn print_items(items: &[caal::memory::ScoredItem]) {
    if items.is_empty() {
        println!("nothing remembered in this bucket yet");
    }
    for i in items {
        print_scored(i, "");
    }
}

pub fn print_hits(hits: &[caal::memory::Hit]) {
    if hits.is_empty() {
        println!("no item matches");
        return;
    }
    for h in hits {
        println!("{}", h.scored.item.bucket_id);
        print_scored(&h.scored, &format!("{:.2}", h.match_rank));
    }
}

pub fn print_memory_bench(r: &crate::bench::memory::MemoryBenchReport) {
    println!(
        "bucket of {} items (filled in {:.1} s, {:.1} MB on disk)",
        r.items,
        r.fill_s,
        r.db_bytes as f64 / 1e6
    );
    println!(
        "context package ({} items): cold p50 {:.3} ms, p95 {:.3} ms; cached p50 {:.2} µs, p95 {:.2} µs",
        r.package_items,
        r.package_cold_p50_ms,
        r.package_cold_p95_ms,
        r.package_cached_p50_us,
        r.package_cached_p95_us
    );
    println!(
        "search, top 10: all words p50 {:.3} ms, p95 {:.3} ms; any word p50 {:.3} ms, p95 {:.3} ms",
        r.search_all_p50_ms, r.search_all_p95_ms, r.search_any_p50_ms, r.search_any_p95_ms
    );
    println!(
        "search for the commonest word (in {} items): {:.3} ms",
        r.common_word_items, r.search_common_ms
    );
    println!(
        "one write (item, register, invalidation): p50 {:.3} ms",
        r.write_p50_ms
    );
}

#[cfg(feature = "whisper")]
pub fn print_voice_bench(r: &crate::bench::voice::VoiceBenchReport) {
    println!(
        "voice benchmark: {} on {} threads, espeak-ng speech, medians of {} runs",
        r.model, r.threads, r.runs
    );
    println!(
        "  {:>7}  {:>9}  {:>9}  {:>9}  {:>6}  {:>8}  heard",
        "audio", "caal", "(of it prep)", "bare", "RTF", "vs bare"
    );
    for u in &r.utterances {
        println!(
            "  {:>6.1}s  {:>7.0}ms  {:>10.1}ms  {:>7.0}ms  {:>6.3}  {:>7.2}×  {}",
            u.audio_s, u.caal_ms, u.prep_ms, u.bare_ms, u.rtf, u.ratio_to_bare, u.heard
        );
    }
    println!(
        "  worst: RTF {:.3} (goal ≤ 0.3), {:.2}× bare whisper-rs (goal ≤ 1.1×)",
        r.rtf_max, r.ratio_to_bare_max
    );
    println!(
        "  end of speech to route decision, {:.1} s utterance streamed over the voice socket: p50 {:.0} ms, max {:.0} ms (goal ≤ 500 ms; {} ms of quiet end an utterance, and its transcription, {:.0} ms, starts when the speaker pauses)",
        r.streamed_audio_s,
        r.end_to_route_p50_ms,
        r.end_to_route_max_ms,
        r.vad_silence_ms,
        r.end_stt_p50_ms
    );
    println!(
        "  the same speech over Wyoming: audio-stop to transcript p50 {:.0} ms; the voice socket's end of speech to its final transcript p50 {:.0} ms (the silence that ends an utterance in it): {:.2}× (goal ≤ 1.1×)",
        r.wyoming_stop_to_transcript_p50_ms, r.end_to_final_p50_ms, r.wyoming_ratio
    );
    println!(
        "  end of speech to the spoken reply's first audio on the socket ({}): p50 {:.0} ms, max {:.0} ms (goal ≤ 800 ms)",
        r.reply_voice, r.end_to_reply_audio_p50_ms, r.end_to_reply_audio_max_ms
    );
    println!(
        "  barge-in, the utterance said again over its spoken reply ({}): first sample of speech sent to the reply stopped p50 {:.0} ms, worst {:.0} ms (goal ≤ 150 ms; the server's own count, onset to stop in the audio received, {:.0} ms); heard whole {} of {}",
        r.reply_voice,
        r.barge_in_p50_ms,
        r.barge_in_max_ms,
        r.barge_in_detected_p50_ms,
        r.barged_heard_whole,
        r.runs
    );
}

/// `caal replay`: the counts, then each changed round, before → after.
pub fn print_replay(r: &caal::router::replay::ReplayReport, show: usize) {
    let skipped: u64 = r.skipped.values().sum();
    println!(
        "replayed {} of {} rounds in {:.2} s ({:.0} rounds/s); {} unchanged, {} would change{}",
        r.replayed,
        r.rounds_read,
        r.seconds,
        r.replayed as f64 / r.seconds.max(1e-9),
        r.unchanged,
        r.changed.len(),
        if skipped > 0 {
            format!(
                "; {skipped} not routed ({})",
                r.skipped
                    .iter()
                    .map(|(why, n)| format!("{n} {why}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            String::new()
        }
    );
    if !r.changed_by.is_empty() {
        println!(
            "  changed: {}",
            r.changed_by
                .iter()
                .map(|(what, n)| format!("{what} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let shown = |d: &caal::router::replay::Decided| {
        format!(
            "{} {} {} (level {})",
            d.route_code,
            d.command_id.as_deref().unwrap_or("-"),
            if d.params.as_object().is_some_and(|o| !o.is_empty()) {
                d.params.to_string()
            } else {
                "{}".to_owned()
            },
            d.auth_level
        )
    };
    for c in r.changed.iter().take(show) {
        println!(
            "  {} #{} {:?} [{}]\n      {}\n    → {}   ({})",
            c.conversation_id,
            c.round_seq,
            clip(&c.input, 60),
            c.state,
            shown(&c.before),
            shown(&c.after),
            c.what.join(", ")
        );
    }
    if r.changed.len() > show {
        println!("  … {} more (--show N lists more)", r.changed.len() - show);
    }
}

#[cfg(test)]
mod tests {
    use super::{cell, clip};
    use unicode_width::UnicodeWidthStr;

    #[test]
    fn cells_line_up_by_display_width_for_any_script() {
        for text in [
            "kitchen",
            "キッチンの照明",
            "🌙 night",
            "chambre à coucher",
            "",
        ] {
            assert_eq!(cell(text, 12).width(), 12, "{text:?}");
        }
        // Cut on a column boundary, never through a wide character.
        assert_eq!(clip("キッチンの照明", 7), "キッチ…");
        assert_eq!(clip("キッチンの照明", 8), "キッチ…");
        assert_eq!(clip("kitchen", 7), "kitchen");
        assert_eq!(cell("🌙", 2), "🌙");
    }
}
