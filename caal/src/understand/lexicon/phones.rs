//! The 39 ARPAbet phones and what hearing one for another costs: near
//! sounds (voiced and not, vowels near each other) cost less.

use super::Phone;

pub(super) const PHONES: [&str; 39] = [
    "AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW", "OY", "UH",
    "UW", // vowels
    "B", "CH", "D", "DH", "F", "G", "HH", "JH", "K", "L", "M", "N", "NG", "P", "R", "S", "SH", "T",
    "TH", "V", "W", "Y", "Z", "ZH",
];
/// Phones below this index are vowels.
pub(super) const VOWELS: Phone = 15;

pub(super) fn phone(name: &str) -> Option<Phone> {
    let bare = name.trim_end_matches(|c: char| c.is_ascii_digit());
    PHONES.iter().position(|p| *p == bare).map(|i| i as Phone)
}

pub(super) fn ph(name: &str) -> Phone {
    phone(name).unwrap_or(0)
}

/// The phone's ARPAbet name.
pub fn name(p: Phone) -> &'static str {
    PHONES.get(usize::from(p)).copied().unwrap_or("?")
}

pub fn is_vowel(p: Phone) -> bool {
    p < VOWELS
}

/// Pairs of phones speech to text takes for each other more than for any
/// other: voiced and voiceless ("pizza"/"beat the"), nasals, liquids, and
/// the places of articulation next to each other.
pub(super) const NEAR: [(&str, &str); 21] = [
    ("P", "B"),
    ("T", "D"),
    ("K", "G"),
    ("F", "V"),
    ("S", "Z"),
    ("SH", "ZH"),
    ("CH", "JH"),
    ("TH", "DH"),
    ("M", "N"),
    ("N", "NG"),
    ("L", "R"),
    ("W", "L"),
    ("W", "R"),
    ("S", "SH"),
    ("T", "CH"),
    ("D", "JH"),
    ("F", "TH"),
    ("V", "DH"),
    ("T", "N"),
    ("D", "N"),
    ("L", "N"),
];

/// Every pair's substitution cost and every phone's gap cost, worked out
/// once: the alignment asks for them millions of times a sentence.
pub(super) struct Costs {
    substitution: [[f32; 39]; 39],
    gap: [f32; 39],
}

pub(super) static COSTS: std::sync::LazyLock<Costs> = std::sync::LazyLock::new(|| {
    let mut costs = Costs {
        substitution: [[1.0; 39]; 39],
        gap: [1.0; 39],
    };
    for a in 0..39u8 {
        for b in 0..39u8 {
            costs.substitution[usize::from(a)][usize::from(b)] = substitution_of(a, b);
        }
        costs.gap[usize::from(a)] = gap_of(a);
    }
    costs
});

/// What heard `b` for said `a` costs (see `substitution_of`).
#[inline]
pub fn substitution(a: Phone, b: Phone) -> f32 {
    COSTS.substitution[usize::from(a)][usize::from(b)]
}

/// What a phone said but not heard, or heard but not said, costs (see `gap_of`).
#[inline]
pub fn gap(p: Phone) -> f32 {
    COSTS.gap[usize::from(p)]
}

/// Nothing when the same, half for two vowels or a near pair (`NEAR`), a
/// little less for "er" and "r", else 1.
pub(super) fn substitution_of(a: Phone, b: Phone) -> f32 {
    if a == b {
        return 0.0;
    }
    let (er, r) = (ph("ER"), ph("R"));
    if (a == er && b == r) || (a == r && b == er) {
        return 0.3;
    }
    if is_vowel(a) && is_vowel(b) {
        return 0.5;
    }
    let (x, y) = (name(a), name(b));
    if NEAR
        .iter()
        .any(|&(p, q)| (p == x && q == y) || (p == y && q == x))
    {
        return 0.5;
    }
    1.0
}

/// Half for "h" and the unstressed "uh", which speech drops and adds, else 1.
pub(super) fn gap_of(p: Phone) -> f32 {
    if p == ph("HH") || p == ph("AH") {
        0.5
    } else {
        1.0
    }
}
