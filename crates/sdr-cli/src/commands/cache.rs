//! `sdr cache`: list and clean the packed-weights cache (sdr-embed's
//! `models/pack_cache.rs`): one file per model folder, precision and GEMM, which no
//! load ever removes, so folders that are gone or changed leave theirs behind.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use sdr_embed::{
    list_packed_cache, packed_cache_dir, remove_lone_locks, remove_packed_entry, PackedEntry,
    Removal, PACKED_CACHE_ENV,
};

use crate::common::{log_line, print_stdout};

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
sdr cache list\n  \
sdr cache prune --dry-run\n  \
sdr cache prune\n  \
sdr cache clear --dir /scratch/sdr-packed\n\n\
The cache holds the encoder's packed weights (436 MB in f32, 266 MB in bf16), one file per\n\
model folder, precision and GEMM, which every process on the machine maps. A file is valid\n\
while its model folder exists with the same model.safetensors and config.json; removing any\n\
file is safe (the next load of its model writes it again). A file that another process is\n\
packing now (its lock is held) is skipped. Only files named as SDR names them\n\
(<model>-<f32|bf16>-<gemm>-<hash>.pack, their empty .lock files and temporary files) are\n\
listed or removed: any other file in the folder is left alone.")]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
    /// The cache folder (default: the loader's: $SDR_PACKED_CACHE, else
    /// ${SDR_HOME:-~/.cache/sdr}/packed). A missing folder is an empty cache.
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
pub enum Sub {
    /// Each file: its model folder, precision, size, and whether a load would still use it.
    List(ListArgs),
    /// Remove the files no load will use again: folder gone, weights or config changed, older format, damaged.
    Prune(RemoveArgs),
    /// Remove every cache file (each model is packed again at its next load); other files stay.
    Clear(RemoveArgs),
}

#[derive(clap::Args)]
#[command(after_help = "Status of a file:\n  \
valid             a load of its folder on this machine maps it\n  \
other CPU or GEMM packed for another machine's GEMM (a shared home folder); kept\n  \
newer format      written by a newer SDR; kept\n  \
unchecked         could not be checked (permissions); kept\n  \
folder gone, weights gone, weights changed, config changed, renamed, older format,\n  \
damaged, unfinished write (a killed packer's temporary file): removed by `sdr cache prune`.\n\n\
The listing checks each file's header and key; damage inside the weights is found by the\n\
next load, which rebuilds the file.")]
pub struct ListArgs {
    /// JSON Lines, one object per file (path, bytes, folder, precision, status, detail,
    /// valid, stale), instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct RemoveArgs {
    /// Print what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: Args) -> Result<()> {
    let Some(dir) = cache_dir(args.dir.as_deref()) else {
        return Ok(());
    };
    if dir.exists() && !dir.is_dir() {
        return Err(anyhow!("{}: not a folder", name_dir(&args.dir, &dir)));
    }
    let entries = list_packed_cache(&dir).with_context(|| name_dir(&args.dir, &dir))?;
    match args.command {
        Sub::List(a) => list(&dir, &entries, a.json),
        Sub::Prune(a) => {
            let stale: Vec<&PackedEntry> = entries.iter().filter(|e| e.status.is_stale()).collect();
            if stale.is_empty() {
                print_stdout(&format!(
                    "nothing to prune in {} ({})\n",
                    dir.display(),
                    count(entries.len(), total(&entries))
                ))?;
                return Ok(());
            }
            remove(&dir, &stale, a.dry_run)
        }
        Sub::Clear(a) => remove(&dir, &entries.iter().collect::<Vec<_>>(), a.dry_run),
    }
}

/// The folder to work on, or `None` (said on stderr) when there is no cache.
fn cache_dir(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(d) = flag {
        return Some(d.to_path_buf());
    }
    if let Some(d) = packed_cache_dir() {
        return Some(d);
    }
    match std::env::var_os(PACKED_CACHE_ENV) {
        Some(v) if v == "off" || v == "0" => log_line(format_args!(
            "sdr: {PACKED_CACHE_ENV}={}: there is no packed-weights cache (weights are packed in memory)",
            v.to_string_lossy()
        )),
        _ => log_line(format_args!(
            "sdr: no packed-weights cache folder: none of {PACKED_CACHE_ENV}, SDR_HOME, HOME is set (or pass --dir)"
        )),
    }
    None
}

/// How errors name the folder: as `--dir` when given there.
fn name_dir(flag: &Option<PathBuf>, dir: &Path) -> String {
    match flag {
        Some(_) => format!("--dir {}", dir.display()),
        None => format!("packed-weights cache {}", dir.display()),
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn total(entries: &[PackedEntry]) -> u64 {
    entries.iter().map(|e| e.bytes).sum()
}

fn count(n: usize, bytes: u64) -> String {
    format!("{n} file{}, {}", if n == 1 { "" } else { "s" }, mb(bytes))
}

/// The model folder, or the file's name where the file does not record it.
fn folder_or_file(e: &PackedEntry) -> String {
    match &e.folder {
        Some(f) => f.display().to_string(),
        None => format!(
            "({})",
            e.path.file_name().unwrap_or_default().to_string_lossy()
        ),
    }
}

/// One line of `sdr cache list --json`.
#[derive(serde::Serialize)]
struct JsonEntry<'a> {
    path: std::borrow::Cow<'a, str>,
    bytes: u64,
    folder: Option<std::borrow::Cow<'a, str>>,
    precision: Option<&'a str>,
    status: &'static str,
    detail: Option<&'a str>,
    valid: bool,
    stale: bool,
}

fn list(dir: &Path, entries: &[PackedEntry], json: bool) -> Result<()> {
    let mut out = String::new();
    if json {
        for e in entries {
            let line = JsonEntry {
                path: e.path.to_string_lossy(),
                bytes: e.bytes,
                folder: e.folder.as_ref().map(|f| f.to_string_lossy()),
                precision: e.precision.as_deref(),
                status: e.status.label(),
                detail: e.status.detail(),
                valid: e.status.is_valid(),
                stale: e.status.is_stale(),
            };
            out.push_str(&serde_json::to_string(&line).context("cannot encode an entry")?);
            out.push('\n');
        }
        return print_stdout(&out);
    }
    if entries.is_empty() {
        return print_stdout(&format!("{}: empty\n", dir.display()));
    }
    let rows: Vec<[String; 4]> = entries
        .iter()
        .map(|e| {
            [
                folder_or_file(e),
                e.precision.clone().unwrap_or_else(|| "?".into()),
                mb(e.bytes),
                e.status.to_string(),
            ]
        })
        .collect();
    let head = ["folder", "precision", "size", "status"].map(String::from);
    let width = |i: usize| {
        rows.iter()
            .chain([&head])
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    out.push_str(&format!("{}\n", dir.display()));
    for r in std::iter::once(&head).chain(&rows) {
        out.push_str(&format!(
            "{:<w0$}  {:<w1$}  {:>w2$}  {}\n",
            r[0], r[1], r[2], r[3]
        ));
    }
    let stale: Vec<&PackedEntry> = entries.iter().filter(|e| e.status.is_stale()).collect();
    let stale_bytes = stale.iter().map(|e| e.bytes).sum();
    out.push_str(&count(entries.len(), total(entries)));
    if stale.is_empty() {
        out.push('\n');
    } else {
        out.push_str(&format!(
            "; stale: {} (`sdr cache prune` removes them)\n",
            count(stale.len(), stale_bytes)
        ));
    }
    print_stdout(&out)
}

/// Removes `entries` (or says what would go), then lone lock files; fails at the
/// end, in one line, if any could not be removed.
fn remove(dir: &Path, entries: &[&PackedEntry], dry_run: bool) -> Result<()> {
    let what = |e: &PackedEntry| {
        let mut s = format!("{} ({}, {}", e.path.display(), mb(e.bytes), e.status);
        if let Some(f) = &e.folder {
            s.push_str(&format!("; packed from {}", f.display()));
        }
        s.push(')');
        s
    };
    let (mut removed, mut freed, mut busy) = (0usize, 0u64, 0usize);
    let mut failed: Vec<String> = Vec::new();
    for e in entries {
        if dry_run {
            print_stdout(&format!("would remove {}\n", what(e)))?;
            removed += 1;
            freed += e.bytes;
            continue;
        }
        match remove_packed_entry(e) {
            Ok(Removal::Removed) => {
                print_stdout(&format!("removed {}\n", what(e)))?;
                removed += 1;
                freed += e.bytes;
            }
            Ok(Removal::Busy) => {
                busy += 1;
                print_stdout(&format!(
                    "skipped {}: another process is packing it now\n",
                    e.path.display()
                ))?;
            }
            Ok(Removal::Changed) => {
                busy += 1;
                print_stdout(&format!(
                    "skipped {}: rewritten or removed since it was listed\n",
                    e.path.display()
                ))?;
            }
            Err(err) => failed.push(format!("{}: {err}", e.path.display())),
        }
    }
    if !dry_run {
        remove_lone_locks(dir).with_context(|| dir.display().to_string())?;
    }
    let mut summary = if dry_run {
        format!("would remove {}", count(removed, freed))
    } else {
        format!("removed {} freed", count(removed, freed))
    };
    if busy > 0 {
        summary.push_str(&format!("; {busy} skipped"));
    }
    print_stdout(&format!("{summary}\n"))?;
    match failed.first() {
        None => Ok(()),
        Some(first) => Err(anyhow!(
            "could not remove {} of {} files; the first: {first}",
            failed.len(),
            entries.len()
        )),
    }
}
