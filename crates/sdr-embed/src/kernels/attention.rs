//! Self-attention over packed tokens, per sequence and head, on slices of the fused
//! `[T, 3·hidden]` q/k/v projection, with MPNet's relative-position bias:
//!
//! ```text
//! a_ij = softmax_j( q_i·k_j / √d + B[h, bucket(j − i)] ),   ctx_i = Σ_j a_ij v_j
//! ```

use rayon::prelude::*;

use super::sum16;

/// The attention's shape and relative-position bias (`[num_buckets, heads]`).
pub(crate) struct Heads<'a> {
    pub(crate) hidden: usize,
    pub(crate) heads: usize,
    pub(crate) rel_bias: &'a [f32],
}

/// Self-attention of every sequence and head: reads q, k, v from `qkv`
/// (`[T, 3·hidden]`), writes the context vectors into `ctx` (`[T, hidden]`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention(
    qkv: &[f32],
    qkv_bias: &[f32],
    lens: &[usize],
    ctx: &mut [f32],
    model: &Heads<'_>,
    buckets: &[usize],
    longest: usize,
    threads: bool,
) {
    let h = model.hidden;
    let mut starts = Vec::with_capacity(lens.len());
    let mut rest: &mut [f32] = ctx;
    let mut t0 = 0;
    for &len in lens {
        let (mine, tail) = rest.split_at_mut(len * h);
        starts.push((t0, len, mine));
        rest = tail;
        t0 += len;
    }
    let one = |(t0, len, out): (usize, usize, &mut [f32])| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                unsafe {
                    sequence_attention_avx512(qkv, qkv_bias, t0, len, out, model, buckets, longest)
                };
                return;
            }
        }
        sequence_attention(qkv, qkv_bias, t0, len, out, model, buckets, longest)
    };
    if threads {
        starts.into_par_iter().for_each(one);
    } else {
        starts.into_iter().for_each(one);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn sequence_attention_avx512(
    qkv: &[f32],
    qkv_bias: &[f32],
    t0: usize,
    len: usize,
    out: &mut [f32],
    model: &Heads<'_>,
    buckets: &[usize],
    longest: usize,
) {
    sequence_attention(qkv, qkv_bias, t0, len, out, model, buckets, longest)
}

/// `kt` (`d x lk`) = `krows` (`lk x d`) transposed: 16 keys at a time with one AVX-512
/// gather per head dimension, where the CPU has it.
#[inline(always)]
fn transpose_keys(krows: &[f32], d: usize, lk: usize, kt: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if lk.is_multiple_of(16)
            && d * 15 < i32::MAX as usize
            && std::arch::is_x86_feature_detected!("avx512f")
        {
            // SAFETY: AVX-512F is checked just above; every gathered index is below
            // `lk * d` (rows j0..j0 + 16 <= lk, column c < d).
            unsafe { transpose_keys_avx512(krows, d, lk, kt) };
            return;
        }
    }
    for j in 0..lk {
        for c in 0..d {
            kt[c * lk + j] = krows[j * d + c];
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose_keys_avx512(krows: &[f32], d: usize, lk: usize, kt: &mut [f32]) {
    use std::arch::x86_64::*;
    assert!(krows.len() >= lk * d && kt.len() >= lk * d);
    let step = d as i32;
    let idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(step),
    );
    for j0 in (0..lk).step_by(16) {
        let base = krows.as_ptr().add(j0 * d);
        for c in 0..d {
            let col = _mm512_i32gather_ps::<4>(idx, base.add(c).cast());
            _mm512_storeu_ps(kt.as_mut_ptr().add(c * lk + j0), col);
        }
    }
}

/// Queries per attention tile.
const TQ: usize = 8;
/// Keys (for the scores) or head dimensions (for the context) per attention tile.
const TN: usize = 16;

/// `C = A · B` for one `TQ x TN` tile: `A` is `TQ` rows of `kdim` values with stride
/// `lda`, `B` is `kdim` rows of `TN` values with stride `ldb`. The `TQ x TN` sums stay
/// in registers (eight 512-bit accumulators) and each row of `B` is loaded once for
/// all eight rows of `A`.
#[inline(always)]
fn tile(a: &[f32], lda: usize, b: &[f32], ldb: usize, kdim: usize, c: &mut [f32], ldc: usize) {
    let mut acc = [[0f32; TN]; TQ];
    for kk in 0..kdim {
        let brow: &[f32; TN] = b[kk * ldb..][..TN].try_into().expect("tile row");
        for (g, row) in acc.iter_mut().enumerate() {
            let av = a[g * lda + kk];
            for (x, bv) in row.iter_mut().zip(brow) {
                *x += av * bv;
            }
        }
    }
    for (g, row) in acc.iter().enumerate() {
        c[g * ldc..][..TN].copy_from_slice(row);
    }
}

/// `row[..len] = softmax(row[..len] + bias)`, `row[len..] = 0`; `row.len()` is a
/// multiple of [`TN`]. Written as whole-row passes (no reduction inside the exp loop) so
/// that each vectorises.
#[inline(always)]
fn softmax_row(row: &mut [f32], len: usize, bias: &[f32]) {
    row[..len].iter_mut().zip(bias).for_each(|(x, b)| *x += b);
    row[len..].fill(f32::NEG_INFINITY);
    let mut lanes = [f32::NEG_INFINITY; TN];
    for chunk in row.chunks_exact(TN) {
        for (m, &x) in lanes.iter_mut().zip(chunk) {
            *m = m.max(x);
        }
    }
    let max = lanes.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    for x in row.iter_mut() {
        *x = super::activation::exp_nonpositive(*x - max);
    }
    row[len..].fill(0.0);
    let inv = 1.0 / sum16(row, |x| x);
    row[..len].iter_mut().for_each(|x| *x *= inv);
}

/// One sequence: tokens `t0..t0 + len` of `qkv` (bias `qkv_bias` still to add);
/// `out` is its `[len, hidden]` context.
///
/// Per head, both products are tiled GEMMs on zero-padded copies: scores
/// `S = (Q/√d) Kᵀ` (`[len↑8, len↑16]`) and context `C = softmax(S + B) V`; the bias of
/// every offset `j − i` is laid out once per head so that query `i`'s biases are one
/// slice.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn sequence_attention(
    qkv: &[f32],
    qkv_bias: &[f32],
    t0: usize,
    len: usize,
    out: &mut [f32],
    model: &Heads<'_>,
    buckets: &[usize],
    longest: usize,
) {
    let (h, heads) = (model.hidden, model.heads);
    let d = h / heads;
    let row = 3 * h;
    let scale = 1.0 / (d as f32).sqrt();
    let lq = len.next_multiple_of(TQ);
    let lk = len.next_multiple_of(TN);
    let dp = d.next_multiple_of(TN);
    // Padding stays zero: padded queries and keys give finite scores that are dropped
    // (queries) or get probability 0 (keys), and padded value rows add nothing.
    let (qs, ks, vs) = (lq * d, d * lk, lk * dp);
    let mut q = vec![0f32; heads * qs];
    let mut kt = vec![0f32; heads * ks];
    // Keys as rows first (contiguous writes, as for q and v), then transposed per head.
    let mut krows = vec![0f32; heads * ks];
    let mut v = vec![0f32; heads * vs];
    let mut scores = vec![0f32; lq * lk];
    let mut ctx = vec![0f32; lq * dp];
    let mut bias = vec![0f32; buckets.len()];
    // One pass over the sequence's rows of `qkv` (contiguous, so prefetched), split
    // into every head's operands; head by head the rows would be read with a stride of
    // 3·hidden values, mostly missing the cache.
    for j in 0..len {
        let base = (t0 + j) * row;
        for head in 0..heads {
            let at = |part: usize| {
                let o = part * h + head * d;
                qkv[base + o..][..d].iter().zip(&qkv_bias[o..][..d])
            };
            for (dst, (&x, &b)) in q[head * qs + j * d..][..d].iter_mut().zip(at(0)) {
                *dst = (x + b) * scale;
            }
            for (dst, (&x, &b)) in krows[head * ks + j * d..][..d].iter_mut().zip(at(1)) {
                *dst = x + b;
            }
            for (dst, (&x, &b)) in v[head * vs + j * dp..][..d].iter_mut().zip(at(2)) {
                *dst = x + b;
            }
        }
    }
    for head in 0..heads {
        transpose_keys(&krows[head * ks..][..ks], d, lk, &mut kt[head * ks..][..ks]);
    }
    for head in 0..heads {
        let (q, kt, v) = (
            &q[head * qs..][..qs],
            &kt[head * ks..][..ks],
            &v[head * vs..][..vs],
        );
        for (b, &bucket) in bias.iter_mut().zip(buckets) {
            *b = model.rel_bias[bucket * heads + head];
        }
        for i0 in (0..lq).step_by(TQ) {
            for j0 in (0..lk).step_by(TN) {
                tile(
                    &q[i0 * d..],
                    d,
                    &kt[j0..],
                    lk,
                    d,
                    &mut scores[i0 * lk + j0..],
                    lk,
                );
            }
        }
        for i in 0..len {
            softmax_row(
                &mut scores[i * lk..][..lk],
                len,
                &bias[longest - 1 - i..][..len],
            );
        }
        for i0 in (0..lq).step_by(TQ) {
            for c0 in (0..dp).step_by(TN) {
                tile(
                    &scores[i0 * lk..],
                    lk,
                    &v[c0..],
                    dp,
                    lk,
                    &mut ctx[i0 * dp + c0..],
                    dp,
                );
            }
        }
        for i in 0..len {
            out[i * h + head * d..][..d].copy_from_slice(&ctx[i * dp..][..d]);
        }
    }
}
