//! The fuzz targets' checks on stable Rust, in `make test`: every seed of the raw targets as it
//! is and changed at random bytes, and generated requests and policy files from random bytes,
//! through the same checks the cargo-fuzz targets run (agent/fuzz/src/lib.rs, compiled here as
//! a module so that one copy serves both). Coverage-guided fuzzing (`make fuzz`, nightly) finds
//! new inputs; this replays what the checks promise on every build without nightly, cargo-fuzz
//! or the fuzz crate's own build of the dependency tree (5.6 of a cold CI run's minutes).
//!
//! A failure prints proptest's shrunk input; `PROPTEST_CASES=N` runs more cases.

#[allow(dead_code)]
#[path = "../fuzz/src/lib.rs"]
mod checks;

use checks::{check_file_spec, check_policy_file, check_request, check_request_spec, control_request_input};
use checks::{from_bytes, policy_file_input, Change, FileSpec, RequestSpec};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The raw target `target`'s seeds (agent/fuzz/seeds/<target>, from make_seeds.py).
fn read_seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// The control_request target's seeds, read once for every case.
fn request_seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| read_seeds("control_request"))
}

/// The policy_file target's seeds, read once for every case.
fn file_seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| read_seeds("policy_file"))
}

/// `seed` with `flips` (position, byte) written over it, positions taken modulo its length.
fn mutate(seed: &[u8], flips: &[(usize, u8)]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for &(at, byte) in flips {
        if !out.is_empty() {
            let n = out.len();
            out[at % n] = byte;
        }
    }
    out
}

#[test]
fn every_seed_passes_the_raw_targets_checks() {
    let (requests, files) = (request_seeds(), file_seeds());
    assert!(requests.len() >= 20 && files.len() >= 5, "{} and {} seeds", requests.len(), files.len());
    // The seeds are the repository's own examples: the parsers accept them, so the checks
    // below run their round trips, not only the error paths.
    let parsed = requests.iter().filter(|s| check_request(s).is_some()).count();
    assert!(parsed * 4 >= requests.len() * 3, "{parsed} of {} request seeds parse", requests.len());
    let loaded = files.iter().filter(|s| check_policy_file(std::str::from_utf8(s).unwrap()).is_some()).count();
    assert!(loaded * 2 >= files.len(), "{loaded} of {} policy file seeds parse", files.len());
    requests.iter().for_each(|s| control_request_input(s));
}

#[test]
fn random_bytes_make_generated_requests_and_files_most_of_the_time() {
    // The generated-input tests below check only what `arbitrary` makes of their bytes: most of
    // them must make a request or a file, or those tests would pass on nothing.
    use proptest::test_runner::{RngAlgorithm, TestRng};
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let (mut requests, mut files) = (0, 0);
    for _ in 0..200 {
        let mut bytes = vec![0u8; 2048];
        rng.fill_bytes(&mut bytes);
        requests += from_bytes::<(RequestSpec, Change)>(&bytes).is_some() as usize;
        files += from_bytes::<FileSpec>(&bytes).is_some() as usize;
    }
    assert!(requests >= 150 && files >= 150, "{requests} requests and {files} files of 200 inputs");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn a_request_seed_changed_at_random_bytes_keeps_the_checks(
        pick in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        let all = request_seeds();
        control_request_input(&mutate(&all[pick.index(all.len())], &flips));
    }

    #[test]
    fn a_policy_file_seed_changed_at_random_bytes_keeps_the_checks(
        pick in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<usize>(), 0x20u8..0x7f), 1..6),
    ) {
        let all = file_seeds();
        policy_file_input(&mutate(&all[pick.index(all.len())], &flips));
    }

    #[test]
    fn a_generated_request_parses_as_written_or_is_refused_for_its_change(
        bytes in prop::collection::vec(any::<u8>(), 64..2048),
    ) {
        if let Some((spec, change)) = from_bytes::<(RequestSpec, Change)>(&bytes) {
            check_request_spec(&spec, &change);
        }
    }

    #[test]
    fn a_generated_policy_file_parses_as_its_rules_do(bytes in prop::collection::vec(any::<u8>(), 64..4096)) {
        if let Some(spec) = from_bytes::<FileSpec>(&bytes) {
            check_file_spec(&spec);
        }
    }
}
