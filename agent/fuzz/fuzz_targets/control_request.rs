//! Any bytes as a control socket request line, and as the JSON of a rule or a policy
//! (what `policy_add` and `flow_set` carry): see `check_request`, `check_rule`, `check_policy`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use polycc_agent_fuzz::control_request_input;

fuzz_target!(|data: &[u8]| control_request_input(data));
