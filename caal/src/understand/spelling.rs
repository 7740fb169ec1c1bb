//! How near two words are as typed or as heard: letters (a swap of two
//! is one slip), sounds ("mac" and "back"), the known words nearest a
//! word. Pure; the router's slip and mishearing layers use it.

use std::collections::HashMap;

/// The words a router knows (its sentences', its home's names', its
/// examples' and its word lists'), each with its spelling as it sounds
/// (`sound_spelling`), made once: spelling the whole vocabulary again for
/// every unknown word was most of what reading a mishearing cost.
pub type Vocabulary = HashMap<String, String>;

/// The words of `vocabulary` nearest `w` in spelling (one edit; two from
/// eight letters), all those as near; none for a word shorter than
/// `shortest` letters, or one with digits. Known words of fewer than
/// `shortest` letters are never given either.
pub fn nearest_words(vocabulary: &Vocabulary, w: &str, shortest: usize) -> Vec<String> {
    let len = w.chars().count();
    if len < shortest || !w.chars().all(|c| c.is_alphabetic() || c == '\'') {
        return Vec::new();
    }
    let most = if len >= 8 { 2 } else { 1 };
    let mut best: Vec<&str> = Vec::new();
    let mut best_d = usize::MAX;
    let sound = sound_spelling(w);
    for (v, v_sound) in vocabulary {
        if v.len().abs_diff(w.len()) > most || v.chars().count() < shortest.max(3) {
            continue;
        }
        let Some(d) = heard_within((w, &sound), (v, v_sound), most) else {
            continue;
        };
        // Distance 0 is a word spelled otherwise that sounds the same
        // ("dinning" as "dining", a letter doubled): the nearest there is.
        if *v == w || d > best_d {
            continue;
        }
        if d < best_d {
            best.clear();
            best_d = d;
        }
        best.push(v);
    }
    // As near, the likelier slip first: two letters swapped, then a key
    // struck beside the one meant ("tne" is "ten" before "one").
    best.sort_unstable_by_key(|v| (slip_rank(w, v), *v));
    best.into_iter().map(str::to_owned).collect()
}

/// How likely a slip of the same length turns `meant` into `typed`: 0 two
/// neighbouring letters swapped, 1 one key beside the one meant (QWERTY),
/// 2 any other.
fn slip_rank(typed: &str, meant: &str) -> u8 {
    const ROWS: [&str; 3] = ["qwertyuiop", "asdfghjkl", "zxcvbnm"];
    let key = |c: char| {
        ROWS.iter()
            .enumerate()
            .find_map(|(r, row)| row.find(c).map(|i| (r as i32, i as i32)))
    };
    let (t, m): (Vec<char>, Vec<char>) = (typed.chars().collect(), meant.chars().collect());
    if t.len() != m.len() {
        return 2;
    }
    let differ: Vec<usize> = (0..t.len()).filter(|&i| t[i] != m[i]).collect();
    match differ.as_slice() {
        [a, b] if *b == a + 1 && t[*a] == m[*b] && t[*b] == m[*a] => 0,
        [a] => match (key(t[*a]), key(m[*a])) {
            // Rows are offset by half a key: (r, i) touches (r±1, i) and (r+1, i-1), (r-1, i+1).
            (Some((r1, i1)), Some((r2, i2)))
                if (r1 == r2 && (i1 - i2).abs() == 1)
                    || (r2 - r1 == 1 && (i1 == i2 || i1 - 1 == i2))
                    || (r1 - r2 == 1 && (i2 == i1 || i2 - 1 == i1)) =>
            {
                1
            }
            _ => 2,
        },
        _ => 2,
    }
}

/// A lower bound of the edit distance between two words: how many letters
/// one has that the other lacks, the larger way round (each edit changes
/// that by one at most). Counted for ASCII letters; 0 (no bound) otherwise.
/// Most of the vocabulary is this far from a word, and counting is cheaper
/// than the distance itself, which reading a mishearing computed for every
/// known word of about the same length.
pub fn bag_distance(a: &str, b: &str) -> usize {
    if !a.is_ascii() || !b.is_ascii() {
        return 0;
    }
    let mut count = [0i16; 128];
    for c in a.bytes() {
        count[usize::from(c)] += 1;
    }
    for c in b.bytes() {
        count[usize::from(c)] -= 1;
    }
    let (more, fewer) = count.iter().fold((0usize, 0usize), |(m, f), &n| {
        if n > 0 {
            (m + n as usize, f)
        } else {
            (m, f + n.unsigned_abs() as usize)
        }
    });
    more.max(fewer)
}

/// A word spelled as it sounds, for comparing what was heard with what is
/// known: "ck", a hard "c" (not in "ch") and "q" as "k", "ph" as "f", doubled letters
/// once ("mac" and "back" are then one sound apart, as they are said).
pub fn sound_spelling(w: &str) -> String {
    let chars: Vec<char> = w.chars().collect();
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        let (sound, skip) = match (c, next) {
            ('c', Some('k')) => ('k', 2),
            ('p', Some('h')) => ('f', 2),
            ('c', Some('e' | 'i' | 'y')) => ('s', 1),
            ('c', Some('h')) => ('c', 1),
            ('c' | 'q', _) => ('k', 1),
            _ => (c, 1),
        };
        if !out.ends_with(sound) {
            out.push(sound);
        }
        i += skip;
    }
    out
}

/// How far apart two words are, in letters (a swap of two is one edit) or
/// in sound, whichever is nearer.
pub fn heard_distance(a: &str, b: &str) -> usize {
    let (sa, sb) = (sound_spelling(a), sound_spelling(b));
    heard_within((a, &sa), (b, &sb), usize::MAX).unwrap_or(usize::MAX)
}

/// `heard_distance` of two words given with their sound spellings, if it
/// is at most `most`: the letters they do not share rule most pairs out
/// before either distance is computed.
pub fn heard_within(
    (a, a_sound): (&str, &str),
    (b, b_sound): (&str, &str),
    most: usize,
) -> Option<usize> {
    if bag_distance(a, b) > most && bag_distance(a_sound, b_sound) > most {
        return None;
    }
    // Letters: two swapped are one slip ("mintues", "lgihts"; optimal
    // string alignment), as typed and as written out; sounds: edits.
    // Levenshtein first: it is the cheaper, and a swap saves one edit at
    // most per two, so only a pair within twice the bound can gain by it
    // (computing the alignment for every near pair quadrupled talk's time).
    let letters = strsim::levenshtein(a, b);
    let letters = if letters > most && letters <= 2 * most {
        strsim::osa_distance(a, b)
    } else {
        letters
    };
    let d = letters.min(strsim::levenshtein(a_sound, b_sound));
    (d <= most).then_some(d)
}

/// Short known words one edit from `rest` ("un": on, in, an), a vowel for
/// a vowel first (the sound most often misheard), at most three.
pub fn sounds_near(vocabulary: &Vocabulary, rest: &str) -> Vec<String> {
    let vowel = |c: char| "aeiouy".contains(c);
    let mut near: Vec<(bool, &str)> = vocabulary
        .keys()
        .filter(|v| v.len().abs_diff(rest.len()) <= 1 && v.len() >= 2)
        .filter(|v| strsim::levenshtein(rest, v) == 1)
        .map(|v| {
            let vowel_for_vowel = v.len() == rest.len()
                && v.chars()
                    .zip(rest.chars())
                    .all(|(a, b)| a == b || (vowel(a) && vowel(b)));
            (!vowel_for_vowel, v.as_str())
        })
        .collect();
    near.sort_unstable();
    near.into_iter()
        .take(3)
        .map(|(_, v)| v.to_owned())
        .collect()
}

/// Whether a word is letters (and apostrophes) only.
pub fn alphabetic(w: &str) -> bool {
    !w.is_empty() && w.chars().all(|c| c.is_alphabetic() || c == '\'')
}

#[cfg(test)]
mod sound_tests {
    use super::*;

    fn vocabulary(words: &[&str]) -> Vocabulary {
        words
            .iter()
            .map(|w| ((*w).to_owned(), sound_spelling(w)))
            .collect()
    }

    #[test]
    fn of_words_as_near_a_swap_then_a_neighbouring_key_comes_first() {
        let v = vocabulary(&["one", "ten", "the", "tan"]);
        // "tne": "ten" two letters swapped, "the" a key beside (h by n), "one" neither.
        assert_eq!(nearest_words(&v, "tne", 3), ["ten", "the", "one"]);
        assert_eq!(slip_rank("lihgts", "lights"), 0);
        assert_eq!(slip_rank("lughts", "lights"), 1);
        assert_eq!(slip_rank("lpghts", "lights"), 2);
    }

    #[test]
    fn the_letters_two_words_do_not_share_never_exceed_their_distance() {
        for (a, b) in [
            ("back", "mac"),
            ("kitchen", "kichen"),
            ("thermostat", "thermos"),
            ("lounge", "lunge"),
            ("abc", "cba"),
            ("", "door"),
        ] {
            assert!(
                bag_distance(a, b) <= strsim::levenshtein(a, b),
                "{a} / {b}: {} > {}",
                bag_distance(a, b),
                strsim::levenshtein(a, b)
            );
        }
        assert_eq!(bag_distance("abc", "cba"), 0);
        assert_eq!(bag_distance("door", "doors"), 1);
        assert_eq!(bag_distance("light", "night"), 1);
        assert_eq!(bag_distance("sister", "timer"), 2);
    }

    #[test]
    fn words_are_compared_as_they_sound() {
        assert_eq!(sound_spelling("back"), "bak");
        assert_eq!(sound_spelling("mac"), "mak");
        assert_eq!(sound_spelling("phone"), "fone");
        assert_eq!(sound_spelling("kitchen"), "kitchen");
        assert_eq!(sound_spelling("dimmer"), "dimer");
        assert_eq!(sound_spelling("cellar"), "selar");
        // "mac" is two edits from "back" in letters, one in sound.
        let v = vocabulary(&["back", "front", "side"]);
        assert_eq!(nearest_words(&v, "mac", 3), vec!["back"]);
        // A letter doubled sounds the same: the nearest there is.
        assert_eq!(nearest_words(&v, "bback", 3), vec!["back"]);
        // Tied words are all given, in order; short known words never.
        let v = vocabulary(&["max", "map", "on", "back"]);
        assert_eq!(nearest_words(&v, "mak", 3), vec!["back", "map", "max"]);
        assert!(nearest_words(&v, "of", 3).is_empty());
    }

    #[test]
    fn a_short_rest_is_read_as_the_words_it_sounds_like_vowels_first() {
        let v = vocabulary(&["on", "up", "in", "out", "off"]);
        assert_eq!(sounds_near(&v, "un"), vec!["in", "on", "up"]);
        assert_eq!(sounds_near(&v, "outh"), vec!["out"]);
        assert!(sounds_near(&v, "xyzzy").is_empty());
    }
}
