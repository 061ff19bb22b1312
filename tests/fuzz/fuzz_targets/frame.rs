#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| fusiond_fuzz::frame(data));
