//! The README's tutorial, verbatim: one process, a server ORB and a client ORB, one call.
//!
//! Run: `cargo run -p orb-examples --bin tutorial` (prints the IOR, then `HELLO`).

mod demo {
    protorb::include_proto!("demo"); // trait Echo, EchoSkeleton, EchoClient, Msg
}
use demo::{Echo, EchoClient, EchoSkeleton, Msg};

struct Upper;

impl Echo for Upper {
    fn echo(&self, _ctx: &protorb::Context, req: Msg) -> Result<Msg, protorb::Exception> {
        Ok(Msg {
            text: req.text.to_uppercase(),
        })
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = protorb::Orb::builder().build()?; // 127.0.0.1, a free port, 2 pool threads
    let obj = server.activate("echo", EchoSkeleton::new(Upper));
    println!("{}", server.object_to_string(&obj)); // IOR:01000000...

    let client = protorb::Orb::builder().threads(0).build()?; // callers drive the event loop
    let echo = EchoClient::new(&client, obj); // or EchoClient::narrow(..) to check the type
    println!(
        "{}",
        echo.echo(Msg {
            text: "hello".into()
        })?
        .text
    ); // HELLO
    client.shutdown();
    server.shutdown();
    Ok(())
}
