//! Writes the seed corpus, `fuzz/corpus/<target>/seed-*`: real examples
//! in each target's framing (`affinity_fuzz::Input`). Run from the
//! repository root:
//! `cargo run --manifest-path fuzz/Cargo.toml --example seeds`.

use std::io::Write;
use std::path::Path;

use affinity_embedded::fuzzing::{encode_meta, encode_operand, encode_row, sample_meta};
use affinity_fuzz::Writer;
use affinity_model::Mutation;
use affinity_rowkey::tuple::{encode, Element};

fn put(target: &str, name: &str, bytes: Vec<u8>) {
    let dir = Path::new("fuzz/corpus").join(target);
    std::fs::create_dir_all(&dir).expect("creates the corpus directory");
    std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("writes a seed");
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).expect("in memory");
    e.finish().expect("in memory")
}

fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).expect("in memory");
    e.finish().expect("in memory")
}

fn deflate(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).expect("in memory");
    e.finish().expect("in memory")
}

/// Insights events as the JavaScript client sends them (the API's
/// examples), near the target's clock (2025-11-24).
const EVENTS: &str = r#"{"events":[
{"eventType":"view","eventName":"Product Viewed","index":"products","userToken":"user-1","timestamp":1763900000000,"objectIDs":["p1","p2"]},
{"eventType":"click","eventName":"Product Clicked","index":"products","userToken":"user-1","authenticatedUserToken":"acct-9","queryID":"43b15df305339e827f0ac0bdc5ebcaa7","objectIDs":["p1"],"positions":[3]},
{"eventType":"conversion","eventSubtype":"purchase","eventName":"Order Placed","index":"products","userToken":"user-1","objectIDs":["p1"],"objectData":[{"price":19.99,"quantity":2,"discount":"1.00"}],"value":38.98,"currency":"EUR"},
{"eventType":"view","eventName":"Filter Viewed","index":"products","userToken":"user-2","filters":["brand:Apple","category:phones%20%26%20tablets"]}
]}"#;

const CATALOG: &str = r#"{"objectID":"p1","brand":"Apple","category":["phones","tablets"],"price":999,"in_stock":true,"_geoloc":{"lat":48.85,"lng":2.35}}
{"objectID":"p2","brand":"Samsung","color":null,"tags":[1,"a",false]}
{"objectID":""}"#;

fn main() {
    // Event bodies: plain, gzip, deflate; the API's limits and a CLI's.
    for (i, enc) in [0u8, 1, 2].into_iter().enumerate() {
        let body = match enc {
            0 => EVENTS.as_bytes().to_vec(),
            1 => gzip(EVENTS.as_bytes()),
            _ => zlib(EVENTS.as_bytes()),
        };
        put(
            "event_json",
            &format!("events-{i}"),
            Writer::new().byte(enc).byte(i as u8).rest(&body).finish(),
        );
    }
    put(
        "event_json",
        "one-event",
        Writer::new().byte(0).byte(0).rest(br#"{"events":[{"eventType":"click","eventName":"c","index":"i","userToken":"u","objectIDs":["o"]}]}"#).finish(),
    );

    // Bodies: each encoding, and a bomb (64 MiB of spaces in 64 KiB).
    let json = EVENTS.as_bytes();
    put(
        "gzip_body",
        "identity",
        Writer::new().byte(0).rest(json).finish(),
    );
    put(
        "gzip_body",
        "gzip",
        Writer::new().byte(1).rest(&gzip(json)).finish(),
    );
    let mut two = gzip(&json[..40]);
    two.extend(gzip(&json[40..]));
    put(
        "gzip_body",
        "gzip-two-members",
        Writer::new().byte(1).rest(&two).finish(),
    );
    put(
        "gzip_body",
        "zlib",
        Writer::new().byte(2).rest(&zlib(json)).finish(),
    );
    put(
        "gzip_body",
        "raw-deflate",
        Writer::new().byte(2).rest(&deflate(json)).finish(),
    );
    put(
        "gzip_body",
        "bomb",
        Writer::new()
            .byte(1)
            .rest(&gzip(&vec![b' '; 64 << 20]))
            .finish(),
    );

    // Stored rows of the sample table (families a=0, b=1, s=2, d=3
    // dropped, e=4), as the store writes them.
    let meta = sample_meta();
    let sum = 5i64.to_be_bytes();
    let rows: Vec<Vec<u8>> = vec![
        encode_row(&[
            (0, b"x", 1000, b"v1"),
            (0, b"xa", 1000, b"v2"),
            (1, b"xa", 3000, b"new"),
            (1, b"xa", 2000, b"mid"),
            (1, b"xa", 1000, b"old"),
        ]),
        encode_row(&[
            (0, b"x", 1000, b"v1"),
            (0, b"xab", 2000, b"w"),
            (2, b"", 4000, &sum),
            (3, b"gone", 1000, b"hidden"),
            (4, b"y", 9000, b"e1"),
            (4, b"y", 1000, b"e2"),
            (4, b"yb", 1, b"e3"),
        ]),
        encode_row(&[
            (2, b"view,Product Viewed,brand", 1_763_000_000_000_000, &sum),
            (2, b"view,Product Viewed,color", 1_763_000_000_000_000, &sum),
        ]),
        encode_row(&[]),
    ];
    for filter in 0..6u8 {
        let mut w = Writer::new().byte(filter).byte(filter % 3);
        for row in &rows {
            w = w.chunk(row);
        }
        put("store_row", &format!("rows-filter-{filter}"), w.finish());
    }

    // Operands: adds (packed), sets and deletes, over a stored row.
    let adds = encode_operand(
        &meta,
        &[
            Mutation::add_to_cell("s", "q", 3000, 7),
            Mutation::add_to_cell("s", "r", 1000, -2),
        ],
        4000,
    );
    let sets = encode_operand(
        &meta,
        &[
            Mutation::set_cell("a", "x", 5000, "set"),
            Mutation::DeleteFromFamily { family: "b".into() },
        ],
        6000,
    );
    let deletes = encode_operand(
        &meta,
        &[
            Mutation::DeleteFromRow,
            Mutation::set_cell("e", "y", 7000, "again"),
        ],
        8000,
    );
    put(
        "store_operand",
        "adds-on-row",
        Writer::new()
            .byte(0)
            .byte(1)
            .chunk(&rows[1])
            .chunk(&adds)
            .chunk(&adds)
            .finish(),
    );
    put(
        "store_operand",
        "mixed-on-row",
        Writer::new()
            .byte(0)
            .byte(1)
            .chunk(&rows[0])
            .chunk(&adds)
            .chunk(&sets)
            .chunk(&deletes)
            .finish(),
    );
    put(
        "store_operand",
        "no-row",
        Writer::new()
            .byte(1)
            .byte(0)
            .chunk(&adds)
            .chunk(&sets)
            .finish(),
    );

    // Metadata, then a row under it.
    put(
        "store_meta",
        "sample",
        Writer::new()
            .chunk(&encode_meta(&meta))
            .rest(&rows[1])
            .finish(),
    );

    // Chunk streams: rows sent as chunks, forward and reversed; and
    // arbitrary chunks (a row, a split value, a reset).
    let round = |mode: u8| {
        Writer::new()
            .byte(mode)
            .byte(3)
            .byte(1)
            .byte(2)
            .chunk(b"row-a")
            .byte(1)
            .byte(0)
            .chunk(b"q")
            .i64(1000)
            .chunk(b"value-of-a-cell")
            .byte(0)
            .byte(1)
            .chunk(b"q")
            .i64(900)
            .chunk(b"v")
            .byte(1)
            .chunk(b"label")
            .chunk(b"row-b")
            .byte(0)
            .byte(2)
            .chunk(b"")
            .i64(0)
            .chunk(b"")
            .byte(0)
            .finish()
    };
    put("readrows_merger", "round-trip", round(1));
    put("readrows_merger", "round-trip-reversed", round(3));
    let chunk = |w: Writer, fields: u8, status: u8| w.byte(0).byte(fields).byte(status);
    let mut w = chunk(Writer::new().byte(0), 1 | 2 | 4 | 8 | 32, 0)
        .chunk(b"RK")
        .byte(0)
        .chunk(b"C")
        .i64(100)
        .chunk(b"value-VAL");
    w = chunk(w, 4 | 8 | 32 | 64, 0)
        .chunk(b"D")
        .i64(99)
        .chunk(b"split-")
        .u16(11);
    w = chunk(w, 32, 1).chunk(b"value");
    w = chunk(w, 1 | 2 | 4 | 32, 0)
        .chunk(b"RL")
        .byte(1)
        .chunk(b"E")
        .chunk(b"x");
    w = chunk(w, 0, 2);
    put("readrows_merger", "chunks", w.finish());

    // Tuples: encodings, then two tuples.
    let t = encode(&[
        Element::Str("app".into()),
        Element::Bytes(vec![0, 1, 0xff]),
        Element::U64(7),
        Element::I64(-3),
    ]);
    put(
        "tuple_key",
        "tuples",
        Writer::new()
            .chunk(&t)
            .byte(3)
            .byte(1)
            .chunk(b"app")
            .byte(0)
            .chunk(&[0, 0xff])
            .byte(3)
            .i64(-3)
            .byte(2)
            .byte(1)
            .chunk(b"app")
            .byte(2)
            .u64(7)
            .byte(1)
            .finish(),
    );

    // Event keys.
    put(
        "composite_key",
        "keys",
        Writer::new()
            .chunk(b"shop,user-1,2019-05-28T00:04:34.000Z,00ff00ff00ff00ff")
            .chunk(b"shop")
            .chunk(b"user-1")
            .i64(1_559_001_874_000)
            .i64(1_559_001_874_001)
            .u64(1)
            .u64(2)
            .finish(),
    );
    put(
        "composite_key",
        "no-suffix",
        Writer::new()
            .chunk(b"a,b,1970-01-01T00:00:00.000Z")
            .finish(),
    );

    // Wide-schema records.
    put(
        "wide_csv",
        "records",
        Writer::new()
            .chunk(br#"view,"Product, Viewed","say ""hi""""#)
            .chunk(b"view")
            .chunk(b"")
            .chunk(b"a,b")
            .chunk(b"\"q\"")
            .finish(),
    );
    put(
        "wide_csv",
        "plain",
        Writer::new()
            .chunk(b"click,Product Clicked,brand,Apple")
            .finish(),
    );

    // Points: a stored value, then CSV from testdata/geo (first lines).
    for (name, file, columns) in [
        ("trajectories", "SampleTrajectories.csv", 0u8),
        ("harbor", "NYHarbor_2020_06_30_first_hour.csv", 1),
    ] {
        let text =
            std::fs::read_to_string(Path::new("testdata/geo").join(file)).expect("testdata/geo");
        let head: String = text.lines().take(12).map(|l| format!("{l}\n")).collect();
        let value = [
            &[1u8][..],
            &0f64.to_be_bytes(),
            &1f64.to_be_bytes(),
            &5i64.to_be_bytes(),
            &1u16.to_be_bytes(),
            b"\x05speed",
            b"n",
            &12.5f64.to_be_bytes(),
        ]
        .concat();
        put(
            "points_csv",
            name,
            Writer::new()
                .chunk(&value)
                .byte(columns)
                .rest(head.as_bytes())
                .finish(),
        );
    }
    put(
        "points_csv",
        "quoted",
        Writer::new().chunk(b"").byte(2).rest(b"id,time,lat,lng,note\n\"a, b\",2020-06-30T00:00:00Z,40.5,-190.25,\"line\none\"\nc,2020-06-30,91,0,\n").finish(),
    );

    put("catalog_json", "catalog", CATALOG.as_bytes().to_vec());
}
