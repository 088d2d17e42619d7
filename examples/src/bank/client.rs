//! Bank, the clients: many threads send transfers to the front end at once; at the end the
//! client checks that money was neither made nor lost, that an overdraft comes back as the
//! typed user exception `InsufficientFunds` (through the front end, from the back end), and
//! that the front end used one connection to the back end for everything.
//!
//! Self-contained (what CI runs): `--demo` starts `bank-backend` and `bank-frontend` itself,
//! runs the workload, stops them, and exits 0 if every check passed.
//!
//! ```text
//! cargo run -p orb-examples --bin bank-client -- --demo
//! ```
//!
//! Or against servers started by hand (see `bank-backend`):
//!
//! ```text
//! cargo run -p orb-examples --bin bank-client -- --threads 16 --transfers 200
//! ```
//!
//! The default front end is `corbaloc:iiop:1.2@127.0.0.1:12812/bank`.

use clap::Parser;
use orb_examples::errors::{describe, describe_exception};
use orb_examples::fail;
use orb_examples::process::{sibling_exe, Peer};
use orb_examples::proto::bank::{
    AccountRequest, AmountRequest, BankClient, BankGetBalanceError, BankTransferError,
    BankWithdrawError, TransferRequest,
};
use protorb::Orb;
use std::time::{Duration, Instant};

const DEFAULT_FRONTEND: &str = "corbaloc:iiop:1.2@127.0.0.1:12812/bank";

/// bank-client: many client threads send transfers through the bank's front end.
///
/// At the end it checks that money was neither made nor lost and prints the verdict; exit
/// status 0 if every check passed.
#[derive(Parser, Debug)]
#[command(name = "bank-client")]
struct Cli {
    /// The front end, IOR:... or corbaloc:...
    /// (default: corbaloc:iiop:1.2@127.0.0.1:12812/bank)
    frontend: Option<String>,
    /// Start bank-backend and bank-frontend first (on free ports), then stop them.
    #[arg(long)]
    demo: bool,
    /// Client threads.
    #[arg(long, value_name = "N", default_value_t = 8)]
    threads: u64,
    /// Transfers per thread.
    #[arg(long, value_name = "N", default_value_t = 50)]
    transfers: u64,
}

/// What one client thread did.
#[derive(Default)]
struct Tally {
    committed: u64,
    refused: u64,
}

/// A small xorshift generator: enough randomness for a workload, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn main() {
    let Cli {
        frontend: target,
        demo,
        threads,
        transfers,
    } = Cli::parse();

    // --demo: the two servers as child processes; the front end gets the back end's IOR.
    let mut servers = Vec::new();
    let target = if demo {
        if target.is_some() {
            fail("--demo starts its own front end: give no FRONTEND");
        }
        let eof = "--exit-on-eof".to_string();
        let backend_exe = sibling_exe("bank-backend").unwrap_or_else(|e| fail(e));
        let backend = Peer::spawn(
            "backend",
            &backend_exe,
            &["--port=0".into(), eof.clone()],
            Duration::from_secs(10),
        )
        .unwrap_or_else(|e| fail(e));
        let frontend_exe = sibling_exe("bank-frontend").unwrap_or_else(|e| fail(e));
        let frontend = Peer::spawn(
            "frontend",
            &frontend_exe,
            &[backend.reference().to_string(), "--port=0".into(), eof],
            Duration::from_secs(10),
        )
        .unwrap_or_else(|e| fail(e));
        let r = frontend.reference().to_string();
        // Stopped in this order at the end: the front end first, then the back end.
        servers.push(frontend);
        servers.push(backend);
        r
    } else {
        target.unwrap_or_else(|| DEFAULT_FRONTEND.to_string())
    };

    let orb = Orb::builder()
        .no_listen()
        .threads(0)
        .call_timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the ORB: {}", describe(&e))));
    let reference = orb
        .string_to_object(&target)
        .unwrap_or_else(|e| fail(format!("bad reference {target:?}: {}", describe(&e))));
    let bank = BankClient::narrow(&orb, reference).unwrap_or_else(|e| {
        fail(format!(
            "front end: {}{}",
            describe(&e),
            if e.kind == protorb::SystemExceptionKind::TRANSIENT {
                "\n  is bank-frontend running? or run the self-contained demo: bank-client --demo"
            } else {
                ""
            }
        ))
    });

    let before = bank
        .audit(())
        .unwrap_or_else(|e| fail(format!("audit: {}", describe_exception(&e))));
    let accounts = u64::from(before.accounts);
    if accounts < 2 {
        fail("the bank needs at least two accounts for transfers");
    }
    println!(
        "bank-client: {} accounts holding {} in total; {threads} threads x {transfers} transfers",
        before.accounts, before.total
    );

    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let bank = bank.clone();
            std::thread::spawn(move || -> Result<Tally, String> {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1).wrapping_mul(0x2545_F491));
                let mut tally = Tally::default();
                for _ in 0..transfers {
                    let from = rng.below(accounts);
                    let to = (from + 1 + rng.below(accounts - 1)) % accounts;
                    let req = TransferRequest {
                        from: format!("acc-{from}"),
                        to: format!("acc-{to}"),
                        amount: 1 + rng.below(400),
                    };
                    match bank.transfer(req) {
                        Ok(_) => tally.committed += 1,
                        Err(BankTransferError::InsufficientFunds(_)) => tally.refused += 1,
                        Err(e) => return Err(format!("transfer failed: {e}")),
                    }
                }
                Ok(tally)
            })
        })
        .collect();
    let mut total = Tally::default();
    let mut problems = Vec::new();
    for w in workers {
        match w.join() {
            Ok(Ok(t)) => {
                total.committed += t.committed;
                total.refused += t.refused;
            }
            Ok(Err(e)) => problems.push(e),
            Err(_) => problems.push("a client thread panicked".to_string()),
        }
    }
    let elapsed = started.elapsed();
    println!(
        "bank-client: {} transfers committed, {} refused with InsufficientFunds, in {:.2} s \
         ({:.0} transfers/s)",
        total.committed,
        total.refused,
        elapsed.as_secs_f64(),
        (total.committed + total.refused) as f64 / elapsed.as_secs_f64()
    );

    // An overdraft: one more than the balance. It must arrive as the typed user exception.
    match bank.get_balance(AccountRequest {
        account: "acc-0".into(),
    }) {
        Ok(b) => match bank.withdraw(AmountRequest {
            account: "acc-0".into(),
            amount: b.amount + 1,
        }) {
            Err(BankWithdrawError::InsufficientFunds(e)) => {
                println!(
                    "bank-client: overdraft refused, typed: InsufficientFunds {{ account: {:?}, \
                     available: {}, requested: {} }}",
                    e.account, e.available, e.requested
                );
                if e.available != b.amount || e.requested != b.amount + 1 {
                    problems.push(format!("InsufficientFunds carries wrong amounts: {e:?}"));
                }
            }
            Ok(b) => problems.push(format!("overdraft accepted: {b:?}")),
            Err(e) => problems.push(format!("overdraft: expected InsufficientFunds, got {e}")),
        },
        Err(e) => problems.push(format!("balance of acc-0: {e}")),
    }
    // An account that does not exist: the other declared exception.
    match bank.get_balance(AccountRequest {
        account: "acc-none".into(),
    }) {
        Err(BankGetBalanceError::UnknownAccount(e)) => {
            println!(
                "bank-client: unknown account refused, typed: UnknownAccount {{ account: {:?} }}",
                e.account
            );
        }
        other => problems.push(format!("acc-none: expected UnknownAccount, got {other:?}")),
    }

    let after = bank
        .audit(())
        .unwrap_or_else(|e| fail(format!("audit: {}", describe_exception(&e))));
    if after.total != before.total {
        problems.push(format!(
            "money changed: {} before, {} after",
            before.total, after.total
        ));
    }
    if after.transactions - before.transactions != total.committed {
        problems.push(format!(
            "the back end committed {} transactions, the clients saw {}",
            after.transactions - before.transactions,
            total.committed
        ));
    }
    if demo && after.backend_connections != 1 {
        problems.push(format!(
            "the front end opened {} connections to the back end, expected 1",
            after.backend_connections
        ));
    }
    orb.shutdown();

    for mut s in servers {
        match s.finish(Duration::from_secs(10)) {
            Ok(status) if status.success() => {}
            Ok(status) => problems.push(format!("{} exited with {status}", s.label())),
            Err(e) => problems.push(e),
        }
    }

    if problems.is_empty() {
        println!(
            "verdict: OK {} transfers from {threads} threads ({} refused with InsufficientFunds); \
             total {} unchanged; the front end forwarded {} requests over {} connection{} to the \
             back end",
            total.committed + total.refused,
            total.refused,
            after.total,
            after.forwarded,
            after.backend_connections,
            if after.backend_connections == 1 {
                ""
            } else {
                "s"
            },
        );
    } else {
        println!("verdict: FAILED: {}", problems.join("; "));
        std::process::exit(1);
    }
}
