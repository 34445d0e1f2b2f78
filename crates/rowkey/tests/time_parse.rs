//! The time forms `parse_time` accepts (the geo loader's CSV times, trends
//! query windows), and the ones it refuses.

use affinity_rowkey::time::parse_time;
use affinity_rowkey::Error;

const T: i64 = 1_404_229_543_000; // 2014-07-01T15:45:43Z

#[test]
fn accepted_forms_agree() {
    for text in [
        "2014-07-01T15:45:43Z",
        "2014-07-01T15:45:43z",
        "2014-07-01t15:45:43Z",
        "2014-07-01T15:45:43",
        "2014-07-01 15:45:43",
        "2014-07-01 15:45:43-0000",
        "2014-07-01 15:45:43+0000",
        "2014-07-01 15:45:43 +00:00",
        "2014-07-01T17:45:43+02:00",
        "2014-07-01T17:45:43+0200",
        "2014-07-01T17:45:43+02",
        "2014-07-01T10:15:43-05:30",
        "2014-07-01T15:45:43.000Z",
        "  2014-07-01T15:45:43Z ",
        "1404229543",
        "1404229543000",
        "1404229543.000",
    ] {
        assert_eq!(parse_time(text).unwrap(), T, "{text}");
    }
}

#[test]
fn fractions_and_epochs() {
    assert_eq!(parse_time("2014-07-01T15:45:43.5Z").unwrap(), T + 500);
    assert_eq!(
        parse_time("2014-07-01T15:45:43.123456789Z").unwrap(),
        T + 123
    );
    assert_eq!(parse_time("1404229543.25").unwrap(), T + 250);
    assert_eq!(parse_time("0").unwrap(), 0);
    // 11 digits are still seconds (year 5138); 12 are milliseconds.
    assert_eq!(parse_time("99999999999").unwrap(), 99_999_999_999_000);
    assert_eq!(parse_time("100000000000").unwrap(), 100_000_000_000);
    assert_eq!(
        parse_time("2020-06-30T00:00:00").unwrap(),
        1_593_475_200_000
    );
    assert_eq!(parse_time("1970-01-01T00:30:00+01:00").unwrap(), -1_800_000);
}

#[test]
fn refused_forms_name_the_value() {
    for text in [
        "",
        "yesterday",
        "2014-07-01",
        "2014-07-01T15:45",
        "2014-07-01X15:45:43",
        "2014-02-30T15:45:43Z",
        "2014-07-01T25:45:43Z",
        "2014-07-01T15:45:43+2",
        "2014-07-01T15:45:43+24:00",
        "2014-07-01T15:45:43.Z",
        "2014-07-01T15:45:43 UTC",
        "1.2.3",
        "99999999999999999999",
    ] {
        match parse_time(text) {
            Err(Error::InvalidTime { value, .. }) => assert_eq!(value, text),
            other => panic!("{text:?} gave {other:?}"),
        }
    }
    let message = parse_time("2014-13-01 00:00:00").unwrap_err().to_string();
    assert!(message.contains("2014-13-01 00:00:00"), "{message}");
}
