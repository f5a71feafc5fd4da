//! Values a loaded model reads in place: its own `Vec`, or a slice of a read-only file
//! mapping that every process mapping the same file shares (the packed-weights cache,
//! `models/pack_cache.rs`). Either way the kernels see a `&[T]`.

use std::ops::Deref;
use std::sync::Arc;

use memmap2::Mmap;

/// 4-byte values that every bit pattern makes (f32 weights, u32 packed lanes), so
/// that a file's aligned bytes can be read as them.
pub(crate) trait Word: Copy + Send + Sync + 'static {}
impl Word for f32 {}
impl Word for u32 {}

/// A model's values: owned, or `len` values at byte `start` of a mapping.
pub(crate) enum Stored<T> {
    Owned(Vec<T>),
    Mapped {
        map: Arc<Mmap>,
        start: usize,
        len: usize,
    },
}

impl<T: Word> Stored<T> {
    /// `len` values at byte `start` of `map`; `None` where they do not lie inside it or
    /// are misaligned.
    pub(crate) fn mapped(map: &Arc<Mmap>, start: usize, len: usize) -> Option<Self> {
        let size = std::mem::size_of::<T>();
        let end = len.checked_mul(size)?.checked_add(start)?;
        let aligned = (map.as_ptr() as usize + start).is_multiple_of(std::mem::align_of::<T>());
        (end <= map.len() && aligned).then(|| Stored::Mapped {
            map: map.clone(),
            start,
            len,
        })
    }

    /// Whether the values are pages of a shared file mapping.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self, Stored::Mapped { .. })
    }
}

impl<T: Word> Deref for Stored<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Stored::Owned(v) => v,
            // SAFETY: `Stored::mapped` checked bounds and alignment, `T` is a `Word`
            // (every bit pattern valid), and the read-only mapping lives as long as
            // the `Arc` held here.
            Stored::Mapped { map, start, len } => unsafe {
                std::slice::from_raw_parts(map.as_ptr().add(*start).cast::<T>(), *len)
            },
        }
    }
}

impl<T> From<Vec<T>> for Stored<T> {
    fn from(v: Vec<T>) -> Self {
        Stored::Owned(v)
    }
}

/// The bytes of `values` as they lie in memory (little-endian on the machines the
/// cache is written on; see `models/pack_cache.rs`).
pub(crate) fn bytes_of<T: Word>(values: &[T]) -> &[u8] {
    // SAFETY: a `Word` has no padding; u8 has alignment 1; same extent.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}
