//! The rule router and conversation states.
//!
//! Configured rules are matched against the normalised utterance in one pass
//! (a `RegexSet`); the highest priority wins, and two matches of equal
//! priority that name different targets are an ambiguity the round asks about
//! rather than guesses. A command rule's named captures become the command's
//! typed parameters; a macro rule becomes a chain. The conversation state
//! (`state_in`, fixed for the round) decides where unmatched input goes.

mod hearing;
mod layers;
mod order;
pub mod replay;
mod several;
mod spans;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use regex::{Regex, RegexSet};
use serde::Serialize;
use serde_json::{Value, json};

pub use hearing::{Bars, Hearing, sure_words};

use crate::{
    auth::{AuthLevel, Command, CommandChain, StoredChain},
    command::{CommandSpec, Known, ParamProblem, parse_params, render},
    config::{
        Config, ConfigError, IntentMapConfig, MacroConfig, MemoryOp, ParamKind, RouteType,
        RuleConfig, StateConfig, Unmatched,
    },
    tools,
    understand::{
        Context, Embedder, Home, Lang, Layer, Library, Reading, Semantic, sounds::Sounds,
        words::Words,
    },
};

/// A decision, or the meaning layer left to decide (with what it found,
/// when it was asked already).
enum Meant {
    Decided(RouteDecision),
    Meaning(Option<layers::Meaning>),
}

/// A template match at least this sure is taken over a split of the sentence.
const SURE: f64 = 0.5;

#[derive(Clone, Debug)]
enum Target {
    Command(String),
    Macro(String),
    None,
}

struct CompiledRule {
    config: RuleConfig,
    regex: Regex,
    target: Target,
    level: Option<AuthLevel>,
}

pub struct Router {
    set: RegexSet,
    rules: Vec<CompiledRule>,
    commands: BTreeMap<String, CommandSpec>,
    macros: BTreeMap<String, MacroConfig>,
    states: BTreeMap<String, StateConfig>,
    state_names: BTreeSet<String>,
    fallback_reply: String,
    chat_reply: String,
    home: Home,
    library: Library,
    intent_maps: Vec<IntentMapConfig>,
    /// Rules of this priority or below yield to the templates.
    template_priority: i32,
    /// The language pack, compiled: the words and phrases the layers read.
    words: Words,
    /// How the language names a timer.
    timer_names: crate::understand::names::TimerNames,
    conditional_reply: String,
    /// Every word the sentences, the home, the examples and the word lists
    /// know: a word of what was heard that is none of them may be a
    /// mishearing of one. Made the first time a sentence needs it (about
    /// 1.5 ms: a process that never meets such a word never pays it).
    vocabulary: std::sync::OnceLock<crate::understand::spelling::Vocabulary>,
    /// The semantic layer, when its model is loaded and the language has examples.
    semantic: Option<Semantic>,
    /// The sound layer, when its dictionary is installed (speech only).
    sounds: Option<Sounds>,
    /// The model layer: when and among how many meanings a model chooses.
    model_choice: crate::config::ModelChoiceConfig,
}

/// What the round should do, as the router sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Intent {
    /// Run these commands (subject to the authority gate).
    Chain(CommandChain),
    /// The command was understood but its parameters were refused.
    Invalid {
        command_id: String,
        problem: ParamProblem,
    },
    Confirm,
    Deny,
    Undo,
    /// Say this (chat, greetings, unmatched input).
    Reply(String),
    /// Rules of equal priority name different targets: ask which.
    Ambiguous {
        candidates: Vec<String>,
    },
    /// A question for a language model: llm and research routes, and chat
    /// without a fixed reply. `fallback` is said when no model can be had.
    Think {
        route: RouteType,
        fallback: Option<String>,
    },
    /// A memory command: `subject` is what to remember, forget, pin, unpin
    /// or recall (as normalised; none: recall everything).
    Memory {
        op: MemoryOp,
        subject: Option<String>,
    },
    /// A verdict on the conversation's round before this one.
    Feedback(crate::config::Verdict),
    /// A route type whose capability this build does not have yet.
    Unsupported(RouteType),
}

/// The routing decision recorded as `route.selected`.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteDecision {
    /// Namespaced: `intent.<route type>`, `intent.unmatched`, `intent.ambiguous`.
    pub route_code: String,
    pub source_rule: Option<String>,
    pub topic: Option<String>,
    pub auth_level: AuthLevel,
    pub macro_name: Option<String>,
    pub command_id: Option<String>,
    /// Typed parameters of a single command (raw text if they were refused).
    pub params: Value,
    pub intent: Intent,
    /// Which layer decided (stored and shown by its name: `rule`,
    /// `template`, `split`, `semantic`, ...).
    pub layer: Layer,
    /// What the understanding layers read and how they reached it.
    pub understood: Option<Reading>,
    /// How sure the deciding layer is, 0–1 (rules: 1).
    pub confidence: f64,
    /// When the meaning layer was not sure: the nearest meanings a model
    /// may choose among (`Router::chosen` applies its choice). Empty when
    /// another layer decided, or the model layer is off.
    pub choices: Vec<Choice>,
    /// When no layer decided: the commands of the requests the meaning
    /// layer found near what was said (`Router::near_commands`), the only
    /// tools a model asked about this talk is offered. Empty when nothing
    /// was near, or for a negation or a story; none when there is no
    /// meaning layer to say (then a model is offered every command).
    pub near: Option<Vec<String>>,
}

/// One meaning the model layer may choose: what it would do, said as the
/// command's summary, with the example sentence of it nearest to what was
/// said and how near. `understood: None` is the way out: "none of these",
/// talk that is no request.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub label: String,
    pub example: String,
    pub similarity: f64,
    /// Its place among the meanings by nearness (0: the nearest). Choices
    /// are offered in the order of their labels, not by nearness, so a
    /// model that favours the first option does not seem to agree.
    pub rank: usize,
    pub understood: Option<crate::understand::Understood>,
}

impl RouteDecision {
    fn simple(route_code: &str, source_rule: Option<String>, intent: Intent) -> Self {
        let source_rule_is_some = source_rule.is_some();
        Self {
            route_code: route_code.into(),
            source_rule,
            topic: None,
            auth_level: AuthLevel::RUN,
            macro_name: None,
            command_id: None,
            params: json!({}),
            intent,
            layer: if source_rule_is_some {
                Layer::Rule
            } else {
                Layer::None
            },
            understood: None,
            confidence: 1.0,
            choices: Vec::new(),
            near: None,
        }
    }
}

impl Router {
    /// What CAAL says when nothing understood `d`'s sentence and no tier
    /// answers in words: what it can do, and, where the meaning layer
    /// found a request near what was said (`near`, nearest first), the
    /// example of what it offers for it ("… For example, say \"set a
    /// timer for 10 minutes\"."). None when the language says nothing.
    pub fn cannot_help(&self, d: &RouteDecision) -> Option<String> {
        if self.words.cannot_help.is_empty() {
            return None;
        }
        let example = d
            .near
            .iter()
            .flatten()
            .find_map(|c| self.words.offers.iter().find(|o| o.commands.contains(c)))
            .map(|o| o.example.as_str())
            .filter(|_| self.words.try_saying.contains("{example}"));
        Some(match example {
            Some(e) => format!(
                "{} {}",
                self.words.cannot_help,
                self.words.try_saying.replace("{example}", e)
            ),
            None => self.words.cannot_help.clone(),
        })
    }

    /// Whether `reply` is what CAAL says when it cannot help.
    pub fn says_cannot_help(&self, reply: &str) -> bool {
        !self.words.cannot_help.is_empty() && reply.starts_with(&self.words.cannot_help)
    }

    /// The router with CAAL's own sentences only (checks, tools that need no library).
    pub fn compile(config: &Config) -> Result<Self, ConfigError> {
        Self::compile_with(config, None, None)
    }

    /// The router a configuration asks for: its sentence library and its
    /// embedding model loaded when configured and installed. What could not
    /// be loaded is left out and said in the warnings (with how to get it).
    pub fn configured(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(Self, Vec<String>), ConfigError> {
        let mut warnings = Vec::new();
        let library = crate::understand::library::load_configured(&config.understand, env)
            .unwrap_or_else(|e| {
                warnings.push(e.to_string());
                None
            });
        let embedder = crate::understand::embed::load_configured(&config.understand, env)
            .unwrap_or_else(|e| {
                warnings.push(e.to_string());
                None
            });
        let sounds = Sounds::configured(&config.understand.sounds, env).unwrap_or_else(|e| {
            warnings.push(e.to_string());
            None
        });
        let mut router = Self::compile_with(config, library, embedder)?;
        router.sounds = sounds;
        Ok((router, warnings))
    }

    /// The router over a loaded sentence library (Home Assistant's), with
    /// CAAL's own sentences and skip words added to it, and the semantic
    /// layer over the language's examples when an embedding model is given.
    pub fn compile_with(
        config: &Config,
        library: Option<Library>,
        embedder: Option<Arc<Embedder>>,
    ) -> Result<Self, ConfigError> {
        let state_names: BTreeSet<String> = config.states.keys().cloned().collect();
        let home = Home::from_config(&config.home)?;
        let known = Known {
            states: &state_names,
            home: &home,
            points_back: &[],
        };
        let commands = compile_commands(config, known)?;
        for (name, m) in &config.macros {
            check_macro(name, m, &commands, known)?;
        }
        let u = &config.understand;
        let lang = Lang::parse(&u.language).ok_or_else(|| ConfigError::Value {
            key: "understand.language".into(),
            problem: format!(
                "{:?} has no number reader here; use \"en\" or \"de\"",
                u.language
            ),
        })?;
        let words = u.languages.get(lang.code()).cloned().unwrap_or_default();
        let home = home.with_kind_words(&words.light_words)?;
        let library = taught(
            library.unwrap_or_else(|| Library::empty(lang)),
            &words,
            lang,
        )?;
        layers::check_maps(&u.intents, &commands)?;
        layers::check_examples(&words, &u.intents, &u.semantic, lang)?;
        layers::check_model_choice(&u.model)?;
        let semantic = embedder
            .filter(|_| !words.examples.is_empty())
            .map(|e| meaning_layer(e, u, lang, &words, &home));
        let (rules, set) = compile_rules(config, &commands)?;
        // What CAAL offers when it cannot help: what is configured.
        let offers: Vec<crate::config::OfferConfig> = words
            .offers
            .iter()
            .filter(|o| o.commands.iter().any(|c| commands.contains_key(c)))
            .cloned()
            .collect();
        Ok(Self {
            set,
            rules,
            commands,
            macros: config.macros.clone(),
            states: config.states.clone(),
            state_names,
            fallback_reply: config.router.fallback_reply.clone(),
            chat_reply: config.router.chat_reply.clone(),
            home,
            library,
            intent_maps: u.intents.clone(),
            template_priority: u.priority,
            words: Words::compile(&words, offers),
            timer_names: crate::understand::names::TimerNames::compile(&words, lang),
            conditional_reply: config.router.conditional_reply.clone(),
            vocabulary: std::sync::OnceLock::new(),
            semantic,
            sounds: None,
            model_choice: u.model.clone(),
        })
    }

    /// The home model parameters resolve against.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// The sentence library in use.
    pub fn library(&self) -> &Library {
        &self.library
    }

    /// The semantic layer, when it is on.
    pub fn semantic(&self) -> Option<&Semantic> {
        self.semantic.as_ref()
    }

    fn known(&self) -> Known<'_> {
        Known {
            states: &self.state_names,
            home: &self.home,
            points_back: &self.words.refer_to_item,
        }
    }

    pub fn command(&self, id: &str) -> Option<&CommandSpec> {
        self.commands.get(id)
    }

    pub fn commands(&self) -> impl Iterator<Item = &CommandSpec> {
        self.commands.values()
    }

    /// The names a `state` parameter accepts.
    pub fn state_names(&self) -> &BTreeSet<String> {
        &self.state_names
    }

    /// Whether any rule or state sends input to a language model, and the
    /// first that does (for the start-up guard's message).
    pub fn needs_llm(&self) -> Option<String> {
        if let Some(rule) = self.rules.iter().find(|r| {
            matches!(r.config.route, RouteType::Llm | RouteType::Research)
                || (r.config.route == RouteType::Chat && r.config.reply.is_none())
        }) {
            return Some(format!(
                "rule {:?} (route {})",
                rule.config.name,
                rule.config.route.as_str()
            ));
        }
        self.states
            .iter()
            .find(|(_, s)| s.unmatched == Unmatched::Chat)
            .map(|(name, _)| format!("state {name:?} (unmatched = \"chat\")"))
    }

    pub fn state(&self, name: &str) -> Option<&StateConfig> {
        self.states.get(name)
    }

    pub fn states(&self) -> &BTreeMap<String, StateConfig> {
        &self.states
    }

    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// Routes one normalised utterance in conversation state `state`.
    pub fn route(&self, text: &str, state: &str) -> RouteDecision {
        self.route_in(text, state, &Context::default())
    }

    /// Routes in layers, in the order `understand::layer::ORDER` lists
    /// (rules above the template priority; a negated request, never run;
    /// the sentence templates; several requests in one sentence; the
    /// remaining rules; the clauses of a longer sentence; a word read as
    /// one spelled or sounding near it; a room or device that is not in the
    /// home; the nearest examples in meaning; a request among other words;
    /// else the state's unmatched route). `RouteDecision::layer` says which
    /// decided.
    pub fn route_in(&self, text: &str, state: &str, context: &Context) -> RouteDecision {
        let d = self.route_once(text, state, context);
        self.each_of_several(d)
    }

    /// `route_in` before a list said in one value becomes several commands:
    /// the steps of `order::STEPS` asked in turn, the first decision taken
    /// (the last step always decides).
    fn route_once(&self, text: &str, state: &str, context: &Context) -> RouteDecision {
        order::STEPS
            .iter()
            .find_map(|step| (step.read)(self, text, state, context))
            .unwrap_or_else(|| self.unmatched(state))
    }

    /// A sentence longer than the sentence layers read (`MAX_WORDS`): a
    /// strong rule, or its clauses (each within the bound), else the
    /// fallback. Bounded work, however long what was sent.
    fn route_long(&self, text: &str, state: &str, context: &Context) -> RouteDecision {
        if let Some((priority, d)) = self.by_rules(text)
            && priority > self.template_priority
        {
            return d;
        }
        let d = self
            .by_clause(text, context, true)
            .unwrap_or_else(|| self.unmatched(state));
        self.unless_conditional(text, d)
    }

    /// For speech, what was heard read by sound, unless the meaning layer
    /// understands the words as they were heard as a request at least
    /// `meaning_over` similar to its example (they made sense as heard:
    /// "set the office lights to full brightness" is not "… to four brightness");
    /// then (and for typed words) a room or device that is not in the
    /// home; else the meaning layer decides (with its finding, when it was
    /// asked already).
    fn by_sound_or_meaning(&self, text: &str, context: &Context) -> Meant {
        let mut meaning = None;
        if let Some(sounds) = self.sounds.as_ref().filter(|_| context.spoken) {
            let meant = self.by_meaning(text, context);
            // Not for every word heard surely: whisper is sure of words it
            // heard wrong ("I'll cot the side door", "1 hour in 15
            // minutes"), and the meaning layer's guess from them ran the
            // opposite where the sound layer read them right.
            let stands = meant
                .decided
                .as_ref()
                .is_some_and(|d| d.confidence >= sounds.config.meaning_over);
            if !stands && let Some(d) = self.by_sound(text, context, false) {
                return Meant::Decided(d);
            }
            meaning = Some(meant);
        }
        match self.unknown_target(text, context) {
            Some(d) => Meant::Decided(d),
            None => Meant::Meaning(meaning),
        }
    }

    /// A command the clause, meaning or span layers decide, all its
    /// parameters resolved; `None` when they decide nothing runnable.
    fn runnable_below(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        self.by_clause(text, context, true)
            .or_else(|| self.by_meaning(text, context).decided)
            .or_else(|| self.by_span(text, context))
            .filter(|d| matches!(d.intent, Intent::Chain(_)))
    }

    /// The layers below the strong rules, without the catch-alls. A
    /// template whose wildcards took most of the sentence yields to a split
    /// into requests that each match whole ("turn off the lights then set a
    /// timer" is not a timer named "turn off the lights then").
    fn understood(&self, text: &str, context: &Context) -> Option<RouteDecision> {
        if let Some(d) = self.negated(text, context) {
            return Some(d);
        }
        let by_template = self.by_templates(text, context);
        if by_template.as_ref().is_none_or(|d| d.confidence < SURE)
            && let Some(several) = self.several(text, context)
        {
            return Some(several);
        }
        by_template
    }

    /// The configured rules' decision and the winning priority, if any rule matched.
    fn by_rules(&self, text: &str) -> Option<(i32, RouteDecision)> {
        let matches = self.set.matches(text);
        let top = matches.iter().map(|i| self.rules[i].config.priority).max();
        let winners: Vec<&CompiledRule> = matches
            .iter()
            .map(|i| &self.rules[i])
            .filter(|r| Some(r.config.priority) == top)
            .collect();
        let rule = winners.first().copied()?;
        let priority = rule.config.priority;
        let distinct: Vec<&CompiledRule> = winners.iter().fold(Vec::new(), |mut kept, r| {
            if !kept.iter().any(|k: &&CompiledRule| same_target(k, r)) {
                kept.push(r);
            }
            kept
        });
        if distinct.len() > 1 {
            let candidates = distinct.iter().map(|r| self.describe(r, text)).collect();
            return Some((
                priority,
                RouteDecision::simple("intent.ambiguous", None, Intent::Ambiguous { candidates }),
            ));
        }
        let captures = captures(&rule.regex, text);
        let topic = rule
            .config
            .topic
            .as_ref()
            .and_then(|t| captures.get(t).cloned());
        let route_code = format!("intent.{}", rule.config.route.as_str());
        let source = Some(rule.config.name.clone());
        let mut decision = match rule.config.route {
            RouteType::Confirm => RouteDecision::simple(&route_code, source, Intent::Confirm),
            RouteType::Deny => RouteDecision::simple(&route_code, source, Intent::Deny),
            RouteType::Undo => RouteDecision::simple(&route_code, source, Intent::Undo),
            RouteType::Feedback => RouteDecision::simple(
                &route_code,
                source,
                Intent::Feedback(rule.config.feedback.unwrap_or(crate::config::Verdict::Bad)),
            ),
            RouteType::Chat => {
                let intent = match &rule.config.reply {
                    Some(reply) => Intent::Reply(reply.clone()),
                    None => Intent::Think {
                        route: RouteType::Chat,
                        fallback: Some(self.chat_reply.clone()),
                    },
                };
                RouteDecision::simple(&route_code, source, intent)
            }
            RouteType::Llm | RouteType::Research => RouteDecision::simple(
                &route_code,
                source,
                Intent::Think {
                    route: rule.config.route,
                    fallback: None,
                },
            ),
            RouteType::Memory => {
                let op = rule.config.memory.unwrap_or(MemoryOp::Recall);
                RouteDecision::simple(
                    &route_code,
                    source,
                    Intent::Memory {
                        op,
                        subject: topic.clone(),
                    },
                )
            }
            RouteType::Command | RouteType::State => {
                self.command_decision(rule, &route_code, &captures)
            }
        };
        decision.topic = topic;
        Some((priority, decision))
    }

    fn unmatched(&self, state: &str) -> RouteDecision {
        match self.state(state).map(|s| s.unmatched) {
            Some(Unmatched::Chat) => RouteDecision::simple(
                "intent.chat",
                None,
                Intent::Think {
                    route: RouteType::Chat,
                    fallback: Some(self.chat_reply.clone()),
                },
            ),
            _ => RouteDecision::simple(
                "intent.unmatched",
                None,
                Intent::Reply(self.fallback_reply.clone()),
            ),
        }
    }

    fn command_decision(
        &self,
        rule: &CompiledRule,
        route_code: &str,
        captures: &BTreeMap<String, String>,
    ) -> RouteDecision {
        let source = Some(rule.config.name.clone());
        let built = match &rule.target {
            Target::Command(id) => self
                .resolve_commands(id, captures.clone(), source.clone(), rule.level)
                .map(|c| CommandChain::new(c, None, None))
                .map_err(|problem| (id.clone(), problem)),
            Target::Macro(name) => self.resolve_macro(name, source.clone(), rule.level),
            Target::None => unreachable!("command routes have a target (checked at compile)"),
        };
        self.chain_decision(route_code, source, built, captures)
    }

    /// A decision to run `built`, or to refuse it naming the problem.
    fn chain_decision(
        &self,
        route_code: &str,
        source: Option<String>,
        built: Result<CommandChain, (String, ParamProblem)>,
        captures: &BTreeMap<String, String>,
    ) -> RouteDecision {
        match built {
            Ok(chain) => RouteDecision {
                route_code: route_code.into(),
                source_rule: source,
                topic: None,
                auth_level: chain.chain_level,
                macro_name: chain.macro_name.clone(),
                command_id: chain.command_id().map(str::to_owned),
                params: match chain.commands.as_slice() {
                    [one] => json!(one.params),
                    _ => json!({}),
                },
                intent: Intent::Chain(chain),
                layer: Layer::Rule,
                understood: None,
                confidence: 1.0,
                choices: Vec::new(),
                near: None,
            },
            Err((command_id, problem)) => RouteDecision {
                route_code: route_code.into(),
                source_rule: source,
                topic: None,
                auth_level: self
                    .commands
                    .get(&command_id)
                    .map_or(AuthLevel::RUN, |c| c.level),
                macro_name: None,
                command_id: Some(command_id.clone()),
                params: json!(captures),
                intent: Intent::Invalid {
                    command_id,
                    problem,
                },
                layer: Layer::Rule,
                understood: None,
                confidence: 1.0,
                choices: Vec::new(),
                near: None,
            },
        }
    }

    /// The command with typed, checked parameters, or one such command per
    /// device when a device parameter says "all" ("lock all the doors": each
    /// of the home's locks, in the order the home lists them).
    pub fn resolve_commands(
        &self,
        id: &str,
        raw: BTreeMap<String, String>,
        source_rule: Option<String>,
        raise_to: Option<AuthLevel>,
    ) -> Result<Vec<Command>, ParamProblem> {
        let every = self.commands.get(id).and_then(|spec| {
            spec.config.params.iter().find(|(name, p)| {
                p.kind == crate::config::ParamKind::Device
                    && raw.get(*name).is_some_and(|v| normalize(v) == "all")
            })
        });
        let devices: Vec<&str> = every.map_or_else(Vec::new, |(_, param)| {
            self.home
                .devices
                .iter()
                .filter(|d| param.values.is_empty() || param.values.contains(&d.domain))
                .map(|d| d.name.as_str())
                .collect()
        });
        let Some((name, _)) = every.filter(|_| !devices.is_empty()) else {
            return Ok(vec![self.resolve_command(
                id,
                raw,
                source_rule,
                raise_to,
            )?]);
        };
        devices
            .into_iter()
            .map(|device| {
                let mut one = raw.clone();
                one.insert(name.clone(), device.to_owned());
                self.resolve_command(id, one, source_rule.clone(), raise_to)
            })
            .collect()
    }

    /// A command with typed, checked parameters.
    pub fn resolve_command(
        &self,
        id: &str,
        raw: BTreeMap<String, String>,
        source_rule: Option<String>,
        raise_to: Option<AuthLevel>,
    ) -> Result<Command, ParamProblem> {
        let Some(spec) = self.commands.get(id) else {
            return Err(ParamProblem {
                param: "command".into(),
                code: "validator.unknown_command",
                message: format!("there is no command {id} any more"),
            });
        };
        let raw: BTreeMap<String, String> = raw
            .into_iter()
            .filter(|(k, _)| spec.config.params.contains_key(k))
            .collect();
        let params = parse_params(&spec.config.params, &raw, self.known())?;
        Ok(Command {
            command_id: id.to_owned(),
            auth_level: raise_to.map_or(spec.level, |r| r.max(spec.level)),
            summary: render(&spec.config.summary, &params),
            params,
            raw_params: raw,
            source_rule,
            decision: None,
        })
    }

    fn resolve_macro(
        &self,
        name: &str,
        source_rule: Option<String>,
        raise_to: Option<AuthLevel>,
    ) -> Result<CommandChain, (String, ParamProblem)> {
        let m = &self.macros[name];
        let commands = m
            .steps
            .iter()
            .map(|step| {
                self.resolve_command(
                    &step.command,
                    step.params.clone(),
                    source_rule.clone(),
                    raise_to,
                )
                .map_err(|p| (step.command.clone(), p))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CommandChain::new(
            commands,
            Some(name.to_owned()),
            Some(m.summary.clone()),
        ))
    }

    /// Rebuilds a stored chain against the configuration in force now; its
    /// level never drops below what was asked for.
    pub fn rebuild(&self, stored: &StoredChain) -> Result<CommandChain, ParamProblem> {
        let commands = stored
            .steps
            .iter()
            .map(|s| {
                self.resolve_command(
                    &s.command_id,
                    s.raw_params.clone(),
                    s.source_rule.clone(),
                    None,
                )
                .map(|mut c| {
                    c.decision = s.decision.clone();
                    c
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut chain = CommandChain::new(
            commands,
            stored.macro_name.clone(),
            Some(stored.summary.clone()),
        );
        chain.chain_id = stored.chain_id.clone();
        chain.chain_level = chain.chain_level.max(stored.chain_level);
        Ok(chain)
    }

    fn describe(&self, rule: &CompiledRule, text: &str) -> String {
        match &rule.target {
            Target::Command(id) => self
                .resolve_command(id, captures(&rule.regex, text), None, None)
                .map(|c| c.summary)
                .unwrap_or_else(|_| id.clone()),
            Target::Macro(name) => self.macros[name].summary.clone(),
            Target::None => rule.config.name.clone(),
        }
    }
}

fn same_target(a: &CompiledRule, b: &CompiledRule) -> bool {
    match (&a.target, &b.target) {
        (Target::Command(x), Target::Command(y)) | (Target::Macro(x), Target::Macro(y)) => x == y,
        (Target::None, Target::None) => a.config.route == b.config.route,
        _ => false,
    }
}

fn captures(regex: &Regex, text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(caps) = regex.captures(text) {
        for name in regex.capture_names().flatten() {
            if let Some(m) = caps.name(name) {
                out.insert(name.to_owned(), m.as_str().trim().to_owned());
            }
        }
    }
    out
}

fn compile_commands(
    config: &Config,
    known: Known<'_>,
) -> Result<BTreeMap<String, CommandSpec>, ConfigError> {
    let mut out = BTreeMap::new();
    for (id, c) in &config.commands {
        let problem = |problem: String| ConfigError::Item {
            what: "command",
            name: id.clone(),
            problem,
        };
        let level = AuthLevel::new(c.auth_level)
            .ok_or_else(|| problem(format!("auth_level {} is outside 1–4", c.auth_level)))?;
        tools::check_executor(id, c, &config.executors).map_err(problem)?;
        for (name, p) in &c.params {
            if p.kind == ParamKind::Enum && p.values.is_empty() {
                return Err(problem(format!(
                    "parameter {name} is an enum without `values`"
                )));
            }
            if let Some(default) = &p.default {
                let spec = BTreeMap::from([(name.clone(), p.clone())]);
                let raw = BTreeMap::from([(name.clone(), default.clone())]);
                parse_params(&spec, &raw, known)
                    .map_err(|e| problem(format!("default of {name}: {}", e.message)))?;
            }
        }
        if level.undoable() && c.undo.is_none() {
            return Err(problem(
                "a level-2 command needs `undo = { command = ..., params = ... }`".into(),
            ));
        }
        out.insert(
            id.clone(),
            CommandSpec {
                id: id.clone(),
                level,
                config: c.clone(),
            },
        );
    }
    for (id, spec) in &out {
        let named = [
            ("undo", &spec.config.undo),
            ("negation", &spec.config.negation),
        ];
        for (key, other) in named {
            let Some(other) = other else { continue };
            let target = out.get(&other.command).ok_or_else(|| ConfigError::Item {
                what: "command",
                name: id.clone(),
                problem: format!(
                    "{key} names command {:?}, which is not defined",
                    other.command
                ),
            })?;
            for name in other.params.keys() {
                if !target.config.params.contains_key(name) {
                    return Err(ConfigError::Item {
                        what: "command",
                        name: id.clone(),
                        problem: format!(
                            "{key} passes `{name}`, which is not a parameter of {}",
                            other.command
                        ),
                    });
                }
            }
        }
    }
    Ok(out)
}

fn check_macro(
    name: &str,
    m: &MacroConfig,
    commands: &BTreeMap<String, CommandSpec>,
    known: Known<'_>,
) -> Result<(), ConfigError> {
    let problem = |problem: String| ConfigError::Item {
        what: "macro",
        name: name.to_owned(),
        problem,
    };
    if m.steps.is_empty() {
        return Err(problem("has no steps".into()));
    }
    for (i, step) in m.steps.iter().enumerate() {
        let spec = commands.get(&step.command).ok_or_else(|| {
            problem(format!(
                "step {} names command {:?}, which is not defined under [commands]",
                i + 1,
                step.command
            ))
        })?;
        parse_params(&spec.config.params, &step.params, known)
            .map_err(|e| problem(format!("step {} ({}): {}", i + 1, step.command, e.message)))?;
    }
    Ok(())
}

pub use crate::understand::lowered as normalize;

/// What UIs show of a state.
#[derive(Clone, Debug, Serialize)]
pub struct StateView<'a> {
    pub name: &'a str,
    #[serde(flatten)]
    pub config: &'a StateConfig,
}

/// Every rule checked and compiled, each name once, and the set that
/// finds which match.
fn compile_rules(
    config: &Config,
    commands: &BTreeMap<String, CommandSpec>,
) -> Result<(Vec<CompiledRule>, RegexSet), ConfigError> {
    let mut seen = HashSet::new();
    let mut rules = Vec::with_capacity(config.rules.len());
    for rule in &config.rules {
        if rule.name.trim().is_empty() {
            return Err(ConfigError::Value {
                key: "rules.name".into(),
                problem: "a rule has an empty name".into(),
            });
        }
        if !seen.insert(rule.name.as_str()) {
            return Err(ConfigError::Rule {
                rule: rule.name.clone(),
                problem: "the name is used by another rule; give each rule its own name".into(),
            });
        }
        rules.push(compile_rule(rule, commands, &config.macros)?);
    }
    let set = RegexSet::new(rules.iter().map(|r| r.config.pattern.as_str())).map_err(|e| {
        ConfigError::Value {
            key: "rules".into(),
            problem: e.to_string(),
        }
    })?;
    Ok((rules, set))
}

/// The meaning layer over the language's examples, with its opposite
/// words and the words that say each state.
fn meaning_layer(
    embedder: Arc<Embedder>,
    u: &crate::config::UnderstandConfig,
    lang: Lang,
    words: &crate::config::LanguageConfig,
    home: &Home,
) -> Semantic {
    Semantic::new(
        embedder,
        u.semantic.clone(),
        lang,
        &words.examples,
        words.generic.clone(),
        home,
    )
    .with_opposites(
        words
            .opposites
            .iter()
            .map(|[a, b]| [normalize(a), normalize(b)]),
    )
    .with_state_opposites((words.state_opposites.iter()).map(|[a, b]| [normalize(a), normalize(b)]))
    .with_states(&words.state_words)
    .with_timer_names(crate::understand::names::TimerNames::compile(words, lang))
    .with_all_words(words.all_words.iter().map(|w| normalize(w)).collect())
    .with_no_things(
        words.refer_to_item.iter().map(|w| normalize(w)).collect(),
        words.indefinites.iter().map(|w| normalize(w)).collect(),
    )
    .with_directions(
        words
            .directions
            .iter()
            .map(|sides| {
                sides
                    .clone()
                    .map(|side| side.iter().map(|w| normalize(w)).collect())
            })
            .collect(),
    )
}

/// The sentence library with the language's own words, expansion rules and
/// sentences added (`[understand.languages.LANG]`).
fn taught(
    mut library: Library,
    words: &crate::config::LanguageConfig,
    lang: Lang,
) -> Result<Library, ConfigError> {
    for w in &words.skip_words {
        library.add_skip_word(w);
    }
    library
        .set_rules(words.rules.iter().map(|(n, b)| (n.as_str(), b.as_str())))
        .map_err(|(name, e)| ConfigError::Value {
            key: format!("understand.languages.{}.rules.{name}", lang.code()),
            problem: e.to_string(),
        })?;
    for s in &words.sentences {
        library
            .add_sentences(
                &s.intent,
                &s.sentences,
                &s.slots,
                s.by_sound,
                s.speakers_room,
            )
            .map_err(|e| ConfigError::Value {
                key: format!(
                    "understand.languages.{}.sentences ({})",
                    lang.code(),
                    s.intent
                ),
                problem: e.to_string(),
            })?;
    }
    Ok(library)
}

/// One rule checked and compiled: its level, its pattern, what its
/// captures feed, and what it routes to.
fn compile_rule(
    rule: &crate::config::RuleConfig,
    commands: &BTreeMap<String, CommandSpec>,
    macros: &BTreeMap<String, MacroConfig>,
) -> Result<CompiledRule, ConfigError> {
    let problem = |problem: String| ConfigError::Rule {
        rule: rule.name.clone(),
        problem,
    };
    let level = rule
        .auth_level
        .map(|l| AuthLevel::new(l).ok_or_else(|| problem(format!("auth_level {l} is outside 1–4"))))
        .transpose()?;
    if rule.route == RouteType::Feedback && rule.feedback.is_none() {
        return Err(problem(
            "a feedback rule needs feedback = \"good\" or \"bad\"".into(),
        ));
    }
    let regex = Regex::new(&rule.pattern).map_err(|e| problem(format!("invalid pattern: {e}")))?;
    let captures: BTreeSet<&str> = regex.capture_names().flatten().collect();
    if let Some(topic) = &rule.topic
        && !captures.contains(topic.as_str())
    {
        return Err(problem(format!(
            "topic names the capture {topic:?}, which the pattern does not have"
        )));
    }
    match (rule.route, rule.memory) {
        (RouteType::Memory, None) => {
            return Err(problem(
                "a memory route needs `memory` = \"remember\", \"forget\", \"pin\", \"unpin\" or \"recall\"".into(),
            ));
        }
        (RouteType::Memory, Some(op)) if op != MemoryOp::Recall && rule.topic.is_none() => {
            return Err(problem(format!(
                "memory = {:?} needs `topic`: the capture that says what to {}",
                op.as_str(),
                op.as_str()
            )));
        }
        (route, Some(_)) if route != RouteType::Memory => {
            return Err(problem(format!(
                "`memory` belongs on memory routes, not on route {:?}",
                route.as_str()
            )));
        }
        _ => {}
    }
    let target = rule_target(rule, &captures, commands, macros)?;
    Ok(CompiledRule {
        config: rule.clone(),
        regex,
        target,
        level,
    })
}

/// What a rule routes to: a command whose needed parameters its pattern
/// captures (and no capture it lacks), a macro, or nothing.
fn rule_target(
    rule: &crate::config::RuleConfig,
    captures: &BTreeSet<&str>,
    commands: &BTreeMap<String, CommandSpec>,
    macros: &BTreeMap<String, MacroConfig>,
) -> Result<Target, ConfigError> {
    let problem = |problem: String| ConfigError::Rule {
        rule: rule.name.clone(),
        problem,
    };
    Ok(match (rule.route, &rule.command, &rule.macro_name) {
        (RouteType::Command | RouteType::State, Some(_), Some(_)) => {
            return Err(problem("name a command or a macro, not both".into()));
        }
        (RouteType::Command | RouteType::State, Some(id), None) => {
            let spec = commands.get(id).ok_or_else(|| {
                problem(format!("command {id:?} is not defined under [commands]"))
            })?;
            for (name, param) in &spec.config.params {
                if param.default.is_none() && !param.optional && !captures.contains(name.as_str()) {
                    return Err(problem(format!(
                        "the pattern never captures `{name}`, which command {id} needs; add (?P<{name}>...) or a default"
                    )));
                }
            }
            for capture in captures {
                if !spec.config.params.contains_key(*capture)
                    && rule.topic.as_deref() != Some(*capture)
                {
                    return Err(problem(format!(
                        "the pattern captures `{capture}`, which is not a parameter of command {id}"
                    )));
                }
            }
            Target::Command(id.clone())
        }
        (RouteType::Command | RouteType::State, None, Some(name)) => {
            if !macros.contains_key(name) {
                return Err(problem(format!(
                    "macro {name:?} is not defined under [macros]"
                )));
            }
            Target::Macro(name.clone())
        }
        (RouteType::Command | RouteType::State, None, None) => {
            return Err(problem(format!(
                "route {:?} needs `command` or `macro`",
                rule.route.as_str()
            )));
        }
        (_, None, None) => Target::None,
        (route, _, _) => {
            return Err(problem(format!(
                "route {:?} takes no command or macro",
                route.as_str()
            )));
        }
    })
}

#[cfg(test)]
mod tests;
