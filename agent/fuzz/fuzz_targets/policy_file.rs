//! Any text as a policy file: see `check_policy_file` (errors name the file, rule and field;
//! what parses is written back to the same rules; one rule a piece means the same).
#![no_main]
use libfuzzer_sys::fuzz_target;
use polycc_agent_fuzz::policy_file_input;

fuzz_target!(|data: &[u8]| policy_file_input(data));
