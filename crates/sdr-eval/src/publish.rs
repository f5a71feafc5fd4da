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

/// The file in an output folder that lists what the last [`publish`] wrote there,
/// one name per line after a comment line.
pub const MANIFEST: &str = ".sdr-files";

/// The names the manifest of `dir` lists (none when it has none), keeping only
/// plain relative names: a manifest edited by hand cannot point outside `dir`.
fn listed(dir: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(dir.join(MANIFEST)) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter(|l| {
            Path::new(l)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
        })
        .map(str::to_string)
        .collect()
}

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
/// The folder's [`MANIFEST`] lists the names written; the files an earlier call
/// listed there and this one does not write (a group with no study this time)
/// are removed once the new ones are in place, so that the folder never mixes
/// two runs. Files that no call listed are never touched. Returns the names
/// removed.
///
/// # Errors
/// [`EvalError::IsAFolder`] when a destination is a folder (checked before
/// anything is written), [`EvalError::CreateDir`], [`EvalError::Write`], or
/// a heatmap's drawing error.
pub fn publish(dir: &Path, files: &[(String, Artifact)]) -> Result<Vec<String>> {
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
    let earlier = listed(dir);
    let mut manifest = String::from(
        "# The files sdr wrote here last; its next run into this folder removes those it does \
         not write again.\n",
    );
    for (name, _) in files {
        manifest.push_str(name);
        manifest.push('\n');
    }
    let manifest = (MANIFEST.to_string(), Artifact::Text(manifest));
    let staged = files
        .iter()
        .chain(std::iter::once(&manifest))
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
    let mut removed = Vec::new();
    for name in earlier {
        let path = dir.join(&name);
        if files.iter().any(|(n, _)| *n == name) || !path.is_file() {
            continue;
        }
        std::fs::remove_file(&path).map_err(|source| EvalError::Write { path, source })?;
        removed.push(name);
    }
    Ok(removed)
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
        assert!(publish(&out, &files).unwrap().is_empty());
        assert_eq!(std::fs::read_to_string(out.join("x.md")).unwrap(), "x\n");
        assert_eq!(std::fs::read_to_string(out.join("y.csv")).unwrap(), "y\r\n");

        // A later run that writes fewer files removes the earlier run's others, and
        // only those: a file of the user's, or one a hand-edited manifest points
        // outside the folder, stays.
        std::fs::write(out.join("mine.txt"), "mine").unwrap();
        std::fs::write(dir.path().join("outside.md"), "keep").unwrap();
        let manifest = std::fs::read_to_string(out.join(MANIFEST)).unwrap();
        assert!(manifest.ends_with("\nx.md\ny.csv\n"), "{manifest}");
        std::fs::write(out.join(MANIFEST), format!("{manifest}../../outside.md\n")).unwrap();
        let fewer = vec![("y.csv".to_string(), Artifact::Text("y2\n".into()))];
        assert_eq!(publish(&out, &fewer).unwrap(), ["x.md"]);
        assert!(!out.join("x.md").exists());
        assert_eq!(std::fs::read_to_string(out.join("y.csv")).unwrap(), "y2\n");
        assert!(out.join("mine.txt").exists() && dir.path().join("outside.md").exists());
        assert!(publish(&out, &files).unwrap().is_empty());

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
