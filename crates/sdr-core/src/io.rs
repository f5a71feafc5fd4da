//! Atomic file writes: the one writer behind every file SDR produces
//! (corpora, tables, heatmaps, JSON Lines and `.npy` outputs, caches).
//!
//! The data goes to a temporary file in the destination's folder (so the
//! final rename stays on one file system), is flushed and `fsync`ed, gets
//! mode 0644 (a temporary file is created 0600), and is then renamed over the
//! destination: a reader sees the old file or the whole new one, never a
//! partial one, even after a crash. On error or drop the temporary file is
//! removed.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// A file being written atomically: write to it (buffered), then
/// [`AtomicFile::commit`]. Dropping it uncommitted leaves the destination
/// untouched and removes the temporary file.
pub struct AtomicFile {
    dest: PathBuf,
    tmp: BufWriter<NamedTempFile>,
}

impl AtomicFile {
    /// Starts writing `dest`: creates the temporary file beside it.
    ///
    /// # Errors
    /// When the destination's folder does not exist or is not writable.
    pub fn create(dest: &Path) -> io::Result<AtomicFile> {
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = dest
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
        // `.name.XXXXXX.tmp.ext`: hidden, and with the destination's
        // extension for writers that pick a format by it (PNG).
        let suffix = match dest.extension() {
            Some(ext) => format!(".tmp.{}", ext.to_string_lossy()),
            None => ".tmp".to_string(),
        };
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.", name.to_string_lossy()))
            .suffix(&suffix)
            .tempfile_in(dir)?;
        Ok(AtomicFile {
            dest: dest.to_path_buf(),
            tmp: BufWriter::with_capacity(1 << 20, tmp),
        })
    }

    /// The temporary file's path, for writers that take a path (image
    /// encoders, `safetensors`); they must write it in place (truncate, not
    /// replace).
    pub fn temp_path(&self) -> &Path {
        self.tmp.get_ref().path()
    }

    /// The destination.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Flushes, syncs, sets mode 0644 and renames the file into place.
    ///
    /// # Errors
    /// The I/O error of the step that failed; the destination is unchanged.
    pub fn commit(self) -> io::Result<()> {
        let tmp = self
            .tmp
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        let file: &File = tmp.as_file();
        file.sync_all()?;
        set_readable(file)?;
        tmp.persist(&self.dest).map_err(|e| e.error)?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.tmp.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tmp.flush()
    }
}

#[cfg(unix)]
fn set_readable(f: &File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn set_readable(_: &File) -> io::Result<()> {
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
/// sdr_core::io::write_atomic(&p, |f| f.write_all(b"hello")).unwrap();
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

    #[test]
    fn path_writers_write_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("by-path.bin");
        write_atomic(&p, |f| std::fs::write(f.temp_path(), b"via path")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"via path");
        assert_eq!(entries(dir.path()), 1);
    }
}
