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
        let (asked, polite) = super::clause::as_questions(clause.trim(), w);
        if polite {
            return None;
        }
        asked.into_iter().next()
    }
}
