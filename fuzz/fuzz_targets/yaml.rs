#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| helm_locker_fuzz::yaml(data));
