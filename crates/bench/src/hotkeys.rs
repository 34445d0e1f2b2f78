//! `affinity bench hotkeys`: the share of writes the busiest key range
//! takes when users (and, with `--apps`, applications on the shared
//! tables) are Zipf-distributed, for the events table and the
//! profile-state rows, with the keys the store holds (the engine's key
//! and salt functions, the shared tables' tenant prefix): unsalted and
//! salted by `app,user`; and, as models of layouts not built, spread
//! (the salt over the whole key) and hot users spread (only the most
//! active users of the day before over sub-rows salted over the whole
//! key, the others as built). No store: key ranges are modelled as
//! Bigtable forms them.
//!
//! Model: a day of history (`--writes` events, users drawn from Zipf(s))
//! is split into `--ranges` ranges of equal row count, as tablets split
//! by size. The next day's writes follow the same distribution; a user's
//! new events sort after their history (the key ends with the time), so
//! each lands in the range holding the end of its user's prefix; a
//! user's state write lands on the row `user,DAY`. The figure is the
//! busiest range's share of the new writes over the mean share (1/ranges);
//! the goal is at most 1.5.
//!
//! A second model cuts the ranges by load, as Bigtable also does, between
//! rows only: on the first half of the day's writes, measured on the
//! second. It compares the layouts without hot lists with the layouts as
//! built (hot users' day rows over adjacent sub-rows, their events over
//! the same buckets of their day, `docs/design/profiles.md`).

use affinity_engine::hot::{self, sub_row_key, HotPolicy};
use affinity_engine::state::{state_row_key, EventId};
use affinity_engine::DAY_MILLIS;
use affinity_rowkey::composite::event_key_text;
use affinity_rowkey::salt::Salter;
use rand::{Rng, SeedableRng};

/// Flags of `affinity bench hotkeys`.
#[derive(clap::Args, Debug, Clone)]
pub struct HotKeysArgs {
    /// Distinct users (of each application).
    #[arg(long, default_value_t = 100_000)]
    pub users: usize,
    /// Applications on the shared tables, their activity Zipf-distributed
    /// too (the same exponent); each write is one application's, of one
    /// of its users.
    #[arg(long, default_value_t = 1)]
    pub apps: usize,
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
    /// The hot-user model: this many of the most active users (by the
    /// day before) are spread; the others keep one row per day.
    #[arg(long, default_value_t = 100)]
    pub hot_users: usize,
    /// The hot-user model: sub-rows a hot user's writes are spread over.
    #[arg(long, default_value_t = 64)]
    pub sub_rows: u32,
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

/// The busiest range's share of the second half of `writes` over the
/// mean, the ranges cut by load as Bigtable also splits tablets: between
/// rows, each range taking about an equal share of the first half's
/// writes (a row busier than that share is a range of its own, since a
/// row cannot be split).
fn busiest_by_load(writes: &[Vec<u8>], ranges: usize) -> f64 {
    let (learn, measured) = writes.split_at(writes.len() / 2);
    let mut seen: Vec<&[u8]> = learn.iter().map(Vec::as_slice).collect();
    seen.sort_unstable();
    let share = seen.len().div_ceil(ranges).max(1);
    let mut cuts: Vec<&[u8]> = Vec::new();
    let mut taken = 0;
    for (i, key) in seen.iter().enumerate() {
        taken += 1;
        let last_of_row = seen.get(i + 1).is_none_or(|next| next != key);
        if taken >= share && last_of_row && cuts.len() + 1 < ranges {
            cuts.push(key);
            taken = 0;
        }
    }
    let mut load = vec![0usize; cuts.len() + 1];
    for key in measured {
        load[cuts.partition_point(|c| *c < key.as_slice())] += 1;
    }
    let busiest = load.iter().copied().max().unwrap_or(0);
    busiest as f64 * ranges as f64 / measured.len().max(1) as f64
}

/// How an events key is salted in a layout.
#[derive(Clone, Copy)]
enum Salt {
    None,
    /// By `app,user` (the engine's events salter).
    ByUser,
    /// Over the whole key.
    WholeKey,
}

/// Print the table.
pub fn run(args: HotKeysArgs) -> anyhow::Result<()> {
    if args.users == 0
        || args.apps == 0
        || args.writes == 0
        || args.ranges < 2
        || args.sub_rows == 0
    {
        anyhow::bail!(
            "--users, --apps, --writes and --sub-rows must be positive and --ranges at least 2"
        );
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    // A writer is `app * users + user`, its application and its user each
    // drawn from Zipf (one application: the users alone, as before).
    let writers = |rng: &mut rand::rngs::StdRng| -> Vec<usize> {
        let users = zipf_draws(args.users, args.zipf, args.writes, rng);
        if args.apps == 1 {
            return users;
        }
        let apps = zipf_draws(args.apps, args.zipf, args.writes, rng);
        apps.iter()
            .zip(users)
            .map(|(a, u)| a * args.users + u)
            .collect()
    };
    let history = writers(&mut rng);
    let today = writers(&mut rng);
    let user = |w: usize| {
        format!(
            "u{:08x}",
            ((w % args.users) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32
        )
    };
    // The keys the store holds: applications on the shared tables (their
    // tenant prefixes), events keys and salts from the engine's own
    // functions, state rows `user,DAY` from `state_row_key`.
    let app_ids: Vec<String> = match args.apps {
        1 => vec!["app".to_string()],
        n => (0..n).map(|a| format!("app{a}")).collect(),
    };
    let tenants = app_ids
        .iter()
        .map(|id| affinity_model::prefixed::tenant_prefix(id))
        .collect::<Result<Vec<_>, _>>()?;
    let app_of = |w: usize| w / args.users;
    let app = |w: usize| app_ids[app_of(w)].as_str();
    let by_user = affinity_engine::events_salter(args.buckets)?;
    let whole_key = Salter::new(args.buckets)?;
    let physical = |w: usize, s: Option<&Salter>, logical: String| {
        let salted = match s {
            Some(s) => s.salt(logical.as_bytes()),
            None => logical.into_bytes(),
        };
        [tenants[app_of(w)].as_slice(), &salted].concat()
    };
    let day = 20_418i64; // 2025-11-26
                         // A day of events keys, each user's salted as `salt(user)` says.
    let event_keys =
        |draws: &[usize], day: i64, salt: &dyn Fn(usize) -> Salt, rng: &mut rand::rngs::StdRng| {
            draws
                .iter()
                .enumerate()
                .map(|(i, &u)| {
                    let ts = day * DAY_MILLIS + (i as i64 * DAY_MILLIS) / draws.len() as i64;
                    let logical = event_key_text(app(u), &user(u), ts, rng.random())?;
                    let salter = match salt(u) {
                        Salt::None => None,
                        Salt::ByUser => Some(&by_user),
                        Salt::WholeKey => Some(&whole_key),
                    };
                    Ok(physical(u, salter, logical))
                })
                .collect::<anyhow::Result<Vec<_>>>()
        };
    // The day before's writes per user, and per application.
    let mut counts = std::collections::HashMap::<usize, usize>::new();
    let mut app_writes = vec![0u64; args.apps];
    for &u in &history {
        *counts.entry(u).or_default() += 1;
        app_writes[app_of(u)] += 1;
    }
    // The users the engine lists (its default policy on the day before's
    // adds of their application), with their sub-rows.
    let policy = HotPolicy::default();
    let listed: std::collections::HashMap<usize, u32> = counts
        .iter()
        .filter_map(|(&u, &n)| Some((u, policy.rows_for(n as u64, app_writes[app_of(u)])?)))
        .collect();
    // The model's hot users: the most active of the day before.
    let hot: std::collections::HashSet<usize> = {
        let mut ranked: Vec<(usize, usize)> = counts.iter().map(|(u, n)| (*u, *n)).collect();
        ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
            .iter()
            .take(args.hot_users)
            .map(|(u, _)| *u)
            .collect()
    };
    println!(
        "{} users (Zipf {}) of each of {} application(s) (Zipf {}), {} writes a day, {} ranges, {} salt buckets; busiest range / mean (goal <= 1.5)",
        args.users, args.zipf, args.apps, args.zipf, args.writes, args.ranges, args.buckets
    );
    println!(
        "| table | unsalted | salted by app,user | spread (model, not built) | {} hot users spread over {} (model, not built) |\n|---|---|---|---|---|",
        args.hot_users, args.sub_rows
    );
    // Unsalted, salted by `app,user`, salted over the whole key, and hot
    // users' events over the whole key with the others' by `app,user`.
    let layouts: [&dyn Fn(usize) -> Salt; 4] = [
        &|_| Salt::None,
        &|_| Salt::ByUser,
        &|_| Salt::WholeKey,
        &|u| {
            if hot.contains(&u) {
                Salt::WholeKey
            } else {
                Salt::ByUser
            }
        },
    ];
    let mut row = Vec::new();
    // The day's events keys salted by `app,user`, as built, for the
    // load-based model below.
    let mut events_by_user = Vec::new();
    for (layout, salt) in layouts.into_iter().enumerate() {
        let old = event_keys(&history, day - 1, salt, &mut rng)?;
        let new = event_keys(&today, day, salt, &mut rng)?;
        row.push(busiest_over_mean(old, &new, args.ranges));
        if layout == 1 {
            events_by_user = new;
        }
    }
    println!(
        "| events | {:.2} | {:.2} | {:.2} | {:.2} |",
        row[0], row[1], row[2], row[3]
    );
    // State rows: one per active user and day; the engine does not salt
    // them. The spread model: each state write on a sub-row
    // `user,DAY,s` (s = the event id's hash mod buckets) salted over its
    // whole key.
    let mut active: Vec<usize> = history.clone();
    active.sort_unstable();
    active.dedup();
    let old: Vec<Vec<u8>> = active
        .iter()
        .map(|&u| physical(u, None, state_row_key(&user(u), day - 1)))
        .collect();
    let new: Vec<Vec<u8>> = today
        .iter()
        .map(|&u| physical(u, None, state_row_key(&user(u), day)))
        .collect();
    let unsalted = busiest_over_mean(old, &new, args.ranges);
    // The sub-row of a day's `i`-th write (a stand-in for the event id's
    // hash) among `subs`.
    let sub_row =
        |i: usize, subs: u32| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) % u64::from(subs);
    let sub_of = |u: usize, d: i64, i: usize, subs: u32| {
        let s = sub_row(i, subs);
        physical(
            u,
            Some(&whole_key),
            format!("{},{s}", state_row_key(&user(u), d)),
        )
    };
    // The state writes of `draws` on day `d`, each at `key(user, d, i)`
    // (i: the write's place in the day).
    let state_keys =
        |draws: &[usize], d: i64, key: &dyn Fn(usize, i64, usize) -> Vec<u8>| -> Vec<Vec<u8>> {
            draws
                .iter()
                .enumerate()
                .map(|(i, &u)| key(u, d, i))
                .collect()
        };
    // The busiest range of the day's state writes over the day before's.
    let state_busiest = |key: &dyn Fn(usize, i64, usize) -> Vec<u8>| {
        busiest_over_mean(
            state_keys(&history, day - 1, key),
            &state_keys(&today, day, key),
            args.ranges,
        )
    };
    let spread = state_busiest(&|u, d, i| sub_of(u, d, i, args.buckets));
    // Hot users on `--sub-rows` sub-rows salted over the whole key, the
    // others on their one row a day.
    let hot_spread = state_busiest(&|u, d, i| {
        if hot.contains(&u) {
            sub_of(u, d, i, args.sub_rows)
        } else {
            physical(u, None, state_row_key(&user(u), d))
        }
    });
    println!("| profile state | {unsalted:.2} | (not salted) | {spread:.2} | {hot_spread:.2} |");
    // Load-based splits: the events salted by `app,user` and the state
    // rows (`new`, the day's rows above) without hot lists, and as built
    // with them: a listed user's events keyed in their sub-row's bucket
    // (`EventId::row_key`), its day rows over the sub-rows `user,DAY,kk`,
    // each event's by the engine's `sub_row` of its id.
    let mut events_by_lists = Vec::with_capacity(today.len());
    let mut spread_by_lists = Vec::with_capacity(today.len());
    for (i, &u) in today.iter().enumerate() {
        let id = EventId {
            timestamp_millis: day * DAY_MILLIS + (i as i64 * DAY_MILLIS) / today.len() as i64,
            suffix: rng.random(),
        };
        let rows = listed.get(&u).copied().unwrap_or(1);
        events_by_lists.push(physical(
            u,
            Some(&by_user),
            id.row_key(app(u), &user(u), rows)?,
        ));
        spread_by_lists.push(match rows {
            1 => physical(u, None, state_row_key(&user(u), day)),
            _ => physical(u, None, sub_row_key(&user(u), day, hot::sub_row(&id, rows))),
        });
    }
    println!(
        "with load-based splits (cut between rows on the first half of the day's writes, the second half measured):"
    );
    println!(
        "| table | as built, nobody listed | as built: {} users on the hot list (default policy), over {} to {} sub-rows |\n|---|---|---|",
        listed.len(),
        listed.values().min().copied().unwrap_or(0),
        listed.values().max().copied().unwrap_or(0),
    );
    println!(
        "| events (salted by app,user) | {:.2} | {:.2} |",
        busiest_by_load(&events_by_user, args.ranges),
        busiest_by_load(&events_by_lists, args.ranges)
    );
    println!(
        "| profile state | {:.2} | {:.2} |",
        busiest_by_load(&new, args.ranges),
        busiest_by_load(&spread_by_lists, args.ranges)
    );
    Ok(())
}
