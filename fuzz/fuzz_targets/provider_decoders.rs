//! Fuzzes the provider decoders (SPEC §13): arbitrary bytes, as a body of any of the three APIs
//! with any status, fed in chunks the input also chooses. A decoder never panics, always ends
//! in exactly one `model_done` or `model_failed` after its deltas, and yields the same inputs
//! whatever the chunking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runcore::Input;
use runcore_providers::Api;

fn decode(api: Api, status: u16, body: &[u8], chunk: usize) -> Vec<Input> {
    let mut decoder = api.decoder("run", 1, status);
    let mut inputs = Vec::new();
    for piece in body.chunks(chunk.max(1)) {
        inputs.extend(decoder.feed(piece));
    }
    inputs.extend(decoder.finish_with_report().0);
    inputs
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, body)) = data.split_first() else {
        return;
    };
    let api = Api::ALL[usize::from(control % 3)];
    let status = match (control / 3) % 4 {
        0 | 1 => 200,
        2 => 429,
        _ => 500,
    };
    let chunk = usize::from(control / 12) + 1;
    let whole = decode(api, status, body, usize::MAX);
    let terminals = whole
        .iter()
        .filter(|i| matches!(i, Input::ModelDone { .. } | Input::ModelFailed { .. }))
        .count();
    assert_eq!(terminals, 1);
    assert!(matches!(
        whole.last(),
        Some(Input::ModelDone { .. } | Input::ModelFailed { .. })
    ));
    assert_eq!(decode(api, status, body, chunk), whole);
});
