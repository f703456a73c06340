//! Policy files of generated rules in the layouts people write (inline, sub-tables, dotted
//! keys, comments): see `check_file_spec` (the file parses as the same rules through the
//! control socket's JSON path would).
#![no_main]
use libfuzzer_sys::fuzz_target;
use polycc_agent_fuzz::{check_file_spec, FileSpec};

fuzz_target!(|spec: FileSpec| {
    check_file_spec(&spec);
});
