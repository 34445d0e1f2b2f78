//! The deployment files in `deploy/` stay true to the binary: every
//! Kubernetes manifest parses, every command and flag its containers run
//! exists in `affinity COMMAND --help`, every setting its ConfigMap gives
//! is one the binary reads, the Indexed Jobs' shards match their
//! completions, and the Dockerfile builds the binary this crate makes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml::Value;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_affinity"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run affinity --help");
    assert!(out.status.success(), "affinity {args:?} --help failed");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Whether `text` has `flag` as a whole word.
fn has_flag(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(at, _)| {
        let next = text[at + flag.len()..].chars().next();
        !matches!(next, Some(c) if c.is_ascii_alphanumeric() || c == '-')
    })
}

/// Every document of every manifest.
fn manifests() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(deploy().join("k8s"))
        .expect("deploy/k8s")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read manifest");
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = <Value as serde::Deserialize>::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            assert!(
                value["apiVersion"].is_string() && value["kind"].is_string(),
                "{}: a document without apiVersion and kind",
                file.display()
            );
            out.push((file.display().to_string(), value));
        }
    }
    out
}

/// The pod spec of a Deployment, a Job or a CronJob.
fn pod_spec(doc: &Value) -> Option<&Value> {
    match doc["kind"].as_str()? {
        "Deployment" | "Job" => Some(&doc["spec"]["template"]["spec"]),
        "CronJob" => Some(&doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]),
        _ => None,
    }
}

/// The Job spec of a Job or a CronJob.
fn job_spec(doc: &Value) -> Option<&Value> {
    match doc["kind"].as_str()? {
        "Job" => Some(&doc["spec"]),
        "CronJob" => Some(&doc["spec"]["jobTemplate"]["spec"]),
        _ => None,
    }
}

#[test]
fn manifests_run_commands_and_flags_the_binary_has() {
    let docs = manifests();
    let mut commands = Vec::new();
    for (file, doc) in &docs {
        let Some(pod) = pod_spec(doc) else { continue };
        let containers = pod["containers"].as_sequence().expect("containers");
        for container in containers {
            let args: Vec<&str> = container["args"]
                .as_sequence()
                .unwrap_or_else(|| panic!("{file}: a container without args"))
                .iter()
                .map(|a| a.as_str().expect("string args"))
                .collect();
            let command = args[0];
            let text = help(&[command]);
            for flag in args.iter().filter(|a| a.starts_with("--")) {
                assert!(
                    has_flag(&text, flag),
                    "{file}: `affinity {command}` has no {flag}"
                );
            }
            if let Some(job) = job_spec(doc) {
                assert_eq!(job["completionMode"], "Indexed", "{file}");
                let n = job["completions"].as_u64().expect("completions");
                let shard = args
                    .iter()
                    .position(|a| *a == "--shard")
                    .map(|i| args[i + 1])
                    .unwrap_or_else(|| panic!("{file}: an Indexed Job without --shard"));
                // `--shard $(VAR)/N`, VAR the pod's completion index.
                let var = shard
                    .strip_prefix("$(")
                    .and_then(|s| s.strip_suffix(&format!(")/{n}")))
                    .unwrap_or_else(|| panic!("{file}: --shard {shard} is not $(VAR)/{n}"));
                let env = container["env"].as_sequence().expect("env");
                let from = env
                    .iter()
                    .find(|e| e["name"] == var)
                    .map(|e| &e["valueFrom"]["fieldRef"]["fieldPath"])
                    .unwrap_or_else(|| panic!("{file}: {var} is not set"));
                assert_eq!(
                    from.as_str(),
                    Some("metadata.annotations['batch.kubernetes.io/job-completion-index']"),
                    "{file}"
                );
                assert!(args.contains(&"--job"), "{file}: shards need one --job");
            } else {
                for probe in ["readinessProbe", "livenessProbe"] {
                    assert_eq!(
                        container[probe]["httpGet"]["path"], "/health",
                        "{file}: {probe}"
                    );
                }
            }
            // The settings a container sets itself are read by the binary.
            let read = [help(&[]), text.clone()].concat();
            for e in container["env"].as_sequence().into_iter().flatten() {
                let name = e["name"].as_str().expect("env name");
                if name.starts_with("AFFINITY_") {
                    assert!(read.contains(name), "{file}: affinity reads no {name}");
                }
            }
            commands.push(command.to_string());
        }
    }
    commands.sort();
    commands.dedup();
    assert_eq!(commands, ["maintain", "rebuild", "serve"]);
}

#[test]
fn settings_the_manifests_give_are_read_by_the_binary() {
    let texts = [help(&[]), help(&["serve"])].concat();
    let mut checked = 0;
    for (file, doc) in manifests() {
        if doc["kind"] != "ConfigMap" {
            continue;
        }
        for (key, _) in doc["data"].as_mapping().expect("data") {
            let key = key.as_str().expect("string key");
            if key == "RUST_LOG" {
                continue;
            }
            assert!(texts.contains(key), "{file}: affinity reads no {key}");
            checked += 1;
        }
    }
    assert!(checked >= 2);
    // The probes' path is a route of the server.
    let openapi = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../http/src/openapi.json"),
    )
    .expect("openapi.json");
    assert!(openapi.contains("\"/health\""));
}

#[test]
fn the_dockerfile_builds_this_binary() {
    let dockerfile = std::fs::read_to_string(deploy().join("Dockerfile")).expect("Dockerfile");
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("Cargo.toml");
    let package = manifest
        .lines()
        .find_map(|l| l.strip_prefix("name = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("package name");
    assert!(
        dockerfile.contains(&format!("-p {package} --bin affinity")),
        "{dockerfile}"
    );
    assert!(
        dockerfile.matches("\nFROM ").count() >= 2,
        "a multi-stage build"
    );
    assert!(dockerfile.contains("ENTRYPOINT [\"affinity\"]"));
    assert!(dockerfile.contains("CMD [\"serve\"]"));
    assert!(has_flag(&help(&["serve"]), "--listen"));
}
