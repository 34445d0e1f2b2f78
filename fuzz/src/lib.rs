//! What the fuzz targets share: the framing of an input into parts.
//!
//! An input is read front to back: single bytes and integers where a
//! target needs a choice, and length-prefixed chunks (a `u16`,
//! little-endian, capped at what is left) for byte strings. Whatever the
//! input, reading never fails: past the end, bytes are 0 and chunks empty.
//! [`Writer`] writes the same framing, for seeds (`fuzz/examples/seeds.rs`).

/// Reads an input's parts.
pub struct Input<'a> {
    rest: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { rest: data }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub fn byte(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&b, rest)) => {
                self.rest = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    pub fn u64(&mut self) -> u64 {
        let mut word = [0u8; 8];
        for b in &mut word {
            *b = self.byte();
        }
        u64::from_le_bytes(word)
    }

    pub fn i64(&mut self) -> i64 {
        self.u64() as i64
    }

    /// A chunk: its length, then its bytes.
    pub fn chunk(&mut self) -> &'a [u8] {
        let len = usize::from(self.u16()).min(self.rest.len());
        let (chunk, rest) = self.rest.split_at(len);
        self.rest = rest;
        chunk
    }

    /// A chunk as text (lossy).
    pub fn text(&mut self) -> String {
        String::from_utf8_lossy(self.chunk()).into_owned()
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }
}

/// Writes inputs in [`Input`]'s framing.
#[derive(Default)]
pub struct Writer {
    pub out: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    pub fn byte(mut self, b: u8) -> Writer {
        self.out.push(b);
        self
    }

    pub fn u16(mut self, n: u16) -> Writer {
        self.out.extend_from_slice(&n.to_le_bytes());
        self
    }

    pub fn u64(mut self, n: u64) -> Writer {
        self.out.extend_from_slice(&n.to_le_bytes());
        self
    }

    pub fn i64(self, n: i64) -> Writer {
        self.u64(n as u64)
    }

    pub fn chunk(self, bytes: &[u8]) -> Writer {
        let len = u16::try_from(bytes.len()).expect("a chunk of at most 64 KiB");
        let mut w = self.u16(len);
        w.out.extend_from_slice(bytes);
        w
    }

    pub fn rest(mut self, bytes: &[u8]) -> Writer {
        self.out.extend_from_slice(bytes);
        self
    }

    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}
