//! The words the sentences know: the library's templates, the home's
//! names, the language's words and examples, the words numbers are said in. A word outside it is one the
//! heard-as layer may read as a known word near it; a form of a verb is read
//! as the verb it holds (`opening`).

use super::*;

pub(in crate::router) fn vocabulary_of(router: &Router) -> Vocabulary {
    let words = vocabulary_words(router);
    words
        .into_iter()
        .map(|w| {
            let sound = sound_spelling(&w);
            (w, sound)
        })
        .collect()
}

fn vocabulary_words(router: &Router) -> std::collections::HashSet<String> {
    let mut out = router.library.vocabulary();
    let mut add = |text: &str| {
        for w in normalize(text).split(' ') {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
            if !w.is_empty() && !w.contains('{') {
                out.insert(w.to_owned());
            }
        }
    };
    for a in &router.home.areas {
        add(&a.name);
        a.aliases.iter().for_each(|x| add(x));
    }
    for d in &router.home.devices {
        add(&d.name);
        d.aliases.iter().for_each(|x| add(x));
    }
    for list in [
        &router.words.example_sentences,
        &router.words.split_words,
        &router.words.negations,
        &router.words.negation_idioms,
        &router.words.narrative_words,
        &router.words.request_verbs,
        &router.words.refer_to_thing,
        &router.words.refer_to_place,
        &router.words.item_leads,
        &router.words.remember_leads,
    ] {
        list.iter().for_each(|x| add(x));
    }
    // The words numbers and lengths of time are said in ("fiften minutes").
    out.extend(crate::understand::numbers::known_words(router.library.lang).map(str::to_owned));
    out
}
