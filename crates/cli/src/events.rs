//! `affinity events tail`: follow a running server's events debugger
//! (`GET /1/events/debug`, long-polled with its `since` cursor), like
//! `tail -f`: the recent events first, then each new one as it arrives,
//! accepted or rejected with the reason.

use anyhow::{bail, Context};
use serde_json::Value;

#[derive(clap::Subcommand)]
pub enum EventsCommand {
    /// Print an application's recent events on a server (accepted, and
    /// rejected with the reason), then follow new ones live.
    Tail(TailArgs),
}

#[derive(clap::Args)]
pub struct TailArgs {
    /// Application id.
    #[arg(long)]
    app: String,
    /// The server's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// A key of the application with the `profiles` (or `admin`) ACL.
    #[arg(long)]
    api_key: String,
    /// Only `accepted` or only `rejected` events.
    #[arg(long, value_parser = ["accepted", "rejected"])]
    status: Option<String>,
    /// Only events of this `userToken` (or `authenticatedUserToken`).
    #[arg(long)]
    user_token: Option<String>,
    /// Only events of this `eventName`.
    #[arg(long)]
    event_name: Option<String>,
    /// How many recent events to print first.
    #[arg(long, short = 'n', default_value_t = 10)]
    lines: usize,
    /// Print each event as the API's JSON, one a line.
    #[arg(long)]
    json: bool,
    /// Exit after printing this many events (default: follow until
    /// interrupted).
    #[arg(long)]
    count: Option<usize>,
    /// Print the recent events and exit.
    #[arg(long)]
    no_follow: bool,
}

/// How long one long poll waits on the server (seconds).
const WAIT_SECONDS: &str = "30";

pub fn run(cmd: EventsCommand) -> anyhow::Result<()> {
    let EventsCommand::Tail(args) = cmd;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(tail(args))
}

async fn tail(args: TailArgs) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let url = format!("{}/1/events/debug", args.url.trim_end_matches('/'));
    let mut filters: Vec<(&str, String)> = Vec::new();
    for (name, value) in [
        ("status", &args.status),
        ("userToken", &args.user_token),
        ("eventName", &args.event_name),
    ] {
        if let Some(v) = value {
            filters.push((name, v.clone()));
        }
    }
    let get = |params: Vec<(&'static str, String)>| {
        let request = client
            .get(&url)
            .header("x-algolia-application-id", &args.app)
            .header("x-algolia-api-key", &args.api_key)
            .query(&filters)
            .query(&params);
        async move {
            let response = request.send().await.context("calling the server")?;
            let status = response.status();
            let text = response.text().await.context("reading the answer")?;
            let body: Value = serde_json::from_str(&text)
                .with_context(|| format!("the server answered {status}: {text}"))?;
            if !status.is_success() {
                bail!("the server answered {status}: {}", body["message"]);
            }
            anyhow::Ok(body)
        }
    };
    let mut printed = 0;
    let first = get(vec![("limit", args.lines.clamp(1, 1000).to_string())]).await?;
    let mut cursor = first["cursor"].as_u64().unwrap_or(0);
    let recent = first["events"].as_array().cloned().unwrap_or_default();
    let skip = recent.len().saturating_sub(args.lines);
    for entry in recent.iter().skip(skip) {
        if args.count.is_some_and(|c| printed >= c) {
            return Ok(());
        }
        print_entry(entry, args.json);
        printed += 1;
    }
    while !args.no_follow && args.count.is_none_or(|c| printed < c) {
        let answer = get(vec![
            ("since", cursor.to_string()),
            ("wait", WAIT_SECONDS.to_string()),
            ("limit", "1000".to_string()),
        ])
        .await?;
        for entry in answer["events"].as_array().into_iter().flatten() {
            if args.count.is_some_and(|c| printed >= c) {
                return Ok(());
            }
            print_entry(entry, args.json);
            printed += 1;
        }
        cursor = answer["cursor"].as_u64().unwrap_or(cursor);
    }
    Ok(())
}

/// One line per event: time, status, type, name, user, what it is about
/// and where it came from; the rejection's field and message.
fn print_entry(entry: &Value, json: bool) {
    if json {
        println!("{entry}");
        return;
    }
    let s = |v: &Value| v.as_str().unwrap_or("-").to_string();
    let event = &entry["event"];
    let about = ["objectIDs", "filters"]
        .iter()
        .find_map(|k| event[*k].as_array())
        .map(|items| items.iter().map(&s).collect::<Vec<_>>().join(","))
        .unwrap_or_else(|| "-".into());
    let request = &entry["request"];
    let from = [&request["origin"], &request["remoteAddr"]]
        .into_iter()
        .find_map(|v| v.as_str())
        .unwrap_or("-");
    let mut line = format!(
        "{} {} {} {:?} user={} about={} from={}",
        s(&entry["receivedAt"]),
        s(&entry["status"]),
        s(&event["eventType"]),
        s(&event["eventName"]),
        s(&event["userToken"]),
        about,
        from,
    );
    if let Some(r) = entry["rejection"].as_object() {
        line.push_str(&format!(
            " [{} {}] {}",
            r["status"],
            s(&r["code"]),
            s(&r["message"])
        ));
    }
    println!("{line}");
}
