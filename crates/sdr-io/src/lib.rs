//! Atomic file writes: the one writer behind every file SDR produces
//! (corpora, tables, heatmaps, JSON Lines and `.npy` outputs, caches).
//!
//! The data goes to a temporary file in the destination's folder (so the
//! final rename stays on one file system), is flushed and `fsync`ed, gets
//! the mode of the file it replaces (0644 for a new one; a temporary file is
//! created 0600), and is then renamed over the destination: a reader sees the
//! old file or the whole new one, never a partial one, even after a crash. On
//! error or drop the temporary file is removed.
//!
//! A destination that is a symbolic link is resolved first, so the link
//! stays and its target is replaced. A destination that is not a regular
//! file (`/dev/null`, `/dev/stdout`, a FIFO, a terminal) is written in place:
//! renaming over it would replace the device or pipe, and a stream has no
//! partial state to protect.
//!
//! A signal that ends the process runs no destructor, so the temporary
//! files of writes in progress are also listed process-wide: a program's
//! signal handler calls [`remove_temporary_files`] before it exits.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use tempfile::NamedTempFile;

/// A file being written atomically: write to it (buffered), then
/// [`AtomicFile::commit`]. Dropping it uncommitted leaves the destination
/// untouched and removes the temporary file.
pub struct AtomicFile {
    dest: PathBuf,
    sink: Sink,
    /// Declared after `sink`: the path leaves the list once the temporary
    /// file has been renamed or removed.
    _pending: Option<Pending>,
}

/// Temporary files of the writes in progress, and whether
/// [`remove_temporary_files`] has run (the process is stopping).
static PENDING: Mutex<(Vec<PathBuf>, bool)> = Mutex::new((Vec::new(), false));

fn pending() -> MutexGuard<'static, (Vec<PathBuf>, bool)> {
    // A panic while the list was held leaves a valid list.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// One temporary file's place in [`PENDING`], for as long as it exists.
struct Pending(PathBuf);

impl Pending {
    fn new(path: &Path) -> Pending {
        let mut list = pending();
        if list.1 {
            // Created while the process stops: no one will rename it.
            let _ = std::fs::remove_file(path);
        } else {
            list.0.push(path.to_path_buf());
        }
        Pending(path.to_path_buf())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut list = pending();
        if let Some(i) = list.0.iter().position(|p| *p == self.0) {
            list.0.swap_remove(i);
        }
    }
}

/// Removes the temporary files of every write in progress and returns how
/// many it removed; later writes remove theirs at once. For a signal
/// handler that is about to end the process (SIGINT, SIGTERM), where no
/// destructor runs: the destinations keep their old contents.
pub fn remove_temporary_files() -> usize {
    let mut list = pending();
    list.1 = true;
    list.0
        .drain(..)
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

enum Sink {
    /// A regular file (or none yet): temporary file, then rename over
    /// `target` (the destination with its symbolic links followed), keeping
    /// the replaced file's `mode`.
    Replace {
        tmp: BufWriter<NamedTempFile>,
        target: PathBuf,
        mode: Option<u32>,
    },
    /// A device, FIFO or `/proc` stream: written in place.
    InPlace(BufWriter<File>),
}

/// How many symbolic links [`resolve_links`] follows (as Linux's `ELOOP`).
const MAX_LINKS: usize = 40;

/// Follows `path`'s symbolic links to the path a rename must replace; a
/// dangling link resolves to the file it names.
fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        "too many levels of symbolic links",
    ))
}

/// Whether `dest` must be written in place: an existing non-regular file,
/// or a path under `/dev` or `/proc` (`/dev/stdout` names a stream, and its
/// link target `pipe:[N]` is no file a rename could replace).
fn is_stream(dest: &Path) -> io::Result<bool> {
    if dest.starts_with("/dev") || dest.starts_with("/proc") {
        return Ok(true);
    }
    match std::fs::metadata(dest) {
        Ok(m) if m.is_dir() => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a folder, not a file",
        )),
        Ok(m) => Ok(!m.is_file()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

impl AtomicFile {
    /// Starts writing `dest`: creates the temporary file beside it (beside
    /// the target of a symbolic link), or opens a device or FIFO in place.
    ///
    /// # Errors
    /// When the destination's folder does not exist or is not writable, or
    /// the destination is a folder.
    pub fn create(dest: &Path) -> io::Result<AtomicFile> {
        if is_stream(dest)? {
            let f = OpenOptions::new().write(true).open(dest)?;
            return Ok(AtomicFile {
                dest: dest.to_path_buf(),
                sink: Sink::InPlace(BufWriter::with_capacity(1 << 16, f)),
                _pending: None,
            });
        }
        let target = resolve_links(dest)?;
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = target
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
        // `.name.XXXXXX.tmp.ext`: hidden, and with the destination's
        // extension for writers that pick a format by it (PNG).
        let suffix = match target.extension() {
            Some(ext) => format!(".tmp.{}", ext.to_string_lossy()),
            None => ".tmp".to_string(),
        };
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.", name.to_string_lossy()))
            .suffix(&suffix)
            .tempfile_in(dir)
            .map_err(without_temp_path)?;
        let mode = existing_mode(&target);
        let pending = Pending::new(tmp.path());
        Ok(AtomicFile {
            dest: dest.to_path_buf(),
            sink: Sink::Replace {
                tmp: BufWriter::with_capacity(1 << 20, tmp),
                target,
                mode,
            },
            _pending: Some(pending),
        })
    }

    /// The path to write for writers that take a path (image encoders,
    /// `safetensors`): the temporary file, or the device itself; they must
    /// write it in place (truncate, not replace).
    pub fn temp_path(&self) -> &Path {
        match &self.sink {
            Sink::Replace { tmp, .. } => tmp.get_ref().path(),
            Sink::InPlace(_) => &self.dest,
        }
    }

    /// The destination, as given.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Flushes, syncs, sets the mode and renames the file into place (for a
    /// device or FIFO: flushes).
    ///
    /// # Errors
    /// The I/O error of the step that failed; the destination is unchanged.
    pub fn commit(self) -> io::Result<()> {
        match self.sink {
            Sink::InPlace(mut w) => w.flush(),
            Sink::Replace { tmp, target, mode } => {
                let tmp = tmp
                    .into_inner()
                    .map_err(|e| without_temp_path(e.into_error()))?;
                let file: &File = tmp.as_file();
                file.sync_all()?;
                set_mode(file, mode)?;
                tmp.persist(&target).map_err(|e| e.error)?;
                Ok(())
            }
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match &mut self.sink {
            Sink::Replace { tmp, .. } => tmp,
            Sink::InPlace(w) => w,
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer().write(buf).map_err(without_temp_path)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer().write_all(buf).map_err(without_temp_path)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush().map_err(without_temp_path)
    }
}

/// `err` without the ` at path ".NAME.XXXXXX.tmp"` that `tempfile` appends:
/// callers name the destination, and the hidden temporary file, gone by the
/// time the message is read, would only confuse.
fn without_temp_path(err: io::Error) -> io::Error {
    if err.raw_os_error().is_some() || err.get_ref().is_none() {
        return err;
    }
    let text = err.to_string();
    match text.rfind(" at path \"") {
        Some(at) => io::Error::new(err.kind(), text[..at].to_string()),
        None => err,
    }
}

/// The permission bits of the regular file being replaced, so that an
/// output kept private (0600) stays private.
#[cfg(unix)]
fn existing_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn existing_mode(_: &Path) -> Option<u32> {
    None
}

#[cfg(unix)]
fn set_mode(f: &File, mode: Option<u32>) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(mode.unwrap_or(0o644)))
}

#[cfg(not(unix))]
fn set_mode(_: &File, _: Option<u32>) -> io::Result<()> {
    Ok(())
}

/// Writes `path` atomically with `write` (see the module docs): the
/// destination is replaced only when `write` and the commit succeed.
///
/// # Errors
/// The error of `write`, or the I/O error of creating, syncing or renaming
/// the temporary file; the caller adds the path to its own error.
///
/// ```
/// use std::io::Write;
/// let dir = std::env::temp_dir().join(format!("sdr-io-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let p = dir.join("out.txt");
/// sdr_io::write_atomic(&p, |f| f.write_all(b"hello")).unwrap();
/// assert_eq!(std::fs::read(&p).unwrap(), b"hello");
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn write_atomic<F>(path: &Path, write: F) -> io::Result<()>
where
    F: FnOnce(&mut AtomicFile) -> io::Result<()>,
{
    let mut f = AtomicFile::create(path)?;
    write(&mut f)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn writes_replaces_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        write_atomic(&p, |f| f.write_all(b"one")).unwrap();
        write_atomic(&p, |f| f.write_all(b"two")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        // A failing writer leaves the old file and no temporary file.
        let e = write_atomic(&p, |f| {
            f.write_all(b"partial")?;
            Err(io::Error::other("boom"))
        });
        assert!(e.is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(entries(dir.path()), 1);
        assert!(write_atomic(&dir.path().join("missing/x.txt"), |_| Ok(())).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn files_are_world_readable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.bin");
        write_atomic(&p, |f| f.write_all(b"x")).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }

    #[cfg(unix)]
    #[test]
    fn replacing_keeps_the_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("private.txt");
        std::fs::write(&p, b"old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&p, |f| f.write_all(b"new")).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_stay_and_their_targets_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        std::fs::write(&target, b"old").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink("target.txt", &link).unwrap();
        write_atomic(&link, |f| f.write_all(b"new")).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // A dangling link gets its target created.
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink("made.txt", &dangling).unwrap();
        write_atomic(&dangling, |f| f.write_all(b"x")).unwrap();
        assert_eq!(std::fs::read(dir.path().join("made.txt")).unwrap(), b"x");
        assert_eq!(entries(dir.path()), 4);
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_written_in_place() {
        let null = Path::new("/dev/null");
        if !null.exists() {
            return;
        }
        write_atomic(null, |f| f.write_all(b"discarded")).unwrap();
        let m = std::fs::metadata(null).unwrap();
        assert!(!m.is_file(), "/dev/null must stay a device");
    }

    #[test]
    fn a_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = write_atomic(dir.path(), |f| f.write_all(b"x")).unwrap_err();
        assert!(e.to_string().contains("folder"), "{e}");
        assert_eq!(entries(dir.path()), 0);
    }

    #[test]
    fn errors_do_not_name_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = AtomicFile::create(&dir.path().join("gone/x.txt")).err();
        let text = e.expect("no folder").to_string();
        assert!(
            !text.contains(".tmp") && !text.contains("at path"),
            "{text}"
        );
        assert!(text.contains("No such file"), "{text}");
    }

    #[test]
    fn path_writers_write_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("by-path.bin");
        write_atomic(&p, |f| std::fs::write(f.temp_path(), b"via path")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"via path");
        assert_eq!(entries(dir.path()), 1);
    }
}
