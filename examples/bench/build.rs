fn main() {
    // `bytes` fields as `bytes::Bytes`: decoded payloads are slices of the received frame (no
    // copy of a 1 MiB body), as a user moving large payloads would configure it.
    protorb_codegen::configure()
        .bytes(["."])
        .compile_protos(&["proto/bench.proto"], &["proto"])
        .unwrap();
}
