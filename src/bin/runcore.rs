//! The `runcore` binary: the one place in the crate that reads stdin and writes stdout.
fn main() {
    println!("runcore: work in progress");
}
