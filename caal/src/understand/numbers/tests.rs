use super::*;

fn read(lang: Lang, text: &str) -> Vec<f64> {
    numbers_at(lang, text, 0)
        .into_iter()
        .map(|(v, _)| v)
        .collect()
}

#[test]
fn english_number_words_give_every_reading() {
    assert_eq!(read(Lang::En, "fifty percent"), vec![50.0]);
    assert_eq!(read(Lang::En, "twenty one minutes"), vec![20.0, 21.0]);
    assert_eq!(read(Lang::En, "a hundred"), vec![100.0]);
    assert_eq!(
        read(Lang::En, "one hundred and five"),
        vec![1.0, 100.0, 105.0]
    );
    assert_eq!(read(Lang::En, "two and a half hours"), vec![2.0, 2.5]);
    assert_eq!(read(Lang::En, "18 and a half"), vec![18.0, 18.5]);
    assert_eq!(read(Lang::En, "18 and a halfpipe"), vec![18.0]);
    assert_eq!(
        read(Lang::En, "twenty one point five degrees"),
        vec![20.0, 21.0, 21.5]
    );
    assert_eq!(read(Lang::En, "21.5 degrees"), vec![21.5]);
    assert_eq!(read(Lang::En, "50%"), vec![50.0]);
    assert_eq!(read(Lang::En, "1/2 a minute"), vec![0.5]);
    // Two units in a row are two numbers, not one.
    assert_eq!(read(Lang::En, "one two"), vec![1.0]);
    assert!(read(Lang::En, "lights").is_empty());
    assert!(read(Lang::En, "12abc").is_empty());
}

#[test]
fn german_compounds_read_whole() {
    assert_eq!(read(Lang::De, "einundzwanzig grad"), vec![21.0]);
    assert_eq!(read(Lang::De, "hundertfünfzig"), vec![150.0]);
    assert_eq!(read(Lang::De, "zweieinhalb stunden"), vec![2.5]);
    assert_eq!(read(Lang::De, "zwanzig komma fünf"), vec![20.0, 20.5]);
    assert!(read(Lang::De, "und").is_empty());
}

#[test]
fn durations_read_like_people_say_them() {
    let d = |t| parse_duration(Lang::En, t);
    assert_eq!(d("10 minutes"), Some(600));
    assert_eq!(d("ten minutes"), Some(600));
    assert_eq!(d("an hour and a half"), Some(5400));
    assert_eq!(d("an hour and a quarter"), Some(4500));
    assert_eq!(d("2 hours and three quarters"), Some(9900));
    assert_eq!(d("five more minutes"), Some(300));
    assert_eq!(d("two extra hours"), Some(7200));
    assert_eq!(d("half an hour"), Some(1800));
    assert_eq!(d("a minute and a half"), Some(90));
    assert_eq!(d("1 hour 30 minutes"), Some(5400));
    assert_eq!(d("1 hour and 30 minutes"), Some(5400));
    assert_eq!(d("twenty five seconds"), Some(25));
    assert_eq!(d("1h30"), Some(5400));
    assert_eq!(d("90s"), Some(90));
    assert_eq!(d("2days"), Some(172_800));
    assert_eq!(d("5:30"), Some(330));
    assert_eq!(d("a quarter of an hour"), Some(900));
    assert_eq!(d("10 fortnights"), None);
    assert_eq!(d("minutes"), None);
    assert_eq!(d(""), None);
    assert_eq!(parse_duration(Lang::De, "zehn Minuten"), Some(600));
    assert_eq!(parse_duration(Lang::De, "eine halbe Stunde"), Some(1800));
}
