//! The paper's prompts (appendix B) and what a back-end receives.

use std::path::{Path, PathBuf};

use base64::Engine;

use crate::GenError;

/// The paper's zero-shot prompt `[p1]`, verbatim.
pub const P1: &str = include_str!("../prompts/p1.txt");
/// The paper's five-shot prompt `[p2]`, verbatim.
pub const P2: &str = include_str!("../prompts/p2.txt");

/// An image attached to the prompt; servers receive it as a data URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// MIME type, e.g. `image/png`.
    pub mime: String,
    /// The encoded file.
    pub bytes: Vec<u8>,
}

impl Image {
    /// Reads an image file; the MIME type comes from the extension.
    pub fn from_file(path: &Path) -> Result<Self, GenError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let mime = match ext.as_deref() {
            Some("png") => "image/png",
            Some("jpg" | "jpeg") => "image/jpeg",
            Some("webp") => "image/webp",
            Some("gif") => "image/gif",
            _ => {
                return Err(GenError::Input(format!(
                    "{}: unsupported image type (png, jpeg, webp or gif)",
                    path.display()
                )))
            }
        };
        let bytes = std::fs::read(path).map_err(|source| GenError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self {
            mime: mime.into(),
            bytes,
        })
    }

    /// `data:<mime>;base64,<...>`, as chat-completions servers accept in `image_url`.
    pub fn data_url(&self) -> String {
        format!(
            "data:{};base64,{}",
            self.mime,
            base64::engine::general_purpose::STANDARD.encode(&self.bytes)
        )
    }
}

/// One user turn (plus an optional system turn) with optional images.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prompt {
    /// System message, when the template has one.
    pub system: Option<String>,
    /// The user message.
    pub user: String,
    /// Images, sent after the text.
    pub images: Vec<Image>,
}

/// Where the prompt text comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptTemplate {
    /// The paper's zero-shot prompt.
    P1,
    /// The paper's five-shot prompt.
    P2,
    /// A prompt file of the user's.
    File(PathBuf),
}

impl PromptTemplate {
    /// `p1`, `p2`, or a path to a prompt file.
    pub fn parse(s: &str) -> Self {
        match s {
            "p1" => Self::P1,
            "p2" => Self::P2,
            path => Self::File(PathBuf::from(path)),
        }
    }

    /// The template's name in output records.
    pub fn name(&self) -> String {
        match self {
            Self::P1 => "p1".into(),
            Self::P2 => "p2".into(),
            Self::File(p) => p.display().to_string(),
        }
    }

    /// The prompt text, trimmed.
    pub fn text(&self) -> Result<String, GenError> {
        let t = match self {
            Self::P1 => P1.to_string(),
            Self::P2 => P2.to_string(),
            Self::File(p) => std::fs::read_to_string(p).map_err(|source| {
                if source.kind() == std::io::ErrorKind::NotFound {
                    GenError::Input(format!(
                        "prompt {}: neither a built-in prompt (p1, p2) nor an existing prompt file",
                        p.display()
                    ))
                } else {
                    GenError::Io {
                        path: p.clone(),
                        source,
                    }
                }
            })?,
        };
        let t = t.trim().to_string();
        if t.is_empty() {
            return Err(GenError::Input(format!("prompt {} is empty", self.name())));
        }
        Ok(t)
    }

    /// The prompt for one study. A text-only model sees no image, so
    /// `context` (e.g. the study's indication) can be appended after the
    /// template, before its final `Output:` line when there is one.
    pub fn render(&self, context: Option<&str>, images: Vec<Image>) -> Result<Prompt, GenError> {
        let mut user = self.text()?;
        if let Some(ctx) = context.map(str::trim).filter(|c| !c.is_empty()) {
            match user.rfind("\nOutput:") {
                Some(at) if user[at..].trim() == "Output:" => {
                    user.insert_str(at, &format!("\n{ctx}\n"));
                }
                _ => {
                    user.push_str("\n\n");
                    user.push_str(ctx);
                }
            }
        }
        Ok(Prompt {
            system: None,
            user,
            images,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_prompts_end_with_output() {
        for t in [PromptTemplate::P1, PromptTemplate::P2] {
            let text = t.text().unwrap();
            assert!(text.ends_with("Output:"), "{}", t.name());
            assert!(text.contains("Findings: <text>"));
            assert!(text.contains("Impression: <text>"));
        }
        assert_eq!(P2.matches("\nExample ").count(), 5);
    }

    #[test]
    fn context_goes_before_output() {
        let p = PromptTemplate::P1
            .render(Some("Indication: chest pain."), vec![])
            .unwrap();
        assert!(p
            .user
            .ends_with("structured.\n\nIndication: chest pain.\n\nOutput:"));
        let plain = PromptTemplate::P1.render(Some("  "), vec![]).unwrap();
        assert_eq!(plain.user, P1.trim());
    }

    #[test]
    fn data_url() {
        let img = Image {
            mime: "image/png".into(),
            bytes: vec![0x89, b'P', b'N', b'G'],
        };
        assert_eq!(img.data_url(), "data:image/png;base64,iVBORw==");
    }

    #[test]
    fn bad_inputs() {
        let e = Image::from_file(Path::new("x.tiff")).unwrap_err();
        assert!(e.to_string().contains("x.tiff"));
        let e = PromptTemplate::parse("/nonexistent/prompt.txt")
            .text()
            .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/prompt.txt"));
        let e = PromptTemplate::parse("p3").text().unwrap_err().to_string();
        assert!(
            e.contains("prompt p3: neither a built-in prompt (p1, p2) nor an existing prompt file"),
            "{e}"
        );
    }
}
