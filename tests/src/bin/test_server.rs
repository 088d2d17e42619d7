//! A test server process: serves the Echo service on `--port P` (0 = any) and prints
//! `READY <corbaloc>` on stdout once listening. Used by tests that kill a server mid-call.

fn main() {
    let mut port = 0u16;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--port" {
            port = args.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        }
    }
    let orb = protorb::Orb::builder()
        .listen(("127.0.0.1", port))
        .threads(4)
        .build()
        .expect("orb starts");
    let (_servant, r) = orb_tests::activate_echo(&orb);
    println!("READY {}", orb.object_to_string(&r));
    orb.run();
}
