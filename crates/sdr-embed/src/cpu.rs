//! What the CPU offers, read from `/proc/cpuinfo`: which GEMM a dense layer uses
//! (`crate::gemm`) and what `bf16` resolves to ([`crate::Encoder::load`]) depend on it.

/// Whether the CPU has AMX-BF16 tiles that the kernel enabled (Linux lists `amx_bf16`
/// in `/proc/cpuinfo` only then).
pub fn cpu_has_amx_bf16() -> bool {
    cpuinfo_any("flags", |v| v.split_whitespace().any(|f| f == "amx_bf16"))
}

/// Whether `/proc/cpuinfo` names an Intel CPU, whose cores MKL's f32 GEMM is tuned for.
pub fn cpu_is_intel() -> bool {
    cpuinfo_any("vendor_id", |v| v.trim() == "GenuineIntel")
}

/// Whether a `/proc/cpuinfo` line `key : value` has a value for which `pred` holds
/// (`false` where the file cannot be read).
fn cpuinfo_any(key: &str, pred: impl Fn(&str) -> bool) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| {
            s.lines()
                .filter_map(|l| l.split_once(':'))
                .any(|(k, v)| k.trim() == key && pred(v))
        })
        .unwrap_or(false)
}
