//! `polycc-portus`: the CCP agent. Skeleton until the agent issue: it already takes the policy
//! flags shared with `polycc-sim` (one parser, `polycc-args`) and validates them, but has no
//! datapath connection yet, so it says so and exits.

use clap::{CommandFactory, Parser};
use polycc_args::quantity::ReportInterval;
use polycc_args::PolicyArgs;
use std::process::ExitCode;

/// The polycc CCP agent (skeleton: validates its flags; the netlink datapath is not wired yet).
#[derive(Parser, Debug)]
#[command(name = "polycc-portus", version)]
struct Cli {
    #[command(flatten)]
    policy: PolicyArgs,

    /// Report cadence: rtt (once per RTT) or a duration such as 10ms.
    #[arg(long, default_value = "rtt")]
    report_interval: ReportInterval,

    /// Validate the flags, print the policy, and exit.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let policy = match cli.policy.policy() {
        Ok(p) => p,
        Err(e) => Cli::command().error(clap::error::ErrorKind::ValueValidation, e).exit(),
    };
    println!("policy {} (reports: {})", policy.describe(), cli.report_interval);
    if cli.check {
        return ExitCode::SUCCESS;
    }
    eprintln!("polycc-portus: the kernel datapath connection is not implemented yet; use polycc-sim meanwhile");
    ExitCode::from(1)
}
