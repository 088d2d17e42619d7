fn main() {
    protorb_codegen::compile_protos(&["proto/orbtest.proto"], &["proto"]).unwrap();
}
