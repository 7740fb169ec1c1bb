use super::*;

const LEXICON: &str = "\
add AE1 D
an AE1 N
a AH0
and AH0 N D
at AE1 T
brightness B R AY1 T N AH0 S
fifty F IH1 F T IY0
five F AY1 V
for F AO1 R
forty F AO1 R T IY0
half HH AE1 F
hour AW1 ER0
hour(2) AW1 R
hours AW1 ER0 Z
kitchen K IH1 CH AH0 N
lamp L AE1 M P
lights L AY1 T S
list L IH1 S T
living L IH1 V IH0 NG
milk M IH1 L K
minute M IH1 N AH0 T
minutes M IH1 N AH0 T S
one W AH1 N
out AW1 T
percent P ER0 S EH1 N T
room R UW1 M
set S EH1 T
start S T AA1 R T
the DH AH0
timer T AY1 M ER0
to T UW1
turn T ER1 N
twelve T W EH1 L V
two T UW1
us AH1 S
well W EH1 L
write R AY1 T
";

fn grammar(templates: &[&str], lists: HashMap<String, SlotList>) -> SoundGrammar {
    let lexicon = Lexicon::parse(LEXICON).unwrap();
    let parsed: Vec<(String, Expr)> = templates
        .iter()
        .map(|t| (t.to_string(), template::parse(t).unwrap()))
        .collect();
    let rules = HashMap::new();
    let rule_sets = [&rules];
    let list_sets = [&lists];
    let scope = SoundScope {
        rules: &rule_sets,
        lists: &list_sets,
    };
    SoundGrammar::build(
        lexicon.into(),
        &scope,
        parsed.iter().map(|(t, e)| ("Intent", t.as_str(), e)),
    )
}

fn lists() -> HashMap<String, SlotList> {
    HashMap::from([
        ("duration".to_string(), SlotList::Duration),
        ("item".to_string(), SlotList::Wildcard),
        (
            "brightness".to_string(),
            SlotList::Range(template::RangeList {
                from: 0.0,
                to: 100.0,
                step: 1.0,
                multiplier: 1.0,
                fractions: None,
            }),
        ),
    ])
}

#[test]
fn a_mishearing_is_read_as_the_sentence_it_sounds_like() {
    let g = grammar(
        &[
            "(start|set) [a] {duration} timer",
            "set a timer for {duration}",
            "set the lamp brightness to {brightness}[%| percent]",
            "add {item} to the list",
        ],
        lists(),
    );
    assert_eq!(g.len(), 4);
    let near = g.nearest("set a timer for well hour", 3, 0.3);
    assert_eq!(near[0].reading, "set a timer for one hour", "{near:?}");
    assert!(near[0].distance < 0.15, "{near:?}");
    let near = g.nearest("set the lamp write us to 50%", 3, 0.3);
    assert_eq!(
        near[0].reading, "set the lamp brightness to fifty percent",
        "{near:?}"
    );
    // A wildcard takes the words as heard, at a cost.
    let near = g.nearest("add milk to the list", 3, 0.3);
    assert_eq!(near[0].reading, "add milk to the list");
    assert_eq!(near[0].wild_words, 1);
    assert!(near[0].distance > 0.0);
    // Nothing near: nothing found.
    assert!(g.nearest("kitchen", 3, 0.3).is_empty());
    // What each word of the reading was heard as: "five" heard as "five",
    // "out" as nothing.
    assert!(near[0].unheard.is_empty(), "{near:?}");
    let g = grammar(
        &["turn [the] lights out", "add {item} to the list"],
        lists(),
    );
    let near = g.nearest("turn the lights", 3, 0.3);
    assert_eq!(near[0].reading, "turn the lights out", "{near:?}");
    assert_eq!(near[0].unheard, ["out"], "{near:?}");
    let near = g.nearest("turn the lights at", 3, 0.3);
    assert_eq!(near[0].reading, "turn the lights out", "{near:?}");
    assert!(near[0].unheard.is_empty(), "{near:?}");
}

#[test]
fn a_word_spelled_across_parts_is_said_whole() {
    // "minute[s]": "minutes" is its own word, not "minute" and "s".
    let g = grammar(&["set a timer for five minute[s]"], HashMap::new());
    let near = g.nearest("set a timer for five minutes", 1, 0.1);
    assert_eq!(near[0].reading, "set a timer for five minutes");
    assert_eq!(near[0].distance, 0.0);
}

#[test]
fn words_are_near_by_sound_only_when_their_sounds_are() {
    let g = grammar(&["set a timer"], HashMap::new());
    // The same word, and a word that sounds alike ("well" for "one"'s
    // neighbour "twelve" shares its end), are nearer than words that share
    // no sound ("milk" and "hour").
    assert_eq!(g.word_distance("kitchen", "kitchen"), 0.0);
    let alike = g.word_distance("twelve", "well");
    let apart = g.word_distance("milk", "hour");
    assert!(alike < 0.5, "{alike}");
    assert!(apart > 0.5, "{apart}");
    assert!(alike < apart);
    // A word no way of saying is known for is far from everything.
    assert!(g.word_distance("", "milk").is_infinite());
}
