fn main() {
    // `bytes` fields as `bytes::Bytes`: decoded payloads are slices of the received frame (no
    // copy of a 1 MiB body), as a user moving large payloads would configure it.
    protorb_codegen::configure()
        .bytes(["."])
        .compile_protos(&["proto/bench.proto"], &["proto"])
        .unwrap();

    // `--impl tonic`: no protoc on our machines, so protox parses the file into descriptors
    // and tonic-prost-build generates the messages and the gRPC client and server from them.
    // Same `bytes` setting as the ORB's stubs, so both decode the payload alike.
    println!("cargo:rerun-if-changed=proto/grpc_bench.proto");
    let fds = protox::compile(["proto/grpc_bench.proto"], ["proto"]).unwrap();
    tonic_prost_build::configure()
        .bytes(".")
        .compile_fds(fds)
        .unwrap();
}
