//! Well-formed control requests with random arguments (rules and policies from the
//! generators), some changed a little: see `check_request_spec`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use polycc_agent_fuzz::{check_request_spec, Change, RequestSpec};

fuzz_target!(|input: (RequestSpec, Change)| {
    check_request_spec(&input.0, &input.1);
});
