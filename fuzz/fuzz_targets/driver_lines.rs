//! Fuzzes the JSON-lines driver (SPEC §12): the input bytes, split on `\n` as `runcore drive`
//! splits stdin, go line by line to one `Driver`. Whatever the bytes, the driver must not
//! panic and must close every line with exactly one `idle`, numbered by the line, written last.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runcore::driver::{Driver, idle_line};

fuzz_target!(|data: &[u8]| {
    let mut driver = Driver::new();
    for (i, line) in data.split(|&b| b == b'\n').enumerate() {
        let out = driver.handle_line(line);
        let idle = idle_line(i as u64 + 1, driver.agent().poll_timeout());
        assert_eq!(
            out.last(),
            Some(&idle),
            "line {} must end with its idle",
            i + 1
        );
        let idles = out
            .iter()
            .filter(|l| l.starts_with(r#"{"type":"idle""#))
            .count();
        assert_eq!(idles, 1, "line {} must have exactly one idle", i + 1);
    }
});
