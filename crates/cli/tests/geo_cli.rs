//! `affinity geo load` and `affinity geo query` through the real binary.

use std::process::Command;

fn affinity(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_affinity"))
        .args(args)
        .arg("--data")
        .arg(data)
        .env_remove("AFFINITY_BIGTABLE")
        .output()
        .expect("run the affinity binary")
}

#[test]
fn load_then_query_returns_exactly_the_points_inside() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("points.csv");
    std::fs::write(
        &csv,
        "id,when,lat,lng,speed\n\
         portland,2024-05-21 10:00:00,45.52,-122.68,3.5\n\
         milan,2024-05-21 10:05:00,45.46,9.19,1.0\n\
         venice,2024-05-21T10:06:00Z,45.44,12.32,2.0\n\
         portland-late,1716292800,45.53,-122.67,4.0\n\
         fiji-east,2024-05-21 10:07:00+00:00,-17.0,179.9,0.5\n\
         fiji-west,1716285600000,-17.1,-179.9,0.7\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let out = affinity(
        &data,
        &[
            "geo",
            "load",
            csv.to_str().unwrap(),
            "--id",
            "id",
            "--time",
            "when",
            "--lat",
            "lat",
            "--lng",
            "lng",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let query = |bbox: &str, from: &str, to: &str| {
        let out = affinity(
            &data,
            &["geo", "query", "--bbox", bbox, "--from", from, "--to", to],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let mut ids: Vec<String> = text
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap_or_default().to_string())
            .collect();
        ids.sort();
        ids
    };
    // Portland's latitude band holds Milan and Venice; the box does not.
    assert_eq!(
        query(
            "-123,45,-122,46",
            "2024-05-21T00:00:00Z",
            "2024-05-22T00:00:00Z"
        ),
        ["portland", "portland-late"]
    );
    // The time range cuts the later Portland point (12:00).
    assert_eq!(
        query(
            "-123,45,-122,46",
            "2024-05-21T09:00:00Z",
            "2024-05-21T11:00:00Z"
        ),
        ["portland"]
    );
    // A box across the antimeridian (MINLNG > MAXLNG).
    assert_eq!(
        query(
            "179,-18,-179,-16",
            "2024-05-21T00:00:00Z",
            "2024-05-22T00:00:00Z"
        ),
        ["fiji-east", "fiji-west"]
    );

    // A bad row names its line and column, and loads nothing.
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        "id,when,lat,lng\na,2024-05-21 10:00:00,45,-122\nb,2024-05-21 10:00:00,95,-122\n",
    )
    .unwrap();
    let out = affinity(
        &dir.path().join("data2"),
        &[
            "geo",
            "load",
            bad.to_str().unwrap(),
            "--id",
            "id",
            "--time",
            "when",
            "--lat",
            "lat",
            "--lng",
            "lng",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3") && err.contains("lat"), "{err}");
}
