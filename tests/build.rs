fn main() {
    orb_codegen::compile_protos(&["proto/orbtest.proto"], &["proto"]).unwrap();
}
