//! The packed-weights file's byte format: what `PackedMpnet` and the GEMMs write
//! ([`PackWriter`]) and read back from a mapped file ([`PackReader`]), checked by
//! magic, version, lengths, key and checksums. The cache around it (where the file
//! lives, when it is rebuilt) is `pack_cache`.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use candle_core::Result;
use memmap2::Mmap;

use crate::stored::{bytes_of, Stored, Word};

pub(super) const MAGIC: &[u8; 8] = b"SDRPACK\0";
/// Bump on any change of the file layout or of a packing (`kernels/avx512_gemm.rs`'s
/// panels, the order in which `PackedMpnet` writes its parts).
pub(super) const VERSION: u32 = 1;
pub(super) const ALIGN: usize = 64;
/// Bytes of the fixed part of the header.
pub(super) const FIXED: usize = 56;

/// Parts of a model in the order they are written, borrowed from it.
#[derive(Default)]
pub(crate) struct PackWriter<'a> {
    meta: Vec<u64>,
    blobs: Vec<&'a [u8]>,
}

impl<'a> PackWriter<'a> {
    pub(crate) fn meta(&mut self, v: u64) {
        self.meta.push(v);
    }

    pub(crate) fn values<T: Word>(&mut self, v: &'a [T]) {
        self.blobs.push(bytes_of(v));
    }

    /// The whole file: header and blobs.
    pub(super) fn write(&self, key: &str, out: &mut impl Write) -> std::io::Result<()> {
        let table = FIXED + key.len() + 8 * self.meta.len() + 16 * self.blobs.len();
        let header_len = table.next_multiple_of(ALIGN);
        let mut offsets = Vec::with_capacity(self.blobs.len());
        let mut at = header_len;
        let mut data = Checksum::default();
        for b in &self.blobs {
            offsets.push((at as u64, b.len() as u64));
            at += b.len().next_multiple_of(ALIGN);
            data.padded(b);
        }
        let mut h = Vec::with_capacity(header_len);
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.extend_from_slice(&(header_len as u32).to_le_bytes());
        h.extend_from_slice(&(at as u64).to_le_bytes());
        h.extend_from_slice(&data.finish().to_le_bytes());
        h.extend_from_slice(&0u64.to_le_bytes()); // the header checksum, below
        for n in [key.len(), self.meta.len(), self.blobs.len(), 0] {
            h.extend_from_slice(&(n as u32).to_le_bytes());
        }
        h.extend_from_slice(key.as_bytes());
        self.meta
            .iter()
            .for_each(|m| h.extend_from_slice(&m.to_le_bytes()));
        for (o, l) in offsets {
            h.extend_from_slice(&o.to_le_bytes());
            h.extend_from_slice(&l.to_le_bytes());
        }
        h.resize(header_len, 0);
        let mut sum = Checksum::default();
        sum.padded(&h);
        h[32..40].copy_from_slice(&sum.finish().to_le_bytes());
        out.write_all(&h)?;
        let zeros = [0u8; ALIGN];
        for b in &self.blobs {
            out.write_all(b)?;
            out.write_all(&zeros[..b.len().next_multiple_of(ALIGN) - b.len()])?;
        }
        Ok(())
    }
}

/// A checked cache file, handing out its parts in the order they were written.
pub(crate) struct PackReader {
    map: Arc<Mmap>,
    meta: std::vec::IntoIter<u64>,
    blobs: std::vec::IntoIter<(usize, usize)>,
}

/// Why a cache file is not used.
pub(super) enum Unusable {
    /// No file (or it cannot be opened): build it, silently.
    Missing,
    /// Written for other weights, config or GEMM: rebuild it, silently.
    Stale,
    /// Truncated or damaged: rebuild it, with a line on stderr.
    Damaged(String),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl PackReader {
    /// Maps `path` and checks it (see the module docs) against `key`.
    pub(super) fn open(path: &Path, key: &str) -> std::result::Result<Self, Unusable> {
        let file = File::open(path).map_err(|_| Unusable::Missing)?;
        let damaged = |why: &str| Unusable::Damaged(why.to_string());
        // SAFETY: a read-only mapping of a file that is only ever replaced by rename,
        // never written in place; every value read from it is checked below.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Unusable::Damaged(e.to_string()))?;
        let b: &[u8] = &map;
        if b.len() < FIXED || &b[..8] != MAGIC {
            return Err(damaged("not a packed-weights file (too short or no magic)"));
        }
        if u32_at(b, 8) != VERSION {
            return Err(Unusable::Stale);
        }
        let header_len = u32_at(b, 12) as usize;
        if u64_at(b, 16) != b.len() as u64 {
            return Err(Unusable::Damaged(format!(
                "{} bytes where the header says {}",
                b.len(),
                u64_at(b, 16)
            )));
        }
        if header_len < FIXED || header_len > b.len() || !header_len.is_multiple_of(ALIGN) {
            return Err(damaged("bad header length"));
        }
        let mut header = b[..header_len].to_vec();
        header[32..40].fill(0);
        let mut sum = Checksum::default();
        sum.padded(&header);
        if sum.finish() != u64_at(b, 32) {
            return Err(damaged("header checksum mismatch"));
        }
        let (key_len, n_meta, n_blobs) = (
            u32_at(b, 40) as usize,
            u32_at(b, 44) as usize,
            u32_at(b, 48) as usize,
        );
        let table = FIXED + key_len + 8 * n_meta + 16 * n_blobs;
        if table > header_len {
            return Err(damaged("header table overruns the header"));
        }
        if &b[FIXED..FIXED + key_len] != key.as_bytes() {
            return Err(Unusable::Stale);
        }
        let mut at = FIXED + key_len;
        let meta: Vec<u64> = (0..n_meta).map(|i| u64_at(b, at + 8 * i)).collect();
        at += 8 * n_meta;
        let mut blobs = Vec::with_capacity(n_blobs);
        for i in 0..n_blobs {
            let (o, l) = (u64_at(b, at + 16 * i), u64_at(b, at + 16 * i + 8));
            let end = o.checked_add(l).filter(|&e| e <= b.len() as u64);
            if o < header_len as u64 || end.is_none() {
                return Err(damaged("a part lies outside the file"));
            }
            blobs.push((o as usize, l as usize));
        }
        let mut data = Checksum::default();
        data.padded(&b[header_len..]);
        if data.finish() != u64_at(b, 24) {
            return Err(damaged("data checksum mismatch"));
        }
        Ok(PackReader {
            map: Arc::new(map),
            meta: meta.into_iter(),
            blobs: blobs.into_iter(),
        })
    }

    pub(crate) fn meta(&mut self) -> Result<u64> {
        self.meta
            .next()
            .ok_or_else(|| candle_core::Error::Msg("packed-weights file: too few values".into()))
    }

    /// The next part, read in place from the mapping.
    pub(crate) fn values<T: Word>(&mut self) -> Result<Stored<T>> {
        let (start, bytes) = self
            .blobs
            .next()
            .ok_or_else(|| candle_core::Error::Msg("packed-weights file: too few parts".into()))?;
        let size = std::mem::size_of::<T>();
        if !bytes.is_multiple_of(size) {
            candle_core::bail!("packed-weights file: a part of {bytes} bytes")
        }
        Stored::mapped(&self.map, start, bytes / size)
            .ok_or_else(|| candle_core::Error::Msg("packed-weights file: misplaced part".into()))
    }

    /// The next part, copied and checked to hold `len` values (small parts: norms,
    /// biases).
    pub(crate) fn vec<T: Word>(&mut self, len: usize) -> Result<Vec<T>> {
        let v = self.values::<T>()?;
        if v.len() != len {
            candle_core::bail!(
                "packed-weights file: a part of {} values, expected {len}",
                v.len()
            )
        }
        Ok(v.to_vec())
    }

    /// Checks that every part was read.
    pub(crate) fn finish(mut self) -> Result<()> {
        if self.meta.next().is_some() || self.blobs.next().is_some() {
            candle_core::bail!("packed-weights file: parts left unread")
        }
        Ok(())
    }
}

/// A 64-bit checksum over 64-byte chunks (a last partial chunk zero-padded), eight
/// independent lanes of `(h ^ w) · φ` rotated: each step is a bijection of the lane,
/// so any single changed word changes the sum; several GB/s, so checking the whole
/// file on every load costs a few tens of milliseconds.
pub(super) struct Checksum {
    lanes: [u64; 8],
    len: u64,
}

impl Default for Checksum {
    fn default() -> Self {
        Checksum {
            lanes: std::array::from_fn(|i| i as u64 + 1),
            len: 0,
        }
    }
}

const PHI: u64 = 0x9E37_79B9_7F4A_7C15;

impl Checksum {
    pub(super) fn chunk(&mut self, c: &[u8]) {
        for (lane, w) in self.lanes.iter_mut().zip(c.chunks_exact(8)) {
            let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            *lane = (*lane ^ w).wrapping_mul(PHI).rotate_left(29);
        }
    }

    /// Adds `bytes` followed by zeros up to a multiple of 64.
    pub(super) fn padded(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(ALIGN);
        for c in chunks.by_ref() {
            self.chunk(c);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; ALIGN];
            last[..rest.len()].copy_from_slice(rest);
            self.chunk(&last);
        }
        self.len += bytes.len().next_multiple_of(ALIGN) as u64;
    }

    pub(super) fn finish(&self) -> u64 {
        let h = self
            .lanes
            .iter()
            .fold(self.len, |h, &l| (h ^ l).wrapping_mul(PHI).rotate_left(31));
        h ^ (h >> 32)
    }
}
