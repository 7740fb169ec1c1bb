//! Questions asked of the home: whether a sentence asks whether something
//! is or was so ("did I lock the back door", "is the garage open"), asked
//! indirectly after an asking word and "if" ("can you check if the garage
//! is open") or without it ("check the back door is locked"), or said as
//! it is with a tag that asks ("the back door is locked, no?"). The words
//! are the language's (`question_words`, `asking_words`, `whether_words`,
//! `polite_asks`, `checking_words`, `clause_leads`, `question_tags`).

use super::*;

impl Router {
    /// Whether the sentence asks whether something is or was so: it opens
    /// with words that ask ("did I lock the back door", "is the garage door
    /// open"; not "is it possible to…", a request asked politely), or asks
    /// it indirectly ("I wonder whether the lights have been switched off";
    /// not "… if you could turn on the lights").
    pub fn asks_whether(&self, text: &str) -> bool {
        let padded = format!("{text} ");
        self.words
            .question_words
            .iter()
            .any(|q| padded.starts_with(&format!("{q} ")))
            || self
                .whether_asked(text)
                .is_some_and(|(clause, polite)| !polite && !self.says_more(&clause))
    }

    /// Whether what an indirect question asks goes on to more ("check if
    /// the garage is open and close it"): one of `split_words` in it.
    pub(in crate::router) fn says_more(&self, clause: &str) -> bool {
        let padded = format!(" {clause} ");
        (self.words.split_words.iter()).any(|w| padded.contains(&format!(" {w} ")))
    }

    /// What an indirect question asks after "if" or "whether" said right
    /// after one of `asking_words` ("can you check if the garage is open":
    /// "the garage is open"), and whether it asks for something to be done
    /// ("… if you could turn on the lights").
    pub(in crate::router) fn whether_asked(&self, text: &str) -> Option<(String, bool)> {
        let padded = padded_words(text);
        let w = &self.words;
        let (at, joiner) = match (w.whether_words.iter())
            .find_map(|x| padded.find(&format!(" {x} ")).map(|at| (at, x.len() + 2)))
        {
            Some(found) => found,
            None => self.how_it_is_asked(&padded)?,
        };
        let before = &padded[..at];
        if !(w.asking_words.iter()).any(|x| before.ends_with(&format!(" {x}"))) {
            return None;
        }
        let clause = padded[at + joiner..].trim();
        let polite = (self.words.polite_asks.iter()).any(|p| {
            clause
                .strip_prefix(p.as_str())
                .is_some_and(|r| r.starts_with(' '))
        });
        Some((clause.to_owned(), polite))
    }

    /// Where a clause that says how a thing is (a determiner, then a verb
    /// of being) starts right after one of `checking_words` (not "make
    /// sure", which asks for it), one of `clause_leads` ("that") allowed
    /// between ("check the back door is locked", "confirm that the garage
    /// is shut"), and how long the words before it are from there.
    fn how_it_is_asked(&self, padded: &str) -> Option<(usize, usize)> {
        let w = &self.words;
        w.checking_words.iter().find_map(|asking| {
            let at = padded.find(&format!(" {asking} "))? + asking.len() + 1;
            let mut clause = &padded[at + 1..];
            let mut joiner = 1;
            if let Some(rest) = (w.clause_leads.iter())
                .find_map(|lead| clause.strip_prefix(lead.as_str())?.strip_prefix(' '))
            {
                joiner += clause.len() - rest.len();
                clause = rest;
            }
            let first = clause.split(' ').next()?;
            let being = clause.split(' ').any(|x| w.is_being(x));
            (w.determiners.iter().any(|d| d == first) && being).then_some((at, joiner))
        })
    }

    /// A sentence that says how a thing is and asks with a tag after it
    /// (`question_tags`: "the back door is locked, no?", "I locked the side
    /// door, right?"), as the question it asks ("is the back door locked",
    /// "did I lock the side door").
    pub(in crate::router) fn tag_asked(&self, text: &str) -> Option<String> {
        let w = &self.words;
        // The question mark is taken off before the layers read a sentence.
        let said = text.trim_end().trim_end_matches('?').trim_end();
        let clause = (w.question_tags.iter()).find_map(|tag| {
            said.strip_suffix(tag.as_str())?
                .trim_end()
                .strip_suffix(',')
        })?;
        let (asked, polite) = as_questions(clause.trim(), w);
        if polite {
            return None;
        }
        asked.into_iter().next()
    }
}

/// What a clause after "if" or "whether" asks, as questions to try in
/// turn, and whether it asks for something to be done ("you could turn on
/// the lights" is "turn on the lights"): "the garage is open" is "is the
/// garage open"; "I left the porch light on" is "did I leave the porch
/// light on"; "we locked the door" is "did we lock …" (or "locke …": the
/// one a layer understands is taken).
pub(in crate::router) fn as_questions(clause: &str, words: &Words) -> (Vec<String>, bool) {
    if let Some(rest) =
        (words.polite_asks.iter()).find_map(|p| clause.strip_prefix(p.as_str())?.strip_prefix(' '))
    {
        return (vec![rest.to_owned()], true);
    }
    let mut perfect_said = format!(" {clause} ");
    for (perfect, state) in &words.perfect_forms {
        perfect_said = perfect_said.replace(&format!(" {perfect} "), &format!(" {state} "));
    }
    // "The side door's unlocked": its verb of being said in full, where
    // none is said apart.
    let apart = |w: &str| words.be_verbs.iter().any(|b| b == w);
    if !perfect_said.split(' ').any(apart) {
        let contracted = perfect_said.split(' ').find_map(|w| {
            let (ending, full) =
                (words.be_in_full.iter()).find(|(ending, _)| w.ends_with(ending.as_str()))?;
            let stem = w.strip_suffix(ending.as_str()).filter(|s| !s.is_empty())?;
            Some((w.to_owned(), format!("{stem} {full}")))
        });
        if let Some((word, in_full)) = contracted {
            perfect_said = perfect_said.replacen(&format!(" {word} "), &format!(" {in_full} "), 1);
        }
    }
    let said: Vec<&str> = perfect_said.trim().split(' ').collect();
    let mut asked = Vec::new();
    if let [subject, verb, rest @ ..] = said.as_slice()
        && words.did_subjects.iter().any(|s| s == subject)
    {
        let rest = rest.join(" ");
        // A past tense asked with "did": the irregular ones the pack
        // names, else a past ending taken off ("locked": "lock", "locke").
        let bases: Vec<String> = match words.past_forms.get(*verb) {
            Some(base) => vec![base.clone()],
            // The ending's first letter kept too ("locke"): the one a layer
            // understands is taken.
            None => (words.past_endings.iter())
                .filter_map(|e| Some((verb.strip_suffix(e.as_str())?, e.chars().next()?)))
                .flat_map(|(stem, first)| [stem.to_owned(), format!("{stem}{first}")])
                .collect(),
        };
        for base in bases {
            let did = &words.did_word;
            asked.push(format!("{did} {subject} {base} {rest}").trim().to_owned());
        }
    }
    // "The garage is open": the verb first.
    if let Some(at) = said
        .iter()
        .position(|w| words.be_verbs.iter().any(|b| b == w))
        .filter(|&at| at > 0)
    {
        let mut q = vec![said[at]];
        q.extend(&said[..at]);
        q.extend(&said[at + 1..]);
        asked.push(q.join(" "));
    }
    (asked, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_past_said_is_asked_with_did_whatever_endings_the_pack_gives() {
        let words = Words {
            did_subjects: vec!["i".into()],
            did_word: "did".into(),
            past_forms: [("left".to_string(), "leave".to_string())].into(),
            // An empty ending, and one that opens with a letter of two bytes,
            // are a user's to give: neither may panic.
            past_endings: vec!["ed".into(), String::new(), "é".into()],
            be_verbs: vec!["is".into()],
            ..Words::default()
        };
        let (asked, polite) = as_questions("i locked the back door", &words);
        assert!(!polite);
        assert!(
            asked.contains(&"did i lock the back door".to_string()),
            "{asked:?}"
        );
        let (asked, _) = as_questions("i left the porch light on", &words);
        assert_eq!(asked, ["did i leave the porch light on"]);
        let (asked, _) = as_questions("the garage is open", &words);
        assert_eq!(asked, ["is the garage open"]);
        as_questions("i fermé the door", &words);
    }
}
