//! Deterministic simulation: the real engine (receivers, dispatch, coalescer, heartbeat,
//! shutdown; its own API and, with the `ruststream` feature, the RustStream broker) against the
//! in-process SQS, on a paused tokio clock on one thread, with faults in the calls and every
//! random draw taken from one seed. Each seed's run is checked against the invariants of
//! `invariants.rs`; the same seed runs the same way, trace for trace.
//!
//! - By default the seeds `0..10 000` run, and 2 000 more from a start derived from the commit
//!   under test (printed; `SIM_MOVING_START` sets it), so that each commit explores new seeds.
//! - `SIM_SEEDS=n` runs `n` seeds instead, from `SIM_SEED_START` (default 0).
//! - A failing seed prints the command that replays it, `SIM_SEED=<seed> cargo test -p
//!   sqs-engine --features testing,ruststream --test simulation replay`, and writes its trace
//!   under the target directory.
//! - Without the `ruststream` feature, the consumers a seed would run through the broker run on
//!   the engine's own API instead: replay a seed with the features it failed with.

#![allow(missing_docs, unreachable_pub)]

#[cfg(feature = "ruststream")]
mod broker;
mod faults;
mod handle;
mod invariants;
mod record;
mod run;
mod stopped;
mod trace;
mod workload;

use std::sync::Once;

use sqs_engine::testing::Defect;

/// Seeds the CI run covers.
const CI_SEEDS: u64 = 10_000;
/// The CI run is split over this many tests, which the test harness runs in parallel.
const SHARDS: u64 = 4;

/// Quiets the deliberate handler panics; any other panic is reported as usual.
fn quiet_deliberate_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&handle::PANIC_MARKER) {
                run::PANICS.with(|panics| panics.set(panics.get() + 1));
                report(info);
            }
        }));
    });
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} is not a number")),
    )
}

/// The features this binary was built with, as the replay command names them: all of them, as
/// a workspace build unifies them, since what the engine does (and so what a seed draws) can
/// differ with each.
fn features() -> String {
    [
        ("testing", cfg!(feature = "testing")),
        ("ruststream", cfg!(feature = "ruststream")),
        ("sns", cfg!(feature = "sns")),
        ("prometheus", cfg!(feature = "prometheus")),
        ("asyncapi", cfg!(feature = "asyncapi")),
        ("bench", cfg!(feature = "bench")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect::<Vec<_>>()
    .join(",")
}

/// The command that replays `seed`.
fn replay_command(seed: u64) -> String {
    format!(
        "SIM_SEED={seed} cargo test -p sqs-engine --features {} --test simulation replay -- --nocapture",
        features()
    )
}

/// Runs `seed` and checks it: its violations, with the run (for its trace).
fn check(seed: u64, defect: Option<Defect>) -> (Vec<String>, run::Run) {
    let run = run::run(seed, defect);
    let violations = invariants::check(&run);
    (violations, run)
}

/// Seeds the CI run covers beyond the fixed ones, from a start that moves with each commit.
const MOVING_SEEDS: u64 = 2_000;

/// Seeds of the moving range that once broke an invariant, kept in every run since: a
/// duplicate held behind a handler that outlived the run (the check was wrong); a delivery a
/// broker consumer let go of unsettled at its shutdown, counted as still held (the record
/// did not say it was let go); the same for a broker handler cut short at the shutdown
/// timeout; a broker consumer's settlement queued behind an extension in flight, which its
/// shutdown returned before sending (it waited a grace for the holders and the calls alike);
/// a slow worker behind a full prefetch without the heartbeat, handed only messages whose
/// visibility had lapsed, so that its deletes deleted nothing and the queue never drained.
const FOUND_SEEDS: [u64; 5] = [
    22_629_059_519_805,
    40_186_987_611_450,
    191_946_119_160_485,
    243_313_177_555_809,
    79_032_630_541_643,
];

/// Where the moving seeds start: `SIM_MOVING_START`, else derived from the commit under test
/// (`git rev-parse HEAD`), so each commit explores seeds no earlier one did, and a failing
/// seed replays anywhere with `SIM_SEED`. Past the fixed range, so the two never overlap.
fn moving_start() -> (u64, String) {
    if let Some(start) = env_u64("SIM_MOVING_START") {
        return (start, "SIM_MOVING_START".to_owned());
    }
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|head| head.trim().to_owned());
    // Outside a git checkout (a packaged crate), the start is fixed by the crate's version.
    let source = head.unwrap_or_else(|| format!("version {}", env!("CARGO_PKG_VERSION")));
    let hash = source
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    // Below 2^48, so that seeds stay short enough to type.
    (CI_SEEDS + hash % (1 << 48), source)
}

/// Writes `line` to the process's standard error past the test harness's capture, so a CI log
/// shows which seeds ran and how long they took.
fn uncaptured(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The seeds of a run: `SIM_SEEDS` from `SIM_SEED_START` when set; else the fixed regression
/// range `0..CI_SEEDS`, the [`FOUND_SEEDS`] and [`MOVING_SEEDS`] from [`moving_start`].
fn seed_ranges() -> Vec<std::ops::Range<u64>> {
    if let Some(seeds) = env_u64("SIM_SEEDS") {
        let start = env_u64("SIM_SEED_START").unwrap_or(0);
        return std::iter::once(start..start + seeds).collect();
    }
    let (moving, source) = moving_start();
    static PRINTED: Once = Once::new();
    PRINTED.call_once(|| {
        uncaptured(&format!(
            "simulation seeds: 0..{CI_SEEDS} (fixed), {FOUND_SEEDS:?} (found) and {moving}..{} (moving, from {source})",
            moving + MOVING_SEEDS
        ));
    });
    let found = FOUND_SEEDS.iter().map(|seed| *seed..seed + 1);
    [0..CI_SEEDS, moving..moving + MOVING_SEEDS]
        .into_iter()
        .chain(found)
        .collect()
}

/// Runs the seeds of one shard of the CI run (or of `SIM_SEEDS`); fails on the first seed that
/// breaks an invariant, with the command to replay it and the path of its trace.
fn run_shard(shard: u64) {
    quiet_deliberate_panics();
    let started = std::time::Instant::now();
    let mut checked = 0;
    let seeds = seed_ranges().into_iter().flatten();
    for seed in seeds.filter(|seed| seed % SHARDS == shard) {
        let (violations, run) = check(seed, None);
        if !violations.is_empty() {
            let path = trace::write(seed, "", &trace::render(&run));
            panic!(
                "seed {seed} broke {} invariant(s):\n  {}\nreplay: {}\ntrace: {}",
                violations.len(),
                violations.join("\n  "),
                replay_command(seed),
                path.display()
            );
        }
        checked += 1;
    }
    uncaptured(&format!(
        "simulation shard {shard}: {checked} seeds kept every invariant in {:.0?}",
        started.elapsed()
    ));
}

#[test]
fn seeds_shard_0() {
    run_shard(0);
}

#[test]
fn seeds_shard_1() {
    run_shard(1);
}

#[test]
fn seeds_shard_2() {
    run_shard(2);
}

#[test]
fn seeds_shard_3() {
    run_shard(3);
}

/// Replays `SIM_SEED` (default 0), writes its trace and prints the path; fails as the seed
/// does.
#[test]
fn replay() {
    quiet_deliberate_panics();
    let seed = env_u64("SIM_SEED").unwrap_or(0);
    let (violations, run) = check(seed, None);
    let trace = trace::render(&run);
    let path = trace::write(seed, "", &trace);
    eprintln!(
        "seed {seed}: trace {} (hash {:016x})",
        path.display(),
        trace::hash(&trace)
    );
    assert!(
        violations.is_empty(),
        "seed {seed} broke {} invariant(s):\n  {}\ntrace: {}",
        violations.len(),
        violations.join("\n  "),
        path.display()
    );
}

#[test]
fn a_seed_runs_the_same_way_twice() {
    quiet_deliberate_panics();
    let mut hashes = std::collections::HashSet::new();
    for seed in 0..40 {
        let first = trace::render(&check(seed, None).1);
        let second = trace::render(&check(seed, None).1);
        if first != second {
            let a = trace::write(seed, "-first", &first);
            let b = trace::write(seed, "-second", &second);
            panic!(
                "seed {seed} ran two ways: {:016x} and {:016x}; diff {} {}",
                trace::hash(&first),
                trace::hash(&second),
                a.display(),
                b.display()
            );
        }
        hashes.insert(trace::hash(&first));
    }
    assert!(
        hashes.len() > 30,
        "different seeds run differently: only {} distinct traces of 40",
        hashes.len()
    );
}

/// The first seed of the CI budget under which `defect` breaks an invariant that the seed
/// keeps without it.
fn first_catch(defect: Defect) -> Option<(u64, Vec<String>)> {
    (0..CI_SEEDS).find_map(|seed| {
        let (violations, _) = check(seed, Some(defect));
        (!violations.is_empty() && check(seed, None).0.is_empty()).then_some((seed, violations))
    })
}

fn caught(defect: Defect) {
    quiet_deliberate_panics();
    let Some((seed, violations)) = first_catch(defect) else {
        panic!("{defect:?} was not caught within {CI_SEEDS} seeds");
    };
    eprintln!(
        "{defect:?} caught at seed {seed} ({} seeds run): {}",
        seed + 1,
        violations[0]
    );
}

#[test]
fn a_heartbeat_kept_after_settle_is_caught() {
    caught(Defect::HeartbeatKeptAfterSettle);
}

#[test]
fn a_retry_after_rounded_down_is_caught() {
    caught(Defect::RetryAfterRoundedDown);
}

#[test]
fn a_fifo_group_started_early_is_caught() {
    caught(Defect::FifoNextStartedEarly);
}

#[test]
fn a_heartbeat_that_gives_up_after_one_failure_is_caught() {
    caught(Defect::HeartbeatGivesUpOnFailure);
}

#[test]
fn a_fifo_group_drained_into_the_dead_letter_queue_is_caught() {
    caught(Defect::FifoWaitsForTheDeadLettered);
}

#[test]
fn a_duplicate_settled_with_its_other_delivery_s_handle_is_caught() {
    caught(Defect::DuplicateSettledAsOriginal);
}
