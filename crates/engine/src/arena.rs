//! Many small byte strings (the qualifiers and values of a batch's cells)
//! written into one buffer and handed out as [`Bytes`] sharing it: one
//! allocation per few kilobytes instead of two per cell, and one
//! reference-count decrement to drop each.

use bytes::{Bytes, BytesMut};

use crate::csv;

/// A buffer that cells' bytes are cut from.
#[derive(Debug, Default)]
pub struct Arena(BytesMut);

/// Bytes the arena reserves when it runs out of room.
const CHUNK: usize = 16 << 10;

impl Arena {
    pub fn new() -> Arena {
        Arena::default()
    }

    /// The bytes `write` appends, as their own `Bytes`.
    pub fn take(&mut self, write: impl FnOnce(&mut BytesMut)) -> Bytes {
        if self.0.capacity() - self.0.len() < 256 {
            self.0.reserve(CHUNK);
        }
        write(&mut self.0);
        self.0.split().freeze()
    }

    /// A CSV record of `fields` ([`csv::push_record`]).
    pub fn csv<S: AsRef<str>>(&mut self, fields: &[S]) -> Bytes {
        self.take(|out| csv::push_record(out, fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_keep_their_bytes_after_the_buffer_grows() {
        let mut arena = Arena::new();
        let pieces: Vec<(Bytes, String)> = (0..2000)
            .map(|i| {
                let fields = ["view", "Viewed, Product", &format!("facet{i}")];
                (arena.csv(&fields), csv::encode(&fields))
            })
            .collect();
        for (piece, expected) in &pieces {
            assert_eq!(piece.as_ref(), expected.as_bytes());
        }
        let big = arena.take(|out| out.extend_from_slice(&[7u8; 40_000]));
        assert_eq!(big.len(), 40_000);
        assert!(big.iter().all(|b| *b == 7));
    }
}
