//! Request bodies as clients send them: identity, gzip or deflate
//! (`Content-Encoding`), decompressed under the body limit. A bomb is
//! refused once it passes the limit, never expanded in full: the decoded
//! body is at most `MAX_BODY_BYTES` (checked in `decode_body`), and
//! libFuzzer's malloc and RSS limits (scripts/fuzz) catch a decoder that
//! allocates more. What decodes, compressed again, decodes to the same.
#![no_main]

use std::io::Write;

use affinity_fuzz::Input;
use affinity_http::fuzzing::{decode_body, encoding, Encoding};
use flate2::Compression;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let encoding = encoding(input.byte());
    let body = input.rest();
    let decoded = decode_body(body, encoding);
    let Ok(decoded) = decoded else { return };
    let again = match encoding {
        Encoding::Identity => {
            assert_eq!(decoded, body, "an identity body changed");
            return;
        }
        Encoding::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), Compression::fast());
            e.write_all(&decoded).expect("in memory");
            e.finish().expect("in memory")
        }
        Encoding::Deflate => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), Compression::fast());
            e.write_all(&decoded).expect("in memory");
            e.finish().expect("in memory")
        }
    };
    let round = decode_body(&again, encoding).expect("a body compressed again decodes");
    assert_eq!(
        round, decoded,
        "a body compressed again decodes differently"
    );
});
