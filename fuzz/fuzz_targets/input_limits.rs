//! Fuzzes the core's input limits (`runcore::limits`): the byte scan of a line's
//! nesting agrees with the depth of the value it parses to, a JSON string's length is what
//! serde_json writes, a time from a double is exactly the integer it names or refused, and the
//! driver takes any bytes without panicking, refusing lines past the limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runcore::driver::Driver;
use runcore::limits::{
    MAX_NOW_MS, check_depth, check_json_depth, json_string_len, now_ms_from_f64,
};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        assert_eq!(check_json_depth(data).is_ok(), check_depth(&value).is_ok());
    }
    if let Ok(text) = std::str::from_utf8(data) {
        assert_eq!(json_string_len(text), serde_json::to_string(text).unwrap().len());
    }
    if data.len() >= 8 {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&data[..8]);
        let double = f64::from_le_bytes(bytes);
        match now_ms_from_f64(double) {
            Ok(now) => assert!(now <= MAX_NOW_MS && now as f64 == double),
            Err(_) => assert!(!(double >= 0.0 && double <= MAX_NOW_MS as f64 && double.fract() == 0.0)),
        }
    }
    let lines = Driver::new().handle_line(data);
    assert!(lines.last().is_some_and(|l| l.starts_with(r#"{"type":"idle""#)));
});
