//! An output folder written all or nothing: every file is rendered to a
//! temporary file beside its destination first, and renamed into place only
//! when all are written (what `sdr select-eval` does with its tables and
//! heatmaps).

use std::io::Write;
use std::path::{Path, PathBuf};

use sdr_io::AtomicFile;

use crate::error::{EvalError, Result};
#[cfg(feature = "heatmap")]
use crate::heatmap::Heatmap;

/// A file of an output folder, rendered in memory until [`publish`].
#[derive(Debug, Clone, PartialEq)]
pub enum Artifact {
    /// A text file (Markdown, CSV), written as it is.
    Text(String),
    /// A heatmap, drawn as a PNG (the `heatmap` feature).
    #[cfg(feature = "heatmap")]
    Png(Heatmap),
}

/// Writes every `(name, artifact)` into `dir` (made if needed) all or
/// nothing: each goes to a temporary file first, and the files are renamed
/// into place only when all are written. On failure the temporary files and
/// the folders this call made are removed, so a failed call leaves nothing
/// behind.
///
/// # Errors
/// [`EvalError::IsAFolder`] when a destination is a folder (checked before
/// anything is written), [`EvalError::CreateDir`], [`EvalError::Write`], or
/// a heatmap's drawing error.
pub fn publish(dir: &Path, files: &[(String, Artifact)]) -> Result<()> {
    for (name, _) in files {
        let dest = dir.join(name);
        if dest.is_dir() {
            return Err(EvalError::IsAFolder { path: dest });
        }
    }
    // The folders to make, outermost last, to remove them again on failure.
    let made: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .map(Path::to_path_buf)
        .collect();
    std::fs::create_dir_all(dir).map_err(|source| EvalError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let staged = files
        .iter()
        .map(|(name, art)| {
            let dest = dir.join(name);
            let write = |source| EvalError::Write {
                path: dest.clone(),
                source,
            };
            let mut f = AtomicFile::create(&dest).map_err(write)?;
            match art {
                Artifact::Text(t) => f
                    .write_all(t.as_bytes())
                    .and_then(|()| f.flush())
                    .map_err(write)?,
                #[cfg(feature = "heatmap")]
                Artifact::Png(hm) => hm.render_png_into(&mut f)?,
            }
            Ok((dest, f))
        })
        .collect::<Result<Vec<_>>>();
    let staged = match staged {
        Ok(s) => s,
        Err(e) => {
            // The temporary files are gone with the failed collection.
            for d in &made {
                let _ = std::fs::remove_dir(d);
            }
            return Err(e);
        }
    };
    for (dest, f) in staged {
        f.commit()
            .map_err(|source| EvalError::Write { path: dest, source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_files_or_none() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("a/b");
        let files = vec![
            ("x.md".to_string(), Artifact::Text("x\n".into())),
            ("y.csv".to_string(), Artifact::Text("y\r\n".into())),
        ];
        publish(&out, &files).unwrap();
        assert_eq!(std::fs::read_to_string(out.join("x.md")).unwrap(), "x\n");
        assert_eq!(std::fs::read_to_string(out.join("y.csv")).unwrap(), "y\r\n");

        // A blocked destination: nothing is written, no folder is left.
        let out = dir.path().join("c/d");
        std::fs::create_dir_all(out.join("y.csv")).unwrap();
        let e = publish(&out, &files).unwrap_err().to_string();
        assert!(
            e.starts_with("cannot write ") && e.ends_with("y.csv: is a folder"),
            "{e}"
        );
        assert!(!out.join("x.md").exists());

        #[cfg(feature = "heatmap")]
        {
            // A heatmap that cannot be drawn: the folder made for it is removed.
            let out = dir.path().join("e/f");
            let bad = Heatmap {
                title: "t".into(),
                subtitle: String::new(),
                row_labels: vec![],
                row_groups: vec![],
                columns: vec![],
                values: vec![],
                bertscore_encoder: None,
            };
            let mut with_bad = files.clone();
            with_bad.push(("h.png".into(), Artifact::Png(bad)));
            publish(&out, &with_bad).unwrap_err();
            assert!(!dir.path().join("e").exists());
        }
    }
}
