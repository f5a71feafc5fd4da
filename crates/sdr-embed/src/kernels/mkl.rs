//! Intel MKL's GEMMs for the dense layers (the `mkl` build): f32 on weights packed once
//! (`cblas_sgemm_pack`) and bf16 (`cblas_gemm_bf16bf16f32_compute`) on packed bf16 weights.

use candle_core::Result;
use candle_nn::Linear;
use half::bf16;

// MKL's CBLAS enums (mkl_cblas.h).
const CBLAS_ROW_MAJOR: i32 = 101;
const CBLAS_NO_TRANS: i32 = 111;
const CBLAS_TRANS: i32 = 112;

// mkl_cblas.h: CBLAS_IDENTIFIER's CblasBMatrix, and CblasPacked for `transb`.
const CBLAS_B_MATRIX: i32 = 162;
const CBLAS_PACKED: i32 = 151;

extern "C" {
    fn cblas_sgemm_pack_get_size(identifier: i32, m: i32, n: i32, k: i32) -> usize;
    // Intel OpenMP (linked with MKL): how long a worker spins after a parallel
    // region before it sleeps.
    fn kmp_set_blocktime(msec: i32);
    fn cblas_sgemm_pack(
        layout: i32,
        identifier: i32,
        trans: i32,
        m: i32,
        n: i32,
        k: i32,
        alpha: f32,
        src: *const f32,
        ld: i32,
        dest: *mut f32,
    );
    fn cblas_sgemm_compute(
        layout: i32,
        trans_a: i32,
        trans_b: i32,
        m: i32,
        n: i32,
        k: i32,
        a: *const f32,
        lda: i32,
        b: *const f32,
        ldb: i32,
        beta: f32,
        c: *mut f32,
        ldc: i32,
    );
    // MKL_BF16 is u16 bits; MKL_INT is i32 in the LP64 interface that candle links.
    fn cblas_gemm_bf16bf16f32_pack_get_size(identifier: i32, m: i32, n: i32, k: i32) -> usize;
    fn cblas_gemm_bf16bf16f32_pack(
        layout: i32,
        identifier: i32,
        trans: i32,
        m: i32,
        n: i32,
        k: i32,
        src: *const u16,
        ld: i32,
        dest: *mut u16,
    );
    fn cblas_gemm_bf16bf16f32_compute(
        layout: i32,
        trans_a: i32,
        trans_b: i32,
        m: i32,
        n: i32,
        k: i32,
        alpha: f32,
        a: *const u16,
        lda: i32,
        b: *const u16,
        ldb: i32,
        beta: f32,
        c: *mut f32,
        ldc: i32,
    );
}

/// Called before MKL's first parallel region: its OpenMP workers sleep as soon as
/// a region ends instead of spinning for 200 ms on a core that the rayon pool or
/// the trainer beside `sdr` could use. The weights are packed on OpenMP threads
/// at load, and a worker then spun into the first batches: an f32 `sdr embed` of
/// 1,000 sentences used 0.1-0.3 s less CPU with this (wall time the same within
/// the host's noise), `--parallelism gemm` about 3 % less (bench/README.md).
fn quiet_openmp() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: sets a runtime setting; no memory is passed.
    ONCE.call_once(|| unsafe { kmp_set_blocktime(0) });
}

/// The `m` that B is packed for. MKL lays a packed B out for the kernel it would
/// pick at that `m`. Packed for `m = 1`, every product over a batch's hundreds of
/// token rows copied B again into the large-`m` kernel's panels
/// (`mkl_blas_avx512_sgemm_scopy_down48_ea`, 8-9 % of an f32 `sdr embed`'s CPU time
/// in perf). Packed for 256, one thread ran the encoder's four shapes at 200-210
/// GFLOP/s from m = 192 up (185-190 before), and no slower at any m from 1 to 1024
/// (packed for 16-64, most products ran slower than packed for 1). The results are
/// bit-identical (bench/README.md).
const PACK_ROWS: i32 = 256;

/// Storage of one packed matrix: `bytes` from a 64-byte boundary (MKL asks for
/// aligned storage), in a heap block that never moves once packed, as MKL also
/// requires.
struct PackBuf {
    buf: Vec<u8>,
    start: usize,
}

impl PackBuf {
    fn new(bytes: usize) -> Self {
        let buf = vec![0u8; bytes + 64];
        let start = buf.as_ptr().align_offset(64);
        Self { buf, start }
    }

    fn ptr<T>(&self) -> *const T {
        self.buf[self.start..].as_ptr().cast()
    }

    fn ptr_mut<T>(&mut self) -> *mut T {
        self.buf[self.start..].as_mut_ptr().cast()
    }
}

/// `Wᵀ` (`k x n`) in MKL's packed layout, for `cblas_sgemm_compute`.
pub struct PackedB {
    buf: PackBuf,
    n: usize,
    k: usize,
}

impl PackedB {
    /// Packs `Wᵀ` for `w` (`n x k`, row-major).
    pub fn new(w: &[f32], n: usize, k: usize) -> Self {
        assert_eq!(w.len(), n * k, "sgemm pack: weights are not n x k");
        quiet_openmp();
        // SAFETY: a size query.
        let bytes =
            unsafe { cblas_sgemm_pack_get_size(CBLAS_B_MATRIX, PACK_ROWS, n as i32, k as i32) };
        let mut buf = PackBuf::new(bytes);
        // SAFETY: `w` is n x k row-major, i.e. Wᵀ (k x n) transposed with ld = k;
        // the destination holds `bytes` from a 64-byte boundary.
        unsafe {
            cblas_sgemm_pack(
                CBLAS_ROW_MAJOR,
                CBLAS_B_MATRIX,
                CBLAS_TRANS,
                PACK_ROWS,
                n as i32,
                k as i32,
                1.0,
                w.as_ptr(),
                k as i32,
                buf.ptr_mut(),
            )
        };
        Self { buf, n, k }
    }

    /// `y = x Wᵀ` for `x` of `m` rows (`m x k`; `y`: `m x n`, row-major, not read).
    pub fn gemm(&self, x: &[f32], m: usize, y: &mut [f32]) {
        let (n, k) = (self.n, self.k);
        assert!(
            x.len() >= m * k && y.len() >= m * n,
            "sgemm: slices too short"
        );
        // SAFETY: x is m x k and y is m x n, row-major with the leading dimensions
        // passed; B was packed for this n and k.
        unsafe {
            cblas_sgemm_compute(
                CBLAS_ROW_MAJOR,
                CBLAS_NO_TRANS,
                CBLAS_PACKED,
                m as i32,
                n as i32,
                k as i32,
                x.as_ptr(),
                k as i32,
                self.buf.ptr(),
                n as i32,
                0.0,
                y.as_mut_ptr(),
                n as i32,
            )
        }
    }
}

/// `W` as bf16 bits, `[out, in]` row-major, and the f32 bias.
pub struct Bf16Linear {
    /// `Wᵀ` in MKL's packed bf16 layout (see [`PACK_ROWS`]).
    packed: PackBuf,
    bias: Option<Vec<f32>>,
    pub(crate) out_dim: usize,
    pub(crate) in_dim: usize,
}

impl Bf16Linear {
    pub fn new(linear: &Linear) -> Result<Self> {
        let (w, n, k, bias) = super::f32_parts(linear)?;
        Ok(Self::from_slice(&w, n, k, bias))
    }

    /// From f32 `w` (`n x k`, out x in, row-major, e.g. read in place from the
    /// checkpoint) and the bias: no candle tensor and no f32 copy on the way.
    pub fn from_slice(w: &[f32], out_dim: usize, in_dim: usize, bias: Option<Vec<f32>>) -> Self {
        quiet_openmp();
        // The activations' vectorised rounding (to nearest even, as
        // `bf16::from_f32`): rows of `in_dim.div_ceil(2)` pairs, so the leading
        // dimension is even.
        let mut pairs = Vec::new();
        crate::kernels::avx512_gemm::pack_rows_into(w, out_dim, in_dim, &mut pairs);
        let ld = 2 * in_dim.div_ceil(2);
        // Packed once here: `cblas_gemm_bf16bf16f32` packed `W` again on every
        // call (`gemm_bf16bf16f32_copy_right32`, a tenth of the bf16 encoder's
        // time in perf); packed, an `sdr embed --precision bf16` of 1,000
        // sentences used 8-15 % less CPU, with bit-identical results.
        let (n, k) = (out_dim as i32, in_dim as i32);
        // SAFETY: a size query.
        let bytes =
            unsafe { cblas_gemm_bf16bf16f32_pack_get_size(CBLAS_B_MATRIX, PACK_ROWS, n, k) };
        let mut packed = PackBuf::new(bytes);
        // SAFETY: `pairs` holds n rows of `ld` bf16 values, W (n x k) row-major,
        // i.e. Wᵀ transposed; the destination holds `bytes` from a 64-byte
        // boundary.
        unsafe {
            cblas_gemm_bf16bf16f32_pack(
                CBLAS_ROW_MAJOR,
                CBLAS_B_MATRIX,
                CBLAS_TRANS,
                PACK_ROWS,
                n,
                k,
                pairs.as_ptr().cast(),
                ld as i32,
                packed.ptr_mut(),
            )
        };
        Self {
            packed,
            bias,
            out_dim,
            in_dim,
        }
    }

    /// `x`: `m x in_dim` row-major (checked by the caller).
    pub fn forward_slice(&self, x: &[f32], m: usize) -> Vec<f32> {
        let mut c = Vec::new();
        self.gemm_into(x, m, &mut c);
        c
    }

    /// `c = x Wᵀ + b`, `c` resized to `m x out_dim` (its allocation reused).
    pub fn gemm_into(&self, x: &[f32], m: usize, c: &mut Vec<f32>) {
        let (n, k) = (self.out_dim, self.in_dim);
        // bf16 pairs in order are the bf16 values in order (little-endian), so an
        // even `k` takes the vectorised conversion, into this thread's buffer (a
        // twelfth of the bf16 encoder's time when scalar into a fresh one).
        thread_local! {
            static PAIRS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let mut pairs = PAIRS.with(|p| p.take());
        let scalar: Vec<u16>;
        let a: *const u16 = if k % 2 == 0 {
            crate::kernels::avx512_gemm::pack_rows_into(x, m, k, &mut pairs);
            pairs.as_ptr().cast()
        } else {
            scalar = x.iter().map(|&v| bf16::from_f32(v).to_bits()).collect();
            scalar.as_ptr()
        };
        c.clear();
        match &self.bias {
            Some(b) => (0..m).for_each(|_| c.extend_from_slice(b)),
            None => c.resize(m * n, 0.0),
        }
        if m > 0 {
            // SAFETY: a is m×k and c is m×n, row-major and contiguous with the
            // leading dimensions passed; B was packed for this n and k.
            unsafe {
                cblas_gemm_bf16bf16f32_compute(
                    CBLAS_ROW_MAJOR,
                    CBLAS_NO_TRANS,
                    CBLAS_PACKED,
                    m as i32,
                    n as i32,
                    k as i32,
                    1.0,
                    a,
                    k as i32,
                    self.packed.ptr(),
                    k as i32,
                    1.0,
                    c.as_mut_ptr(),
                    n as i32,
                );
            }
        }
        PAIRS.with(|p| p.replace(pairs));
    }
}
