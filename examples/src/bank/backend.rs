//! Bank, the back end: the "database server" of the Leader/Followers paper's OLTP example. It
//! keeps the accounts and commits transactions; user exceptions (`InsufficientFunds`,
//! `UnknownAccount`) report refused ones.
//!
//! ```text
//! cargo run -p orb-examples --bin bank-backend                          # terminal 1
//! cargo run -p orb-examples --bin bank-frontend                         # terminal 2
//! cargo run -p orb-examples --bin bank-client                           # terminal 3
//! ```
//!
//! It listens on `corbaloc:iiop:1.2@127.0.0.1:12811/bank` by default and prints its IOR first.
//! `bank-client --demo` starts a back end and a front end by itself.

use clap::Parser;
use orb_examples::errors::describe;
use orb_examples::process::Stop;
use orb_examples::proto::bank::{
    AccountRequest, AmountRequest, AuditReply, Balance, Bank, BankDepositError,
    BankGetBalanceError, BankSkeleton, BankTransferError, BankWithdrawError, InsufficientFunds,
    TransferRequest, UnknownAccount,
};
use orb_examples::{fail, parse_duration};
use protorb::Orb;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// bank-backend: keeps the accounts and commits transactions.
///
/// It prints its IOR on the first line of its output, then its corbaloc URL.
#[derive(Parser, Debug)]
#[command(name = "bank-backend")]
struct Cli {
    /// Accounts acc-0 to acc-(N-1).
    #[arg(long, value_name = "N", default_value_t = 10)]
    accounts: u32,
    /// Opening balance of each.
    #[arg(long, value_name = "AMOUNT", default_value_t = 1000)]
    initial: u64,
    /// Time each transaction takes, as a database would (500ms, 3s, 1.5s, 2m, or seconds).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "1ms")]
    work: Duration,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, value_name = "N", default_value_t = 12811)]
    port: u16,
    /// ORB pool threads.
    #[arg(long, value_name = "N", default_value_t = 4)]
    threads: usize,
    /// Exit when standard input closes (for a parent process).
    #[arg(long)]
    exit_on_eof: bool,
}

struct BankServant {
    accounts: Mutex<BTreeMap<String, u64>>,
    transactions: AtomicU64,
    work: Duration,
}

fn unknown(account: &str) -> UnknownAccount {
    UnknownAccount {
        account: account.to_string(),
    }
}

impl BankServant {
    /// Simulated database work, outside the lock so transactions overlap.
    fn work(&self) {
        if !self.work.is_zero() {
            std::thread::sleep(self.work);
        }
    }
}

impl Bank for BankServant {
    fn deposit(
        &self,
        _ctx: &protorb::Context,
        req: AmountRequest,
    ) -> Result<Balance, BankDepositError> {
        self.work();
        let mut accounts = self.accounts.lock().unwrap();
        let balance = accounts
            .get_mut(&req.account)
            .ok_or_else(|| unknown(&req.account))?;
        *balance += req.amount;
        self.transactions.fetch_add(1, Ordering::Relaxed);
        Ok(Balance {
            account: req.account,
            amount: *balance,
        })
    }

    fn withdraw(
        &self,
        _ctx: &protorb::Context,
        req: AmountRequest,
    ) -> Result<Balance, BankWithdrawError> {
        self.work();
        let mut accounts = self.accounts.lock().unwrap();
        let balance = accounts
            .get_mut(&req.account)
            .ok_or_else(|| unknown(&req.account))?;
        if *balance < req.amount {
            return Err(InsufficientFunds {
                account: req.account,
                available: *balance,
                requested: req.amount,
            }
            .into());
        }
        *balance -= req.amount;
        self.transactions.fetch_add(1, Ordering::Relaxed);
        Ok(Balance {
            account: req.account,
            amount: *balance,
        })
    }

    fn transfer(
        &self,
        _ctx: &protorb::Context,
        req: TransferRequest,
    ) -> Result<Balance, BankTransferError> {
        self.work();
        let mut accounts = self.accounts.lock().unwrap();
        if !accounts.contains_key(&req.to) {
            return Err(unknown(&req.to).into());
        }
        let from = accounts
            .get_mut(&req.from)
            .ok_or_else(|| unknown(&req.from))?;
        if *from < req.amount {
            return Err(InsufficientFunds {
                account: req.from,
                available: *from,
                requested: req.amount,
            }
            .into());
        }
        *from -= req.amount;
        let left = *from;
        *accounts.get_mut(&req.to).expect("checked above") += req.amount;
        self.transactions.fetch_add(1, Ordering::Relaxed);
        Ok(Balance {
            account: req.from,
            amount: left,
        })
    }

    fn get_balance(
        &self,
        _ctx: &protorb::Context,
        req: AccountRequest,
    ) -> Result<Balance, BankGetBalanceError> {
        let accounts = self.accounts.lock().unwrap();
        let amount = *accounts
            .get(&req.account)
            .ok_or_else(|| unknown(&req.account))?;
        Ok(Balance {
            account: req.account,
            amount,
        })
    }

    fn audit(&self, _ctx: &protorb::Context, _req: ()) -> Result<AuditReply, protorb::Exception> {
        let accounts = self.accounts.lock().unwrap();
        Ok(AuditReply {
            total: accounts.values().sum(),
            accounts: accounts.len() as u32,
            transactions: self.transactions.load(Ordering::Relaxed),
            forwarded: 0,
            backend_connections: 0,
        })
    }
}

fn main() {
    let Cli {
        accounts: n,
        initial,
        work,
        port,
        threads,
        exit_on_eof,
    } = Cli::parse();

    let orb = Orb::builder()
        .listen(("127.0.0.1", port))
        .threads(threads)
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the ORB: {}", describe(&e))));
    let servant = BankServant {
        accounts: Mutex::new((0..n).map(|i| (format!("acc-{i}"), initial)).collect()),
        transactions: AtomicU64::new(0),
        work,
    };
    let reference = orb.activate(&b"bank"[..], BankSkeleton::new(servant));
    println!("{}", orb.object_to_string(&reference));
    if let Some(url) = reference.to_corbaloc() {
        println!("{url}");
    }
    println!(
        "bank-backend: {n} accounts of {initial}, {threads} threads, {work:?} per transaction; \
         {}",
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
        "bank-backend: stopped ({reason}); {} requests received on {} connection{}",
        stats.requests_received,
        stats.connections_accepted,
        if stats.connections_accepted == 1 {
            ""
        } else {
            "s"
        }
    );
}
