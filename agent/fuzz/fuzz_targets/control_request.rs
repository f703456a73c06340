//! Any bytes as a control socket request line, and as the JSON of a rule or a policy
//! (what `policy_add` and `flow_set` carry): see `check_request`, `check_rule`, `check_policy`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use polycc_agent_fuzz::{check_policy, check_request, check_rule};

fuzz_target!(|data: &[u8]| {
    check_request(data);
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        check_rule(&v);
        check_policy(&v);
    }
});
