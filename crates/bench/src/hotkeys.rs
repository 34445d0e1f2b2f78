//! `affinity bench hotkeys`: the share of writes the busiest key range
//! takes when users are Zipf-distributed, for the events table and the
//! profile-state rows, unsalted and salted by `app,user` (the engine's
//! salting). No store: key ranges are modelled as Bigtable forms them.
//!
//! Model: a day of history (`--writes` events, users drawn from Zipf(s))
//! is split into `--ranges` ranges of equal row count, as tablets split
//! by size. The next day's writes follow the same distribution; a user's
//! new events sort after their history (the key ends with the time), so
//! each lands in the range holding the end of its user's prefix; a
//! user's state write lands on the row `user,DAY`. The figure is the
//! busiest range's share of the new writes over the mean share (1/ranges);
//! the goal is at most 1.5.

use affinity_rowkey::salt::{SaltScope, Salter};
use rand::{Rng, SeedableRng};

/// Flags of `affinity bench hotkeys`.
#[derive(clap::Args, Debug, Clone)]
pub struct HotKeysArgs {
    /// Distinct users.
    #[arg(long, default_value_t = 100_000)]
    pub users: usize,
    /// Writes per day (events).
    #[arg(long, default_value_t = 1_000_000)]
    pub writes: usize,
    /// Key ranges (tablets) the table is split into.
    #[arg(long, default_value_t = 16)]
    pub ranges: usize,
    /// Salt buckets for the salted layouts.
    #[arg(long, default_value_t = 16)]
    pub buckets: u32,
    /// Zipf exponent of the users' activity.
    #[arg(long, default_value_t = 1.1)]
    pub zipf: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Users drawn from Zipf(`s`) over `n`, by inverse CDF.
fn zipf_draws(n: usize, s: f64, count: usize, rng: &mut impl Rng) -> Vec<usize> {
    let mut cdf = Vec::with_capacity(n);
    let mut total = 0.0;
    for k in 1..=n {
        total += 1.0 / (k as f64).powf(s);
        cdf.push(total);
    }
    (0..count)
        .map(|_| {
            let x = rng.random::<f64>() * total;
            cdf.partition_point(|&c| c < x).min(n - 1)
        })
        .collect()
}

/// The busiest range's share of `writes` over the mean: `history` keys
/// cut into `ranges` ranges of equal count, each write at its key.
fn busiest_over_mean(mut history: Vec<Vec<u8>>, writes: &[Vec<u8>], ranges: usize) -> f64 {
    history.sort_unstable();
    let cuts: Vec<&[u8]> = (1..ranges)
        .map(|i| history[i * history.len() / ranges].as_slice())
        .collect();
    let mut load = vec![0usize; ranges];
    for key in writes {
        load[cuts.partition_point(|c| *c <= key.as_slice())] += 1;
    }
    let busiest = load.iter().copied().max().unwrap_or(0);
    busiest as f64 * ranges as f64 / writes.len().max(1) as f64
}

/// Print the table of the four layouts.
pub fn run(args: HotKeysArgs) -> anyhow::Result<()> {
    if args.users == 0 || args.writes == 0 || args.ranges < 2 {
        anyhow::bail!("--users and --writes must be positive and --ranges at least 2");
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let history = zipf_draws(args.users, args.zipf, args.writes, &mut rng);
    let today = zipf_draws(args.users, args.zipf, args.writes, &mut rng);
    let user = |u: usize| {
        format!(
            "u{:08x}",
            (u as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32
        )
    };
    let events_salter = Salter::new(args.buckets)?.with_scope(SaltScope::Components {
        separator: b',',
        count: 2,
    });
    let state_salter = Salter::new(args.buckets)?.with_scope(SaltScope::Components {
        separator: b',',
        count: 1,
    });
    let salt = |s: Option<&Salter>, key: Vec<u8>| match s {
        Some(s) => s.salt(&key),
        None => key,
    };
    println!(
        "users {} (Zipf {}), {} writes a day, {} ranges, {} salt buckets; busiest range / mean (goal <= 1.5)",
        args.users, args.zipf, args.writes, args.ranges, args.buckets
    );
    println!("| table | unsalted | salted by app,user |\n|---|---|---|");
    let mut row = Vec::new();
    for salter in [None, Some(&events_salter)] {
        // Event keys: `app,user,time`; history at times 0.., today after.
        let old: Vec<Vec<u8>> = history
            .iter()
            .enumerate()
            .map(|(i, &u)| salt(salter, format!("app,{},{i:012}", user(u)).into_bytes()))
            .collect();
        let new: Vec<Vec<u8>> = today
            .iter()
            .enumerate()
            .map(|(i, &u)| salt(salter, format!("app,{},~{i:012}", user(u)).into_bytes()))
            .collect();
        row.push(busiest_over_mean(old, &new, args.ranges));
    }
    println!("| events | {:.2} | {:.2} |", row[0], row[1]);
    let mut row = Vec::new();
    for salter in [None, Some(&state_salter)] {
        // State rows: one per active user and day.
        let mut active: Vec<usize> = history.clone();
        active.sort_unstable();
        active.dedup();
        let old: Vec<Vec<u8>> = active
            .iter()
            .map(|&u| salt(salter, format!("{},20261125", user(u)).into_bytes()))
            .collect();
        let new: Vec<Vec<u8>> = today
            .iter()
            .map(|&u| salt(salter, format!("{},20261126", user(u)).into_bytes()))
            .collect();
        row.push(busiest_over_mean(old, &new, args.ranges));
    }
    println!("| profile state | {:.2} | {:.2} |", row[0], row[1]);
    Ok(())
}
