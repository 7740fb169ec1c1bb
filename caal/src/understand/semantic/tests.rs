use super::slots::{first_number, longest_duration};
use super::*;
use crate::understand::numbers::percent;

#[test]
fn free_text_is_read_where_the_example_marks_it() {
    let ex = normalize_marked("We're out of {item}");
    assert_eq!(ex, "we're out of {item}");
    assert_eq!(
        align("oh no we're all out of oat milk", &ex, "item").as_deref(),
        Some("oat milk")
    );
    let ex = normalize_marked("put {item} on the list");
    assert_eq!(
        align("could you put some eggs on the list", &ex, "item").as_deref(),
        Some("eggs")
    );
    // The word before the mark is not said: nothing is read.
    assert_eq!(align("we need eggs", &ex, "item"), None);
    assert!(is_duration(Lang::En, "hour") && is_duration(Lang::En, "2 minutes"));
    assert!(!is_duration(Lang::En, "dish soap"));
    assert!(is_duration(Lang::En, "three minutes to the rice"));
    assert!(!is_duration(Lang::En, "2 pints of milk"));
    assert_eq!(unmark(&ex, "something"), "put something on the list");
    // A mark that opens the example: the word after it must be said,
    // or the whole sentence would be the item.
    let ex = normalize_marked("{item} needs to go on the grocery list");
    assert_eq!(align("everything off, we're going out", &ex, "item"), None);
    assert_eq!(
        align("milk needs to go on the list", &ex, "item").as_deref(),
        Some("milk")
    );
    // After the word before it, the word after may go unsaid.
    let ex = normalize_marked("pick up {item} next time, add it to the list");
    assert_eq!(
        align("pick up bread", &ex, "item").as_deref(),
        Some("bread")
    );
}

#[test]
fn an_example_saying_the_opposite_word_is_not_near() {
    let pairs: Vec<[String; 2]> = [["brighter", "darker"], ["on", "off"], ["up", "down"]]
        .map(|[a, b]| [a.to_owned(), b.to_owned()])
        .to_vec();
    let opposed = |t: &str, e: &str| opposed(&pairs, t, e);
    assert!(opposed(
        "make the bedroom a bit darker",
        "make the office brighter"
    ));
    assert!(opposed("take bread off the list", "put {item} on the list"));
    assert!(opposed(
        "turn the lights down",
        "turn the lights up in the bedroom"
    ));
    // Either way round, and only whole words.
    assert!(opposed(
        "make the office brighter",
        "make the bedroom darker"
    ));
    assert!(!opposed(
        "make the office brighter",
        "the kitchen could be brighter"
    ));
    assert!(!opposed("turn on the lights", "switch the desk lamp on"));
    assert!(!opposed("put the heating up", "pick upstairs things"));
    // An example that says both is no opposite of either.
    assert!(!opposed(
        "turn off the garage light",
        "the garage light is still on turn it off"
    ));
}

#[test]
fn rooms_lights_and_locks_are_made_generic_and_pronouns_are_no_items() {
    let config = crate::config::Config::defaults().unwrap();
    let home = Home::from_config(&config.home).unwrap();
    for (lang, said, embedded) in [
        (
            Lang::En,
            "put the spare room lights on",
            "put the room lights on",
        ),
        (
            Lang::En,
            "leave the porch light as it is",
            "leave the light as it is",
        ),
        (Lang::En, "lock the main door", "lock the door"),
        // "garage" also names a door: kept, or opening it would read as a room.
        (Lang::En, "open the garage", "open the garage"),
        (Lang::En, "set the heating to 20", "set the heating to 20"),
        // A percent sign said as the examples say it.
        (
            Lang::En,
            "make the bedroom dimmer, like 40%",
            "make the room dimmer, like 40 percent",
        ),
        (Lang::De, "licht auf 40 %", "licht auf 40 prozent"),
        // A room's name ends at a clause mark as at a space.
        (
            Lang::En,
            "dim the bedroom, maybe 40 percent",
            "dim the room, maybe 40 percent",
        ),
    ] {
        let words = crate::config::GenericWords {
            room: "room".into(),
            light: "light".into(),
            door: "door".into(),
            thing: "something".into(),
        };
        assert_eq!(generic(&home, lang, &words, said), embedded, "{said}");
    }
    let said = "dim the kitchen, maybe 40 percent";
    let found = mentions(&home, said, None);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].slot, &said[found[0].span().0..found[0].span().1]),
        ("area", "kitchen")
    );
    let ex = normalize_marked("add {item} to the shopping list");
    assert_eq!(align("add it to the shopping list", &ex, "item"), None);
    assert_eq!(align("add in to the shopping list", &ex, "item"), None);
    let on = normalize_marked("work on {item}");
    assert_eq!(align("work on the shopping list", &on, "item"), None);
    assert_eq!(
        align("add dish soap to the shopping list", &ex, "item").as_deref(),
        Some("dish soap")
    );
    assert_eq!(marked_slot(&ex), Some("item"));
    assert_eq!(marked_slot("turn on the lights"), None);
}

#[test]
fn numbers_and_durations_are_read_from_anywhere_in_the_sentence() {
    assert_eq!(
        percent(Lang::En, "bring the kitchen to 30 percent"),
        Some(30.0)
    );
    assert_eq!(
        percent(Lang::En, "set bedroom 2 to twenty five percent"),
        Some(25.0)
    );
    assert_eq!(percent(Lang::En, "about 300 watts"), None);
    assert_eq!(percent(Lang::En, "the bedroom one"), None);
    // A fraction said alone is of the whole.
    assert_eq!(
        percent(Lang::En, "the desk lamp brightness to half"),
        Some(50.0)
    );
    assert_eq!(percent(Lang::En, "the bedroom at one percent"), Some(1.0));
    assert_eq!(
        first_number(Lang::En, "i'd like it warmer 23 degrees"),
        Some(23.0)
    );
    assert_eq!(
        longest_duration(Lang::En, "count down an hour and a half for me"),
        Some(5400)
    );
    assert_eq!(longest_duration(Lang::En, "count down please"), None);
}
