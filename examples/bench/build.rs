fn main() {
    orb_codegen::compile_protos(&["proto/bench.proto"], &["proto"]).unwrap();
}
