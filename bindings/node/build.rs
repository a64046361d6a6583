//! Linker setup for a Node-API module.

fn main() {
    napi_build::setup();
}
