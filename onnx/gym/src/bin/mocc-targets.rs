//! `mocc-targets`: MOCC's simulator targets (issue 6, section 7) for a model, as a table, each
//! row with its target and verdict; exit status 1 when one is missed.
//!
//! ```text
//! cargo run --release -p polycc-gym --bin mocc-targets -- [--model onnx/mocc.onnx] [--links 10] [--objectives 100]
//! ```
//!
//! Cases: (1) envelope links, w = <0.8,0.1,0.1>: utilization >= 0.85; (2) the same links,
//! w = <0.1,0.8,0.1>: mean RTT <= 1.3 x base with utilization >= 0.5; (3) the 36 landmarks:
//! Spearman(w_thr, throughput) >= 0.8 and Spearman(w_lat, -RTT) >= 0.8 (per-landmark means over
//! the links); (4) links x objectives, reward of eq. 2: MOCC's median above every classic
//! algorithm's; (5) 3 MOCC flows with the same w: Jain >= 0.9.

use polycc_algorithms::mocc::{ModelSlot, Preference};
use polycc_gym::targets::{self, Objectives};
use clap::Parser;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// MOCC's simulator targets (issue 6) for a model, as a table, each row with its target and
/// verdict; exit status 1 when one is missed.
#[derive(Parser)]
#[command(name = "mocc-targets", version)]
struct Args {
    /// The ONNX model (default: the agent's, onnx/mocc.onnx).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Links drawn from the training envelope.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    links: u64,
    /// Random objectives (preference vectors) per link for the reward case.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    objectives: u64,
    /// Seed of the links and objectives.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// A one-line progress bar on stderr, when stderr is a terminal (no carriage returns in logs).
struct Progress {
    what: &'static str,
    total: usize,
    done: usize,
}

impl Progress {
    fn new(what: &'static str, total: usize) -> Progress {
        Progress { what, total, done: 0 }
    }
    fn tick(&mut self) {
        self.done += 1;
        if !std::io::stderr().is_terminal() {
            return;
        }
        let filled = self.done * 30 / self.total.max(1);
        eprint!("\r{:<28} [{}{}] {}/{}", self.what, "#".repeat(filled), ".".repeat(30 - filled), self.done, self.total);
        if self.done == self.total {
            eprintln!();
        }
        std::io::stderr().flush().ok();
    }
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    s / n.max(1) as f64
}

fn main() -> ExitCode {
    let args = Args::parse();
    let path = match polycc_args::model_path(args.model.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("mocc-targets: {e}");
            return ExitCode::from(3);
        }
    };
    let slot = match polycc_args::load_model(&path) {
        Ok(m) => ModelSlot::new(m),
        Err(e) => {
            eprintln!("mocc-targets: {e}");
            return ExitCode::from(4);
        }
    };
    let links = targets::envelope_links(args.links as usize, args.seed);
    let mis = 400; // an episode's length
    let w_thr = Preference::new(&[0.8, 0.1, 0.1]).expect("valid");
    let w_lat = Preference::new(&[0.1, 0.8, 0.1]).expect("valid");
    let mocc = |w: &Preference, link, flows: usize, seed: u64| {
        let policy = targets::mocc_policy(w, &slot, link);
        targets::run(link, &policy, flows, targets::duration_for(link, mis), seed)
    };
    let mut rows: Vec<(String, String, String, bool)> = Vec::new();

    let mut p = Progress::new("thr and lat preferences", 2 * links.len());
    let thr: Vec<Objectives> = links.iter().map(|l| (mocc(&w_thr, l, 1, 1), p.tick()).0).collect();
    let lat: Vec<Objectives> = links.iter().map(|l| (mocc(&w_lat, l, 1, 1), p.tick()).0).collect();
    let u = mean(thr.iter().map(|o| o.utilization));
    rows.push(("envelope, w=<0.8,0.1,0.1>: utilization".into(), format!("{u:.3}"), ">= 0.85".into(), u >= 0.85));
    let ratio = mean(lat.iter().map(|o| o.mean_rtt_s / o.base_rtt_s));
    let ul = mean(lat.iter().map(|o| o.utilization));
    rows.push((
        "envelope, w=<0.1,0.8,0.1>: RTT/base, util".into(),
        format!("{ratio:.3}, {ul:.3}"),
        "<= 1.3, >= 0.5".into(),
        ratio <= 1.3 && ul >= 0.5,
    ));

    let marks = targets::landmarks();
    let mut p = Progress::new("36 landmarks", marks.len() * links.len());
    let per_mark: Vec<(f64, f64)> = marks
        .iter()
        .map(|w| {
            let runs: Vec<Objectives> = links.iter().map(|l| (mocc(w, l, 1, 2), p.tick()).0).collect();
            (mean(runs.iter().map(|o| o.utilization)), mean(runs.iter().map(|o| o.mean_rtt_s / o.base_rtt_s)))
        })
        .collect();
    let s_thr = targets::spearman(
        &marks.iter().map(|w| w.weights()[0]).collect::<Vec<_>>(),
        &per_mark.iter().map(|m| m.0).collect::<Vec<_>>(),
    );
    let s_lat = targets::spearman(
        &marks.iter().map(|w| w.weights()[1]).collect::<Vec<_>>(),
        &per_mark.iter().map(|m| -m.1).collect::<Vec<_>>(),
    );
    rows.push(("landmarks: Spearman(w_thr, throughput)".into(), format!("{s_thr:.3}"), ">= 0.8".into(), s_thr >= 0.8));
    rows.push(("landmarks: Spearman(w_lat, -RTT)".into(), format!("{s_lat:.3}"), ">= 0.8".into(), s_lat >= 0.8));

    let objectives = targets::random_objectives(args.objectives as usize, args.seed + 1);
    let classic = targets::classic();
    let mut p = Progress::new("links x objectives", links.len() * (objectives.len() + classic.len()));
    let mut mocc_rewards = Vec::new();
    let mut classic_rewards: Vec<Vec<f64>> = vec![Vec::new(); classic.len()];
    for l in &links {
        for w in &objectives {
            mocc_rewards.push(mocc(w, l, 1, 3).reward(w));
            p.tick();
        }
        for (i, (_, policy)) in classic.iter().enumerate() {
            let o = targets::run(l, policy, 1, targets::duration_for(l, mis), 3);
            classic_rewards[i].extend(objectives.iter().map(|w| o.reward(w)));
            p.tick();
        }
    }
    let mocc_median = targets::median(&mut mocc_rewards);
    let mut best = ("", f64::NEG_INFINITY);
    for ((name, _), r) in classic.iter().zip(classic_rewards.iter_mut()) {
        let m = targets::median(r);
        println!("  median reward {name:<8} {m:.4}");
        if m > best.1 {
            best = (name, m);
        }
    }
    rows.push((
        format!("{} links x {} objectives: median reward", links.len(), objectives.len()),
        format!("{mocc_median:.4} (best classic {} {:.4})", best.0, best.1),
        "> every classic".into(),
        mocc_median > best.1,
    ));

    let mut p = Progress::new("3 flows, same w", links.len());
    let jain = mean(links.iter().map(|l| (mocc(&w_thr, l, 3, 4).jain, p.tick()).0));
    rows.push(("3 MOCC flows, w=<0.8,0.1,0.1>: Jain".into(), format!("{jain:.3}"), ">= 0.9".into(), jain >= 0.9));

    println!("\nmodel {} ({} links from the envelope, seed {})", path.display(), links.len(), args.seed);
    println!("{:<46} {:<36} {:<16} verdict", "case", "measured", "target");
    for (case, measured, target, ok) in &rows {
        println!("{case:<46} {measured:<36} {target:<16} {}", if *ok { "ok" } else { "MISSED" });
    }
    // docs/mocc.md's table (`experiments/tables.py mocc-targets`; experiments/results_table.py).
    for (i, (case, measured, target, ok)) in rows.iter().enumerate() {
        println!("results-table mocc-targets {i}\t{case}\t{target}\t{measured}\t{}", if *ok { "yes" } else { "NO" });
    }
    if rows.iter().all(|r| r.3) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
