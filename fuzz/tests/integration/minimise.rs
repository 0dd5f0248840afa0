//! The minimiser shrinks a planted failure to the lines that make it.

use outagelab_fuzz::minimise;
use outagelab_fuzz::mutate::BUNDLED;
use outagelab_fuzz::run::{Class, Harness, run_input};

/// quick-start.toml with its bulkhead's `max_concurrent = 0`: refused, with a message naming
/// the key. The minimiser keeps only what that refusal needs.
#[test]
fn shrinks_a_planted_failure() {
    let (_, text) = BUNDLED
        .iter()
        .find(|(name, _)| *name == "quick-start.toml")
        .expect("quick-start is bundled");
    let planted = text.replace("max_concurrent = 5", "max_concurrent = 0");
    assert_ne!(&planted, text);
    let fails = |candidate: &str| {
        let outcome = run_input(candidate, Harness::default());
        outcome.class == Class::Rejected && outcome.detail.contains("bulkheads.pg.max_concurrent")
    };
    assert!(fails(&planted));
    let mut calls = 0;
    let small = minimise(
        &planted,
        &mut |candidate| {
            calls += 1;
            fails(candidate)
        },
        2_000,
    );
    assert!(fails(&small), "the minimised input still fails:\n{small}");
    assert!(calls <= 2_000);
    let lines = small.lines().count();
    assert!(
        lines <= 10 && small.len() * 15 < planted.len(),
        "{lines} lines, {} of {} bytes:\n{small}",
        small.len(),
        planted.len()
    );
}

/// A number that alone makes the failure is shrunk to the smallest that still does.
#[test]
fn shrinks_numbers() {
    let input = "a = 1000\nb = 77\n";
    let b_at_least_10 = |c: &str| {
        c.contains("a = ")
            && c.lines()
                .find_map(|line| line.strip_prefix("b = "))
                .and_then(|b| b.parse::<u32>().ok())
                .is_some_and(|b| b >= 10)
    };
    // Halving: 77, 38, 19 (9 would pass).
    assert_eq!(
        minimise(input, &mut |c| b_at_least_10(c), 100),
        "a = 0\nb = 19\n"
    );
}
