//! The packed-weights file's byte format: what `PackedMpnet` and the GEMMs write
//! ([`PackWriter`]) and read back from a mapped file ([`PackReader`]), checked by
//! magic, version, lengths, key and checksums. The cache around it (where the file
//! lives, when it is rebuilt) is `pack_cache`.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use candle_core::Result;
use memmap2::Mmap;

use crate::stored::{bytes_of, Stored, Word};

pub(super) const MAGIC: &[u8; 8] = b"SDRPACK\0";
/// Bump on any change of the file layout or of a packing (`kernels/avx512_gemm.rs`'s
/// panels, the order in which `PackedMpnet` writes its parts). 2: the model folder's
/// path after the key.
pub(super) const VERSION: u32 = 2;
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

    /// The whole file: header (with `folder`, the model folder's path as bytes, for
    /// `sdr cache`) and blobs.
    pub(super) fn write(
        &self,
        key: &str,
        folder: &[u8],
        out: &mut impl Write,
    ) -> std::io::Result<()> {
        let table = FIXED + key.len() + folder.len() + 8 * self.meta.len() + 16 * self.blobs.len();
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
        for n in [key.len(), self.meta.len(), self.blobs.len(), folder.len()] {
            h.extend_from_slice(&(n as u32).to_le_bytes());
        }
        h.extend_from_slice(key.as_bytes());
        h.extend_from_slice(folder);
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
    /// Written by another version of the format: rebuild it, silently.
    Version(u32),
    /// Truncated or damaged: rebuild it, with a line on stderr.
    Damaged(String),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A header's meta values and its blobs' (offset, bytes).
type Parts = (Vec<u64>, Vec<(usize, usize)>);

/// A header that passed its checks: magic, version, file length, header length and
/// checksum, table bounds. `b` holds at least the header.
pub(super) struct Header<'a> {
    b: &'a [u8],
    header_len: usize,
    key_len: usize,
    folder_len: usize,
    n_meta: usize,
    n_blobs: usize,
}

impl<'a> Header<'a> {
    /// Checks the header at the start of `b`, of a file of `file_len` bytes. A
    /// header longer than `b` (the caller read too little) is damaged.
    pub(super) fn parse(b: &'a [u8], file_len: u64) -> std::result::Result<Self, Unusable> {
        let damaged = |why: &str| Unusable::Damaged(why.to_string());
        if b.len() < FIXED || &b[..8] != MAGIC {
            return Err(damaged("not a packed-weights file (too short or no magic)"));
        }
        let version = u32_at(b, 8);
        if version != VERSION {
            return Err(Unusable::Version(version));
        }
        let header_len = u32_at(b, 12) as usize;
        if u64_at(b, 16) != file_len {
            return Err(Unusable::Damaged(format!(
                "{file_len} bytes where the header says {}",
                u64_at(b, 16)
            )));
        }
        if header_len < FIXED
            || header_len as u64 > file_len
            || header_len > b.len()
            || !header_len.is_multiple_of(ALIGN)
        {
            return Err(damaged("bad header length"));
        }
        let mut header = b[..header_len].to_vec();
        header[32..40].fill(0);
        let mut sum = Checksum::default();
        sum.padded(&header);
        if sum.finish() != u64_at(b, 32) {
            return Err(damaged("header checksum mismatch"));
        }
        let h = Header {
            b,
            header_len,
            key_len: u32_at(b, 40) as usize,
            n_meta: u32_at(b, 44) as usize,
            n_blobs: u32_at(b, 48) as usize,
            folder_len: u32_at(b, 52) as usize,
        };
        // In u64: four u32 counts cannot overflow it.
        let table = FIXED as u64
            + h.key_len as u64
            + h.folder_len as u64
            + 8 * h.n_meta as u64
            + 16 * h.n_blobs as u64;
        if table > header_len as u64 {
            return Err(damaged("header table overruns the header"));
        }
        Ok(h)
    }

    pub(super) fn key(&self) -> &'a [u8] {
        &self.b[FIXED..FIXED + self.key_len]
    }

    /// The model folder's path, as [`PackWriter::write`] was given it.
    pub(super) fn folder(&self) -> &'a [u8] {
        let at = FIXED + self.key_len;
        &self.b[at..at + self.folder_len]
    }

    /// The meta values and the blobs' (offset, bytes), each blob checked to lie in
    /// the file after the header.
    pub(super) fn parts(&self, file_len: u64) -> std::result::Result<Parts, Unusable> {
        let b = self.b;
        let mut at = FIXED + self.key_len + self.folder_len;
        let meta: Vec<u64> = (0..self.n_meta).map(|i| u64_at(b, at + 8 * i)).collect();
        at += 8 * self.n_meta;
        let mut blobs = Vec::with_capacity(self.n_blobs);
        for i in 0..self.n_blobs {
            let (o, l) = (u64_at(b, at + 16 * i), u64_at(b, at + 16 * i + 8));
            let end = o.checked_add(l).filter(|&e| e <= file_len);
            if o < self.header_len as u64 || end.is_none() {
                return Err(Unusable::Damaged("a part lies outside the file".into()));
            }
            blobs.push((o as usize, l as usize));
        }
        Ok((meta, blobs))
    }
}

/// The longest header [`read_header`] reads: a real one is a few KB.
const MAX_HEADER: u64 = 1 << 24;

/// The first bytes of a file of `file_len` bytes, up to the end of its header as its
/// fixed part says, for [`Header::parse`] without mapping the file (`sdr cache list`).
pub(super) fn read_header(f: &mut impl Read, file_len: u64) -> std::io::Result<Vec<u8>> {
    let mut b = Vec::with_capacity(4096);
    f.by_ref().take(FIXED as u64).read_to_end(&mut b)?;
    if b.len() == FIXED {
        let header_len = u64::from(u32_at(&b, 12));
        if header_len > FIXED as u64 && header_len <= file_len.min(MAX_HEADER) {
            f.take(header_len - FIXED as u64).read_to_end(&mut b)?;
        }
    }
    Ok(b)
}

impl PackReader {
    /// Maps `path` and checks it (see the module docs) against `key`.
    pub(super) fn open(path: &Path, key: &str) -> std::result::Result<Self, Unusable> {
        let file = File::open(path).map_err(|_| Unusable::Missing)?;
        // SAFETY: a read-only mapping of a file that is only ever replaced by rename,
        // never written in place; every value read from it is checked below.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Unusable::Damaged(e.to_string()))?;
        let b: &[u8] = &map;
        let header = Header::parse(b, b.len() as u64)?;
        if header.key() != key.as_bytes() {
            return Err(Unusable::Stale);
        }
        let (meta, blobs) = header.parts(b.len() as u64)?;
        let mut data = Checksum::default();
        data.padded(&b[header.header_len..]);
        if data.finish() != u64_at(b, 24) {
            return Err(Unusable::Damaged("data checksum mismatch".into()));
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
