//! Any text as a policy file: see `check_policy_file` (errors name the file, rule and field;
//! what parses is written back to the same rules; one rule a piece means the same).
#![no_main]
use libfuzzer_sys::fuzz_target;
use polycc_agent_fuzz::check_policy_file;

fuzz_target!(|data: &[u8]| {
    // `load` reads the file as UTF-8: other bytes are an I/O error before the parser.
    if let Ok(text) = std::str::from_utf8(data) {
        check_policy_file(text);
    }
});
