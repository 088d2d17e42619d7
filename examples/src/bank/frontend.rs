//! Bank, the front end: the "communication server" of the Leader/Followers paper's OLTP
//! example. Many clients call it; it forwards every transaction to the back end, all of them
//! over one multiplexed connection (each request carries an id; replies find their waiting
//! thread by it). The back end's user exceptions pass through unchanged, typed.
//!
//! ```text
//! cargo run -p orb-examples --bin bank-backend                          # terminal 1
//! cargo run -p orb-examples --bin bank-frontend                         # terminal 2
//! cargo run -p orb-examples --bin bank-client                           # terminal 3
//! ```
//!
//! Its back end is `corbaloc:iiop:1.2@127.0.0.1:12811/bank` unless given as the first argument;
//! it listens on `corbaloc:iiop:1.2@127.0.0.1:12812/bank` and prints its IOR first.

use clap::Parser;
use orb_examples::errors::describe;
use orb_examples::fail;
use orb_examples::process::Stop;
use orb_examples::proto::bank::{
    AccountRequest, AmountRequest, AuditReply, Balance, Bank, BankClient, BankDepositError,
    BankGetBalanceError, BankSkeleton, BankTransferError, BankWithdrawError, TransferRequest,
};
use protorb::Orb;
use std::sync::atomic::{AtomicU64, Ordering};

const DEFAULT_BACKEND: &str = "corbaloc:iiop:1.2@127.0.0.1:12811/bank";

/// bank-frontend: forwards clients' transactions to the back end.
///
/// It prints its IOR on the first line of its output, then its corbaloc URL.
#[derive(Parser, Debug)]
#[command(name = "bank-frontend")]
struct Cli {
    /// The back end, IOR:... or corbaloc:...
    /// (default: corbaloc:iiop:1.2@127.0.0.1:12811/bank)
    backend: Option<String>,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, value_name = "N", default_value_t = 12812)]
    port: u16,
    /// ORB pool threads.
    #[arg(long, value_name = "N", default_value_t = 8)]
    threads: usize,
    /// Exit when standard input closes (for a parent process).
    #[arg(long)]
    exit_on_eof: bool,
}

/// Forwards each operation to the back end. Each upcall runs on a front-end thread that then
/// waits for the back end's reply; all of them share the ORB's one connection to the back end.
struct FrontEnd {
    orb: Orb,
    backend: BankClient,
    forwarded: AtomicU64,
}

impl FrontEnd {
    fn count(&self) {
        self.forwarded.fetch_add(1, Ordering::Relaxed);
    }
}

impl Bank for FrontEnd {
    // The stubs' error types are the skeleton's: a user exception from the back end is handed
    // on to the client as it came, a system exception (the back end unreachable, say) too.
    fn deposit(
        &self,
        _ctx: &protorb::Context,
        req: AmountRequest,
    ) -> Result<Balance, BankDepositError> {
        self.count();
        self.backend.deposit(req)
    }

    fn withdraw(
        &self,
        _ctx: &protorb::Context,
        req: AmountRequest,
    ) -> Result<Balance, BankWithdrawError> {
        self.count();
        self.backend.withdraw(req)
    }

    fn transfer(
        &self,
        _ctx: &protorb::Context,
        req: TransferRequest,
    ) -> Result<Balance, BankTransferError> {
        self.count();
        self.backend.transfer(req)
    }

    fn get_balance(
        &self,
        _ctx: &protorb::Context,
        req: AccountRequest,
    ) -> Result<Balance, BankGetBalanceError> {
        self.count();
        self.backend.get_balance(req)
    }

    fn audit(&self, _ctx: &protorb::Context, req: ()) -> Result<AuditReply, protorb::Exception> {
        self.count();
        let mut reply = self.backend.audit(req)?;
        reply.forwarded = self.forwarded.load(Ordering::Relaxed);
        reply.backend_connections = self.orb.stats().connections_opened;
        Ok(reply)
    }
}

fn main() {
    let Cli {
        backend,
        port,
        threads,
        exit_on_eof,
    } = Cli::parse();
    let target = backend.unwrap_or_else(|| DEFAULT_BACKEND.to_string());

    let orb = Orb::builder()
        .listen(("127.0.0.1", port))
        .threads(threads)
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the ORB: {}", describe(&e))));
    let backend_ref = orb
        .string_to_object(&target)
        .unwrap_or_else(|e| fail(format!("bad reference {target:?}: {}", describe(&e))));
    // Checks the back end is there (and a Bank) before serving anyone.
    let backend = BankClient::narrow(&orb, backend_ref).unwrap_or_else(|e| {
        fail(format!(
            "back end: {}{}",
            describe(&e),
            if e.kind == protorb::SystemExceptionKind::TRANSIENT {
                "\n  is bank-backend running? cargo run -p orb-examples --bin bank-backend"
            } else {
                ""
            }
        ))
    });
    let servant = FrontEnd {
        orb: orb.clone(),
        backend: backend.clone(),
        forwarded: AtomicU64::new(0),
    };
    let reference = orb.activate(&b"bank"[..], BankSkeleton::new(servant));
    println!("{}", orb.object_to_string(&reference));
    if let Some(url) = reference.to_corbaloc() {
        println!("{url}");
    }
    let backend_name = backend.object_ref().to_corbaloc().unwrap_or(target);
    println!(
        "bank-frontend: {threads} threads, forwarding to {backend_name}; {}",
        if exit_on_eof {
            "exits when standard input closes"
        } else {
            "Ctrl-C to stop"
        }
    );
    let stop = Stop::new();
    if exit_on_eof {
        stop.on_stdin_eof();
    }
    let reason = stop.wait(None);
    let stats = orb.stats();
    orb.shutdown();
    println!(
        "bank-frontend: stopped ({reason}); {} requests from clients on {} connection{}, {} \
         requests to the back end on {} connection{}",
        stats.requests_received,
        stats.connections_accepted,
        if stats.connections_accepted == 1 {
            ""
        } else {
            "s"
        },
        stats.requests_sent,
        stats.connections_opened,
        if stats.connections_opened == 1 {
            ""
        } else {
            "s"
        },
    );
}
