use super::*;

const SAMPLE: &str = "\
hour AW1 ER0
hour(2) AW1 R
one W AH1 N
well W EH1 L
fort F AO1 R T
timer T AY1 M ER0
for F AO1 R
four F AO1 R
five F AY1 V
forty F AO1 R T IY0 # a comment
percent P ER0 S EH1 N T
fifty F IH1 F T IY0
";

fn said(lex: &Lexicon, text: &str) -> String {
    lex.say(text)
        .phones
        .iter()
        .map(|p| name(*p))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn words_are_said_as_the_dictionary_says_them_and_numbers_in_words() {
    let lex = Lexicon::parse(SAMPLE).unwrap();
    assert_eq!(lex.say_word("hour").len(), 2, "both ways to say it");
    assert_eq!(
        said(&lex, "timer for one hour"),
        "T AY M ER F AO R W AH N AW ER"
    );
    assert_eq!(said(&lex, "timer 45"), "T AY M ER F AO R T IY F AY V");
    assert_eq!(said(&lex, "50%"), "F IH F T IY P ER S EH N T");
    // A word it lacks, split into two it has, or spelled.
    assert_eq!(said(&lex, "fortwell"), "F AO R T W EH L");
    assert_eq!(said(&lex, "pizza"), "P IH Z AH");
    let heard = lex.say("timer for well hour");
    assert_eq!(heard.words, ["timer", "for", "well", "hour"]);
    assert_eq!(heard.starts, [0, 4, 7, 10, 12]);
    // Inside "for", "well" (three phones) and "hour" (two), not "timer" (four).
    let inside: Vec<usize> = (0..heard.inside_short.len())
        .filter(|&i| heard.inside_short[i])
        .collect();
    assert_eq!(inside, [5, 6, 8, 9, 11]);
}

#[test]
fn numbers_are_spelled_as_they_are_said() {
    for (digits, words) in [
        ("0", "zero"),
        ("21", "twenty one"),
        ("40", "forty"),
        ("115", "one hundred fifteen"),
        ("2018", "two thousand eighteen"),
        ("21.5", "twenty one point five"),
        ("1/2", "one half"),
        ("50%", "fifty percent"),
        ("20°", "twenty degrees"),
        ("3rd", "third"),
        ("21st", "twenty first"),
    ] {
        assert_eq!(spell_number(digits).as_deref(), Some(words), "{digits}");
    }
    for not in ["abc", "12ab", "1/x", ""] {
        assert_eq!(spell_number(not), None, "{not}");
    }
}

#[test]
fn near_sounds_cost_less_than_far_ones() {
    let (p, b, t, iy, ih) = (ph("P"), ph("B"), ph("T"), ph("IY"), ph("IH"));
    assert_eq!(substitution(p, p), 0.0);
    assert!(substitution(p, b) < substitution(p, iy));
    assert!(substitution(iy, ih) < substitution(t, iy));
    assert!(gap(ph("HH")) < gap(t));
}

#[test]
fn a_broken_dictionary_is_named_by_its_line() {
    let err = Lexicon::parse("one W AH1 N\ntwo T QQ1\n").err().unwrap();
    assert_eq!(err.0, 2);
    assert!(err.1.contains("QQ1"), "{err:?}");
    assert!(Lexicon::parse("\n# nothing\n").is_err());
}
