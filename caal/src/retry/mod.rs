//! The incoherent-input filter that runs before anything is routed or sent
//! to a model: input that carries no request (nothing, noise, stutters, an
//! absurd length) is answered with a request to repeat. Model output has its
//! validators in `llm::validate`, and the retry policy is in `round::think`.

use serde::Serialize;

/// Why an input is not worth routing, as a `validator.*` code and a reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Incoherence {
    pub code: &'static str,
    pub message: &'static str,
}

/// What the assistant says back to input it could not make sense of.
pub const REPEAT_PLEASE: &str = "Sorry, I didn't catch that. Could you say it again?";

/// Noise markers speech-to-text writes for sounds that are not words.
const NOISE: &[&str] = &[
    "blank_audio",
    "blank audio",
    "silence",
    "noise",
    "music",
    "inaudible",
    "applause",
    "laughter",
    "laughs",
    "coughs",
    "cough",
    "sighs",
    "breathing",
    "background noise",
    "static",
    "no speech",
];

/// Checks normalised input: nothing but punctuation, only noise markers like
/// `[BLANK_AUDIO]` or `(coughs)`, one character held (`aaaaaa`), or one word
/// said over and over.
pub fn incoherence(text: &str) -> Option<Incoherence> {
    let trimmed = text.trim();
    if !trimmed.chars().any(char::is_alphanumeric) {
        return Some(Incoherence {
            code: "validator.empty",
            message: "the input has no words",
        });
    }
    // Strip bracketed markers; if what they held was all noise and nothing
    // else is left, it was noise.
    let mut rest = String::with_capacity(trimmed.len());
    let mut markers = 0;
    let mut chars = trimmed.chars().peekable();
    while let Some(c) = chars.next() {
        let close = match c {
            '[' => ']',
            '(' => ')',
            '*' => '*',
            '♪' => '♪',
            _ => {
                rest.push(c);
                continue;
            }
        };
        let inner: String = chars.by_ref().take_while(|x| *x != close).collect();
        let inner = inner.trim().to_lowercase();
        if c == '♪' || NOISE.iter().any(|n| inner == *n || inner.starts_with(n)) {
            markers += 1;
        } else {
            rest.push_str(&inner);
        }
    }
    if markers > 0 && !rest.chars().any(char::is_alphanumeric) {
        return Some(Incoherence {
            code: "validator.noise",
            message: "the transcript holds only noise markers",
        });
    }
    let letters: Vec<char> = rest
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    if letters.len() >= 4 && letters.iter().all(|c| *c == letters[0]) {
        return Some(Incoherence {
            code: "validator.repetition",
            message: "one character, repeated",
        });
    }
    let words: Vec<String> = rest.split_whitespace().map(str::to_lowercase).collect();
    if words.len() >= 5 && words.iter().all(|w| *w == words[0]) {
        return Some(Incoherence {
            code: "validator.repetition",
            message: "one word, repeated",
        });
    }
    None
}

/// Input so long that nobody said it to an assistant (a pasted book, a
/// runaway transcript): over ten times the sanitizer's length guard.
pub fn absurd_length(chars: usize, max_input_chars: usize) -> Option<Incoherence> {
    (chars > max_input_chars.saturating_mul(10)).then_some(Incoherence {
        code: "validator.too_long",
        message: "the input is far longer than anything said to an assistant",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_lengths_are_ten_times_the_guard() {
        assert_eq!(absurd_length(20_000, 2_000), None);
        assert_eq!(
            absurd_length(20_001, 2_000).map(|i| i.code),
            Some("validator.too_long")
        );
    }

    #[test]
    fn nothing_noise_and_stutters_are_incoherent() {
        for (text, code) in [
            ("...", "validator.empty"),
            ("  ?! ", "validator.empty"),
            ("[BLANK_AUDIO]", "validator.noise"),
            ("[BLANK_AUDIO] [BLANK_AUDIO]", "validator.noise"),
            ("(coughs)", "validator.noise"),
            ("*sighs*", "validator.noise"),
            ("♪ la la ♪", "validator.noise"),
            ("[Music]", "validator.noise"),
            ("aaaaaaaa", "validator.repetition"),
            ("hhhh hhh", "validator.repetition"),
            ("the the the the the", "validator.repetition"),
        ] {
            assert_eq!(incoherence(text).map(|i| i.code), Some(code), "{text}");
        }
    }

    #[test]
    fn real_requests_are_not() {
        for text in [
            "turn on the kitchen lights",
            "yes",
            "no",
            "no no no",
            "[BLANK_AUDIO] turn on the lights",
            "set a timer for 10 minutes",
            "add eggs (the brown ones) to the shopping list",
            "ok",
            "42",
        ] {
            assert_eq!(incoherence(text), None, "{text}");
        }
    }
}
