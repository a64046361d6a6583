//! Fuzzes the Node package's tape (bindings/node/src/tape.rs): batches of JSON values are
//! written by the Rust encoder and read back by a decoder that follows `index.js` step by step
//! (header, key and shape tables, the eight tags, UTF-16 lengths). Every batch must decode to
//! exactly the values written, with the value count in the header, across batches that share
//! the tables, and when the decoder announces table sizes that are not the encoder's (a batch
//! it never decoded) the encoder must start both tables afresh rather than be misread.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

#[allow(dead_code)]
#[path = "../../bindings/node/src/tape.rs"]
mod tape;

const LONG: u32 = (1 << 29) - 1;

/// `index.js`'s side of the tables.
#[derive(Default)]
struct Reader {
    keys: Vec<String>,
    shapes: Vec<Vec<String>>,
}

struct Batch<'a> {
    words: &'a [u32],
    text: Vec<u16>,
    p: usize,
    sp: usize,
}

impl Batch<'_> {
    fn word(&mut self) -> u32 {
        let word = self.words[self.p];
        self.p += 1;
        word
    }
    fn slice(&mut self, length: usize) -> String {
        let s = String::from_utf16(&self.text[self.sp..self.sp + length]).expect("whole UTF-16");
        self.sp += length;
        s
    }
    fn value(&mut self, reader: &Reader) -> Value {
        let op = self.word();
        let x = op >> 3;
        match op & 7 {
            0 => Value::from(x),
            1 => {
                let length = if x == LONG { self.word() } else { x };
                Value::from(self.slice(length as usize))
            }
            2 => Value::Array((0..x).map(|_| self.value(reader)).collect()),
            3 => {
                let mut object = Map::new();
                for key in &reader.shapes[x as usize] {
                    let value = self.value(reader);
                    object.insert(key.clone(), value);
                }
                Value::Object(object)
            }
            4 => Value::from(reader.keys[x as usize].clone()),
            5 => match x {
                0 => Value::Null,
                1 => Value::Bool(false),
                _ => Value::Bool(true),
            },
            6 => {
                let (low, high) = (self.word(), self.word());
                let mut bytes = [0u8; 8];
                bytes[..4].copy_from_slice(&low.to_ne_bytes());
                bytes[4..].copy_from_slice(&high.to_ne_bytes());
                serde_json::Number::from_f64(f64::from_ne_bytes(bytes)).map_or(Value::Null, Value::Number)
            }
            _ => {
                let length = if x == LONG { self.word() } else { x };
                serde_json::from_str(&self.slice(length as usize)).expect("a JSON op holds JSON")
            }
        }
    }
}

impl Reader {
    fn decode(&mut self, words: &[u32], text: &str) -> Vec<Value> {
        let mut batch = Batch { words, text: text.encode_utf16().collect(), p: 2, sp: 0 };
        let total = words[0] as usize;
        if words[1] & 1 != 0 {
            self.keys.clear();
            self.shapes.clear();
        }
        let count = words[1] >> 1;
        for _ in 0..batch.word() {
            let length = batch.word() as usize;
            let key = batch.slice(length);
            self.keys.push(key);
        }
        for _ in 0..batch.word() {
            let n = batch.word();
            let names = (0..n).map(|_| self.keys[batch.word() as usize].clone()).collect();
            self.shapes.push(names);
        }
        let values: Vec<Value> = (0..count).map(|_| batch.value(self)).collect();
        assert_eq!(batch.p, total, "the batch's words are all read");
        values
    }
}

/// Equal as `JSON.parse` would make them: numbers compared as doubles.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut writer = tape::Tape::default();
    let mut reader = Reader::default();
    for chunk in data.split(|&b| b == b'\n') {
        let Some((&control, json)) = chunk.split_first() else { continue };
        let values: Vec<Value> = json
            .split(|&b| b == b'\t')
            .filter_map(|text| serde_json::from_slice(text).ok())
            .collect();
        // Bit 0 of the control byte: announce table sizes that are off by one.
        let skew = u32::from(control & 1);
        writer.begin((reader.keys.len() as u32 + skew, reader.shapes.len() as u32));
        for value in &values {
            writer.write(value);
        }
        let (text, _ascii) = writer.finish();
        let mut words = Vec::new();
        writer.take_words(usize::MAX, |w| words.extend_from_slice(w));
        let decoded = reader.decode(&words, &text);
        assert_eq!(decoded.len(), values.len());
        for (got, want) in decoded.iter().zip(&values) {
            assert!(same(got, want), "{got} != {want}");
        }
    }
});
